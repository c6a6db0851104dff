"""The gate's error rates on real runs, alone and beside a CPU hog.

    .venv/bin/python bench/gate_verdicts.py [--aa 30] [--ab 10] [--hog] [--history]

``ab``: ``perfstack ab --fail-on-regression 5%`` of tests/workloads/ab_work.py against itself
(A/A: a gated session is a false alarm) and against ab_work_b.py (30% more matrix products in
one function: a session that does not gate on throughput is a miss).

``--history``: a workload in a git repository of its own, run 6 times (runs 2 and 4 beside two
busy loops), then a commit that doubles its work and 5 more runs; then ``perfstack trend`` and
``perfstack gate`` on that history: the step must be found at run 7 (the commit) and the gate
must fail.

``--hog`` runs everything again beside busy loops (``while True: pass``; ``--hogs N``, default
two), each in a session of its own, for the whole measurement. Run it alone otherwise.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

from timing import perfstack_command

ROOT = Path(__file__).resolve().parent.parent
A = ROOT / "tests/workloads/ab_work.py"
B = ROOT / "tests/workloads/ab_work_b.py"


def _perfstack(cwd: Path, *args: str, env: dict[str, str] | None = None
               ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([perfstack_command(), *args], cwd=cwd,
                          capture_output=True, text=True, check=False,
                          env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})})


@contextlib.contextmanager
def hogs(on: bool, count: int = 2) -> Iterator[None]:
    """Busy loops beside the measurement, each in a session of its own, stopped after."""
    procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"],
                              start_new_session=True) for _ in range(count if on else 0)]
    try:
        yield
    finally:
        for p in procs:
            p.kill()
            p.wait()


def ab_rates(cwd: Path, aa: int, ab: int, repeat: int) -> tuple[int, int]:
    """Return (A/A sessions gated, A/B sessions caught on throughput)."""
    gated = caught = 0
    plan = [("A/A", A, A)] * aa + [("A/B", A, B)] * ab
    for n, (kind, base, new) in enumerate(plan):
        proc = _perfstack(cwd, "ab", "--plugins", "resources", "--repeat", str(repeat),
                          "--fail-on-regression", "5%", "--format", "json",
                          "--out-dir", str(cwd / f"ab-{n}"), str(base), str(new),
                          env={"PERFSTACK_HISTORY": "off"})
        if proc.returncode not in (0, 1):
            raise SystemExit(f"perfstack ab failed: {proc.stderr[-2000:]}")
        data = json.loads(proc.stdout)
        lead = data.get("lead") or {}
        bad = data.get("gate", {}).get("regressions", [])
        if kind == "A/A":
            gated += proc.returncode == 1
        else:
            caught += proc.returncode == 1 and "throughput" in bad
        print(f"  {kind} {n + 1:2d}: exit {proc.returncode}  {lead.get('figure')} "
              f"{100 * (lead.get('figure_change') or 0):+6.1f}% "
              f"{lead.get('figure_verdict')}  gated: {', '.join(bad) or '-'}", flush=True)
        shutil.rmtree(cwd / f"ab-{n}", ignore_errors=True)
    return gated, caught


WORK = '''import time
import perfstack

def work(n):
    total = 0
    for i in range(n):
        total += i * i % 7
    return total

start = time.perf_counter()
for _ in range(20):
    work({n})
    perfstack.step()
rate = 20 / (time.perf_counter() - start)
print(f"throughput: {{rate:.2f}} steps/s")
perfstack.report_metric("throughput", rate, "steps/s", "higher")
'''


def history_case(cwd: Path) -> None:
    """6 runs (2 disturbed), a commit doubling the work, 5 runs; then trend and gate."""
    repo = cwd / "repo"
    repo.mkdir()
    env = {"GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@b", "GIT_COMMITTER_NAME": "b",
           "GIT_COMMITTER_EMAIL": "b@b"}

    def git(*args: str) -> None:
        subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                       env={**os.environ, **env})

    script = repo / "train.py"
    git("init", "-q")
    db = cwd / "history.sqlite"
    for i in range(11):
        if i in (0, 6):
            script.write_text(WORK.format(n=150_000 if i == 0 else 300_000))
            git("add", "train.py")
            git("commit", "-q", "-m", f"work {i}")
        with hogs(i in (1, 3)):
            proc = _perfstack(repo, "run", "-q", "--plugins", "resources", "--repeat", "3",
                              "-o", str(cwd / f"run-{i}.json"), "train.py",
                              env={"PERFSTACK_HISTORY": str(db)})
        if proc.returncode != 0:
            raise SystemExit(f"perfstack run failed: {proc.stderr[-2000:]}")
    listed = _perfstack(cwd, "history", "--db", str(db), "--format", "json")
    for run in json.loads(listed.stdout):
        print(f"  run {run['id']:2d} {str(run['commit'])[:7]} disturbed: {run['disturbed']}")
    trend = _perfstack(cwd, "trend", "--db", str(db), env={"COLUMNS": "100"})
    print(trend.stdout)
    gate = _perfstack(cwd, "gate", "--db", str(db), env={"COLUMNS": "100"})
    print(f"gate exit {gate.returncode}\n{gate.stdout}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--aa", type=int, default=30)
    parser.add_argument("--ab", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--hog", action="store_true", help="beside busy loops")
    parser.add_argument("--hogs", type=int, default=2, help="how many busy loops (default 2)")
    parser.add_argument("--history", action="store_true", help="the history case only")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="perfstack-gate-") as tmp:
        cwd = Path(tmp)
        if args.history:
            history_case(cwd)
            return
        where = f"beside {args.hogs} busy loop(s)" if args.hog else "alone"
        print(f"ab, {where}: {args.aa} A/A and {args.ab} A/B sessions, {args.repeat} pairs")
        with hogs(args.hog, args.hogs):
            gated, caught = ab_rates(cwd, args.aa, args.ab, args.repeat)
        print(f"ab, {where}: A/A gated {gated} of {args.aa}; A/B caught {caught} of {args.ab}")


if __name__ == "__main__":
    main()
