"""The first screen's headline on a quiet machine and beside CPU hogs, run after run.

    .venv/bin/python bench/busy_headline.py [--runs 10] [--hogs 1] [--plugins ...]

Runs the README's workload (workloads/tiny_mlp.py, 40 batches) ``--runs`` times alone, then as
many times beside busy loops (``while True: pass``, each in a session of its own), alternating
so that both see the same hours of the machine. For each run it keeps the Answer's first
sentence at 80 columns and the top finding's rule, and prints how many runs of each kind gave
each headline: the quiet runs should agree with each other, the busy ones should all lead with
"The machine was busy". Run it alone on the machine.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gate_verdicts import hogs
from timing import perfstack_command

ROOT = Path(__file__).resolve().parent.parent


def headline(cwd: Path, plugins: str) -> tuple[str, str]:
    """One run's Answer headline (its first sentence, the figures out) and top finding."""
    proc = subprocess.run(
        [perfstack_command(), "run", "--plugins", plugins, "-o", "r.json",
         str(ROOT / "workloads/tiny_mlp.py"), "--", "--num-batches", "40"],
        cwd=cwd, capture_output=True, text=True, check=False,
        env={**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "80",
             "PERFSTACK_HISTORY": "off"})
    out = proc.stdout
    if "Answer" not in out:
        return f"(no answer: exit {proc.returncode})", "-"
    answer = " ".join(out[out.index("Answer") + len("Answer"):].split("\n\n")[0].split())
    first = answer.split(":")[0]  # "The machine was busy", "Mostly start-up"...
    findings = json.loads((cwd / "r.json").read_text())["findings"]
    return first, findings[0]["rule"] if findings else "-"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10, help="runs of each kind (default 10)")
    parser.add_argument("--hogs", type=int, default=1, help="busy loops beside (default 1)")
    parser.add_argument("--plugins", default="torch,pyspy,perftop,resources")
    args = parser.parse_args()
    seen: dict[str, Counter[tuple[str, str]]] = {"alone": Counter(), "busy": Counter()}
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(2 * args.runs):
            kind = "busy" if i % 2 else "alone"
            with hogs(kind == "busy", args.hogs):
                got = headline(Path(tmp), args.plugins)
            seen[kind][got] += 1
            print(f"run {i + 1:2d} {kind:5s} {got[0]!r} (top finding {got[1]})", flush=True)
    for kind, counts in seen.items():
        where = "alone" if kind == "alone" else f"beside {args.hogs} busy loop(s)"
        print(f"\n{where}, {sum(counts.values())} runs:")
        for (first, rule), n in counts.most_common():
            print(f"  {n:2d}  {first!r}  (top finding {rule})")


if __name__ == "__main__":
    main()
