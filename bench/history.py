"""The history write per report, against writing the report itself.

    .venv/bin/python bench/history.py [--rounds 7] [--rows 2000 20000]

For each size: a real report (tests/fixtures/reports/v1-busy.json) with that many rows added,
written with save_report, then added to a fresh history database (one transaction: the run,
its metrics and every row's primary value). Medians of the rounds; the ratio of the history
write to the report write. The target is at most 50 ms per report of a usual size.
"""

from __future__ import annotations

import argparse
import copy
import statistics
import tempfile
import time
from pathlib import Path

from timing import spread

from perfstack import history
from perfstack.report import Layer, Quantity, Row
from perfstack.report.files import load_report, save_report

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--rows", type=int, nargs="+", default=[2000, 20000])
    args = parser.parse_args()
    base = load_report(ROOT / "tests/fixtures/reports/v1-busy.json")
    for rows in args.rows:
        writes, adds = [], []
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            db = folder / "history.sqlite"
            for i in range(args.rounds):
                report = copy.deepcopy(base)
                report.run.started = f"2026-11-22T00:00:{i:02d}+00:00"
                report.layers[Layer.KERNEL] = [
                    Row(f"k{k}", f"row {k}", "bench", {"time": Quantity(k * 1e-4, "s")})
                    for k in range(rows)]
                path = folder / f"r{i}.json"
                start = time.perf_counter()
                save_report(report, path)
                writes.append(time.perf_counter() - start)
                start = time.perf_counter()
                history.add(db, report, path)
                adds.append(time.perf_counter() - start)
        w, a = statistics.median(writes), statistics.median(adds)
        per_round = [add / write for add, write in zip(adds, writes, strict=True)]
        print(f"{rows:>6} rows: report write {1e3 * w:7.1f} ms, history add {1e3 * a:7.1f} ms "
              f"(medians of {args.rounds}); history add / report write within each round: "
              f"{spread(per_round)} (min / median / max)")


if __name__ == "__main__":
    main()
