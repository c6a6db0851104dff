"""Benchmark: `perfstack diff` of two large reports, against loading the same reports alone.

    python bench/diff.py                    # makes two reports from a long torch run first
    python bench/diff.py A.json B.json      # or uses yours

The reports come from ResNet-50 training under the torch (every op and shape, Python stacks),
py-spy and perf-record backends, recording 20 steps: thousands of rows. Both timings run
in this process (the command as users run it, start included, is `bench/read_reports.py`),
interleaved, --rounds times; their medians and the ratio within each round (min, median,
max) are printed. The target is a diff in well under a second.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from timing import perfstack_command, spread

ROOT = Path(__file__).resolve().parent.parent


def make_reports(folder: Path) -> tuple[Path, Path]:
    """Run ResNet-50 twice under torch, pyspy and perftop; return the two reports."""
    out = []
    for name in ("a", "b"):
        path = folder / f"{name}.json"
        subprocess.run([perfstack_command(), "run", "--plugins",
                        "torch,pyspy,perftop", "--repeat", "2", "--torch-active", "20",
                        "--torch-stack", "-q", "-o", str(path),
                        str(ROOT / "workloads" / "resnet50.py"), "--", "--num-batches", "30"],
                       cwd=folder, check=True, stdout=subprocess.DEVNULL)
        out.append(path)
    return out[0], out[1]


def main() -> None:
    """Print load-only and load+diff medians and their ratio."""
    from perfstack.analysis.diff import diff
    from perfstack.render.diff import render_text
    from perfstack.report.files import load_report

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("reports", nargs="*", type=Path)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    keep = tempfile.TemporaryDirectory()
    a, b = args.reports if len(args.reports) == 2 else make_reports(Path(keep.name))
    rows = sum(len(v) for v in load_report(a).layers.values())
    print(f"reports: {a.stat().st_size / 1e6:.1f} MB and {b.stat().st_size / 1e6:.1f} MB, "
          f"{rows} rows in the first")
    load_t, diff_t, only_t = [], [], []
    for _ in range(args.rounds):
        start = time.perf_counter()
        ra, rb = load_report(a), load_report(b)
        loaded = time.perf_counter()
        render_text(diff(ra, rb, str(a), str(b)))
        done = time.perf_counter()
        load_t.append(loaded - start)
        diff_t.append(done - start)
        only_t.append(done - loaded)
    lo, di, on = (statistics.median(x) for x in (load_t, diff_t, only_t))
    print(f"load both reports          {lo * 1e3:8.1f} ms (median of {args.rounds})")
    per_round = [d / load for d, load in zip(diff_t, load_t, strict=True)]
    print(f"load + diff + render text  {di * 1e3:8.1f} ms   over the load alone, within each "
          f"round (min / median / max): {spread(per_round)}")
    print(f"diff + render alone        {on * 1e3:8.1f} ms")


if __name__ == "__main__":
    main()
