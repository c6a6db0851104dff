"""How soon ``perfstack run`` says its first answer, against the workload's own time.

    .venv/bin/python bench/quick.py [--rounds 3] [--workload 'workloads/tiny_mlp.py']
        [--default]

The workload is the README's own command (``workloads/tiny_mlp.py`` as it is, unless
``--workload`` names another). Each round times, side by side and in an order reversed from
the round before: the workload run plainly, and the installed ``perfstack run --quick``
(the py-spy run first, its answer said on stderr as soon as it is in, then one baseline run
and the report); with ``--default``, also the default ``perfstack run`` (the README's main
command). For each perfstack command it prints when the first answer came ("so far" on
stderr) and when the report did, as a ratio to the plain run of the same round: min, median
and max over the rounds. Run it alone on the machine.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from timing import add_workload, perfstack_command, workload_of

ROOT = Path(__file__).resolve().parent.parent


def _timed(argv: list[str], cwd: str) -> tuple[float | None, float]:
    """Seconds until stderr says the answer so far (None for a plain run), and until the
    command ended."""
    start = time.perf_counter()
    answer = None
    with subprocess.Popen(argv, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                          text=True) as proc:
        assert proc.stderr is not None
        for line in proc.stderr:
            if answer is None and "so far (" in line:
                answer = time.perf_counter() - start
    total = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv)}: exit {proc.returncode}")
    return answer, total


def _spread(values: list[float]) -> str:
    return (f"{min(values):5.2f}x {statistics.median(values):6.2f}x {max(values):6.2f}x"
            if values else "  (no answer said)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    add_workload(parser)
    parser.add_argument("--default", action="store_true",
                        help="also time the default perfstack run (about 13x the workload)")
    ns = parser.parse_args()
    script, args = workload_of(ns)
    perfstack = perfstack_command()
    commands = {"python script.py": [sys.executable, script, *args],
                "perfstack run --quick": [perfstack, "run", "--quick", script, "--", *args]}
    if ns.default:
        commands["perfstack run"] = [perfstack, "run", script, "--", *args]
    answers: dict[str, list[float]] = {name: [] for name in commands}
    reports: dict[str, list[float]] = {name: [] for name in commands}
    names = list(commands)
    plain_s: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in range(ns.rounds):
            took = {name: _timed(commands[name], tmp)
                    for name in (names if n % 2 == 0 else reversed(names))}
            plain = took["python script.py"][1]
            plain_s.append(plain)
            for name, (answer, total) in took.items():
                if answer is not None:
                    answers[name].append(answer / plain)
                reports[name].append(total / plain)
    print(f"{ns.workload}, {ns.rounds} rounds; ratios to the plain run of the same round "
          "(min, median, max)")
    print(f"  python script.py       {statistics.median(plain_s):.2f} s (median; the reference)")
    for name in names[1:]:
        print(f"  {name:<22} first answer {_spread(answers[name])}   report "
              f"{_spread(reports[name])}")


if __name__ == "__main__":
    main()
