"""Every command of perfstack in each of its phases, under each stopping signal: what happens.

    .venv/bin/python bench/signal_matrix.py [--signals INT,TERM,HUP] [--markdown]

For each (command, phase, signal) a real perfstack is started on a real workload, the signal
is sent when the phase has begun (a line it prints, a file it writes, else a delay), and the
outcome is checked against the promise (docs/reliability.md): the exit code is 128 + the
signal (or the command had already ended: 0), no traceback, nothing of the workload left
running, and the report, where one is written, valid JSON. Prints one row a case; with
--markdown, the table docs/reliability.md holds. Runs alone: a few minutes on 2 CPUs.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PERFSTACK = [sys.executable, "-m", "perfstack"]
WORKLOADS = ROOT / "tests" / "workloads"
TRACES = ROOT / "tests" / "fixtures" / "gpu-traces"

#: A phase: (command, phase, argv after 'perfstack', when to send: a line of stderr that
#: starts it, a file that appears, or seconds after the start)
Case = tuple[str, str, list[str], str | Path | float]


def _setup(folder: Path) -> None:
    """What the cases read: a job of ranks, two reports, a history of runs."""
    import gzip

    job = folder / "job"
    job.mkdir()
    with gzip.open(TRACES / "a100_negq" / "rank-0.json.gz", "rt", encoding="utf-8") as fh:
        data = json.load(fh)
    del data["distributedInfo"]  # each file's rank is then its name's
    with gzip.open(job / "rank-0.json.gz", "wt", encoding="utf-8", compresslevel=1) as fh:
        json.dump(data, fh)
    for rank in range(1, 6):
        shutil.copyfile(job / "rank-0.json.gz", job / f"rank-{rank}.json.gz")
    (folder / "slow.py").write_text("import time\nt = time.time()\n"
                                    "while time.time() - t < 3:\n    pass\n")


def cases(folder: Path) -> list[Case]:
    """The commands and phases covered."""
    slow = str(folder / "slow.py")
    plug = ["-p", "tests.testplugins.slowcollect"]
    return [
        ("run", "importing perfstack", ["run", "--plugins", "resources", slow], 0.05),
        ("run", "the baseline run", ["run", "--plugins", "resources", "--repeat", "2", slow],
         1.5),
        ("run", "a backend's own run (py-spy)", ["run", "--plugins", "pyspy,resources", slow],
         1.5),
        ("run", "a backend's collect", [*plug, "run", "--plugins", "slowcollect", "--repeat",
                                        "0", "--warmup", "0", slow],
         folder / "collecting"),
        ("analyze", "reading ranks (a local pool)", ["analyze", str(folder / "job"),
                                                     "--jobs", "2", "-o", "a.json"],
         "perfstack: read "),
        ("ab", "an interleaved run", ["ab", "--plugins", "resources", "--repeat", "2", slow,
                                      slow], 1.5),
        ("sweep", "a setting's run", ["sweep", "--env", "OMP_NUM_THREADS=1,2", "--plugins",
                                      "resources", slow], 1.5),
    ]


def _alive(pattern: str) -> list[str]:
    found = subprocess.run(["pgrep", "-af", pattern], capture_output=True, text=True).stdout
    return [ln for ln in found.splitlines() if "pgrep" not in ln]


def one(folder: Path, case: Case, sig: signal.Signals) -> dict[str, object]:
    """Run one case; return what happened."""
    command, phase, argv, when = case
    work = Path(tempfile.mkdtemp(dir=folder))
    env = {**os.environ, "PYTHONPATH": str(ROOT), "SLOW_COLLECT_MARK": str(folder / "collecting"),
           "PERFSTACK_HISTORY": "off"}
    (folder / "collecting").unlink(missing_ok=True)
    proc = subprocess.Popen([*PERFSTACK, *argv], cwd=work, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    said: list[str] = []
    start = time.monotonic()
    if isinstance(when, float):
        time.sleep(when)
    elif isinstance(when, Path):
        while not when.exists() and proc.poll() is None and time.monotonic() - start < 60:
            time.sleep(0.05)
    else:
        for line in proc.stderr:
            said.append(line)
            if line.startswith(when) or proc.poll() is not None:
                break
    sent = time.monotonic()
    ended_first = proc.poll() is not None
    proc.send_signal(sig)
    try:
        said.append(proc.communicate(timeout=120)[1])
    except subprocess.TimeoutExpired:
        proc.kill()
        said.append(proc.communicate()[1])
    took = time.monotonic() - sent
    time.sleep(0.3)
    left = _alive(str(folder / "slow.py")) + _alive("perfstack.inprocess.bootstrap")
    reports = [p for p in work.rglob("*.json") if p.name in ("report.json", "a.json")]
    valid = all(_valid(p) for p in reports)
    err = "".join(said)
    ok = (proc.returncode in (128 + sig, 0 if ended_first else -1) and not left and valid
          and "Traceback" not in err)
    return {"command": command, "phase": phase, "signal": sig.name, "exit": proc.returncode,
            "seconds": round(took, 2), "left_running": len(left), "report": bool(reports),
            "traceback": "Traceback" in err, "ok": ok}


def _valid(path: Path) -> bool:
    try:
        json.loads(path.read_text())
    except (OSError, ValueError):
        return False
    return True


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--signals", default="INT,TERM,HUP")
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args()
    sigs = [signal.Signals[f"SIG{s.strip()}"] for s in args.signals.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        _setup(folder)
        rows = [one(folder, case, sig) for case in cases(folder) for sig in sigs]
    if args.markdown:
        print("| command | phase | signal | exit | stopped in | left running | report | ok |")
        print("| --- | --- | --- | --- | --- | --- | --- | --- |")
        for r in rows:
            print(f"| `{r['command']}` | {r['phase']} | {r['signal']} | {r['exit']} | "
                  f"{r['seconds']} s | {r['left_running']} | {'partial' if r['report'] else '-'}"
                  f" | {'yes' if r['ok'] else '**no**'} |")
    else:
        for r in rows:
            print(json.dumps(r))
    bad = [r for r in rows if not r["ok"]]
    print(f"{len(rows) - len(bad)} of {len(rows)} cases kept the promise", file=sys.stderr)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
