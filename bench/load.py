"""A load test: many runs in a row and rounds of runs at once, writing one SQLite history.

    .venv/bin/python bench/load.py [--in-a-row 30] [--rounds 4] [--at-once 4]

In one fresh folder: ``--in-a-row`` runs one after another (several start within one second of
each other, as the run folders' clock ticks), then ``--rounds`` rounds of ``--at-once`` runs
started together, every one writing the folder's default history. Then it checks what a user
relies on and prints one line per promise with its count:

- every run exited 0 and wrote a report that validates against the schema;
- every run folder is its own (no two runs share one) and holds one report;
- the history lists every run exactly once, each entry naming its own report;
- the history's integrity check says "ok";
- no process of these runs is left (each run's environment carries a mark, searched in
  /proc afterwards).

Exit 0 when every promise held, 1 otherwise. The workload is tests/workloads/busy.py under the
resources backend, so the runs are short and the test is of perfstack, not of a profiler. Run
it alone on the machine: it is a test of correctness under contention it makes itself.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from timing import perfstack_command

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

MARK = "PERFSTACK_LOAD_MARK"


def _command() -> list[str]:
    return [perfstack_command(), "run", "--plugins", "resources", "--repeat",
            "1", "--warmup", "0", "-q", str(ROOT / "tests/workloads/busy.py")]


def _left_running(mark: str) -> list[int]:
    """Processes whose environment carries this load test's mark."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue
        if f"{MARK}={mark}".encode() in environ.split(b"\0"):
            found.append(int(entry.name))
    return found


def main() -> int:
    """Run the load test; print what held."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--in-a-row", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--at-once", type=int, default=4)
    ns = parser.parse_args()
    from perfstack import history
    from perfstack.report.files import load_report, schema_errors

    mark = uuid.uuid4().hex
    env = {**os.environ, "PYTHONPATH": str(ROOT), MARK: mark}
    env.pop(history.HISTORY_ENV, None)
    with tempfile.TemporaryDirectory(prefix="perfstack-load-") as tmp:
        cwd = Path(tmp)
        codes: list[int] = []
        start = time.monotonic()
        for _ in range(ns.in_a_row):
            codes.append(subprocess.run(_command(), cwd=cwd, env=env, capture_output=True,
                                        check=False).returncode)
        for _ in range(ns.rounds):
            procs = [subprocess.Popen(_command(), cwd=cwd, env=env,
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                     for _ in range(ns.at_once)]
            codes += [p.wait() for p in procs]
        took = time.monotonic() - start
        total = ns.in_a_row + ns.rounds * ns.at_once
        runs = cwd / ".perfstack" / "runs"
        folders = sorted(p for p in runs.iterdir() if p.is_dir() and not p.is_symlink())
        reports = [f / "report.json" for f in folders if (f / "report.json").is_file()]
        valid = sum(1 for r in reports
                    if not schema_errors(json.loads(r.read_text(encoding="utf-8"))))
        db = cwd / ".perfstack" / history.FILE_NAME
        entries = history.runs(db)
        listed = [os.path.realpath(e.report_path) for e in entries]
        once = len(set(listed)) == len(listed) and sorted(listed) == sorted(
            os.path.realpath(r) for r in reports)
        integrity = history.integrity(db)
        for report in reports[:1]:
            load_report(report)  # it reads back through the product's own reader too
        left = _left_running(mark)
        checks = [
            (f"runs exited 0: {codes.count(0)}/{total}", codes.count(0) == total),
            (f"run folders, each with a report: {len(reports)}/{total} in {len(folders)}",
             len(folders) == total and len(reports) == total),
            (f"reports valid against the schema: {valid}/{total}", valid == total),
            (f"history entries: {len(entries)} for {total} runs, each once, each its own "
             f"report: {once}", len(entries) == total and once),
            (f"history integrity: {integrity}", integrity == "ok"),
            (f"processes left running: {len(left)}", not left),
        ]
    print(f"{ns.in_a_row} runs in a row, then {ns.rounds} rounds of {ns.at_once} at once, "
          f"one SQLite history: {took:.0f} s")
    for line, held in checks:
        print(f"  {'ok ' if held else 'FAIL'} {line}")
    return 0 if all(held for _, held in checks) else 1


if __name__ == "__main__":
    raise SystemExit(main())
