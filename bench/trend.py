"""Change-point detection's cost: one long series, many series, and `perfstack trend` whole.

    .venv/bin/python bench/trend.py [--rounds 3]

1. detection over one series of 10,000 runs (3% noise, a 10% step at run 6,000);
2. detection over 200 series x 500 runs (3% noise; every tenth series steps 10% at run 300),
   in one process, as `perfstack trend` does;
3. `perfstack trend --format json` end to end on a history of 500 runs with 200 series each
   (11 metrics and 189 rows of one layer, `--rows 189`): read, detect, write.

Each is timed --rounds times, alone; medians. The targets (issue 18): a trend over 200 series
within 1 s. Every series is checked against its truth as it is timed: a detector that finds
nothing is fast for no good reason.
"""

from __future__ import annotations

import argparse
import copy
import json
import random
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from timing import perfstack_command

from perfstack import history
from perfstack.history import Entry, Group, changepoints, trend
from perfstack.report import Layer, Quantity, Row
from perfstack.report.files import load_report, save_report

ROOT = Path(__file__).resolve().parent.parent


def _series(n: int, at: int | None, rng: random.Random) -> list[float | None]:
    return [100 * (1 + rng.gauss(0, 0.03)) * (1.10 if at is not None and i >= at else 1.0)
            for i in range(n)]


def _group(series: dict[str, list[float | None]], n: int) -> Group:
    runs = [Entry(i, f"2026-01-01T{i:06d}", ["w"], None, None, None, "m", "", None)
            for i in range(n)]
    return Group(["w"], "w", "m", runs, series, {k: ("s", "run", "lower") for k in series},
                 {}, {})


def _time(fn: object, rounds: int) -> float:
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        fn()  # type: ignore[operator]
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _history(folder: Path, runs: int, rows: int) -> Path:
    base = load_report(ROOT / "tests/fixtures/reports/v1-busy.json")
    db = folder / "history.sqlite"
    rng = random.Random(1)
    for i in range(runs):
        report = copy.deepcopy(base)
        report.run.started = f"2026-01-{1 + i // 24 % 28:02d}T{i % 24:02d}:{i // 672:02d}:00"
        report.layers[Layer.KERNEL] = [
            Row(f"k{k}", f"row {k}", "bench",
                {"time": Quantity((k + 1) * 1e-3 * (1 + rng.gauss(0, 0.03)), "s")})
            for k in range(rows)]
        path = folder / f"r{i}.json"
        save_report(report, path)
        history.add(db, report, path)
    return db


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    rng = random.Random(0)

    long = _series(10_000, 6_000, rng)
    steps, _ = changepoints.detect([float(v) for v in long if v is not None], 0.05)
    assert any(abs(s.index - 6_000) <= 2 for s in steps), steps
    one = _time(lambda: changepoints.detect([float(v) for v in long if v is not None], 0.05),
                args.rounds)
    print(f"one series of 10,000 runs: {one:.2f} s ({len(steps)} change point(s) found)")

    many = {f"s{k}": _series(500, 300 if k % 10 == 0 else None, rng) for k in range(200)}
    group = _group(many, 500)
    found = trend.analyse(group, 0.05)
    stepped = {v.series.key for v in found.verdicts if v.changes}
    assert {f"s{k}" for k in range(0, 200, 10)} <= stepped, sorted(stepped)
    t_many = _time(lambda: trend.analyse(group, 0.05), args.rounds)
    print(f"200 series x 500 runs: {t_many:.2f} s = {t_many / 1.0:.2f}x the 1 s target "
          f"({len(stepped)} series with change points; 20 have a true step)")

    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        db = _history(Path(tmp), 500, 189)
        build = time.perf_counter() - start
        command = [perfstack_command(), "trend", "--db", str(db), "--rows",
                   "189", "--format", "json"]
        out = subprocess.run(command, capture_output=True, text=True, check=True)
        verdicts = json.loads(out.stdout)[0]["verdicts"]
        assert len(verdicts) >= 200, len(verdicts)  # 11 metrics, 189 + 10 rows
        whole = _time(lambda: subprocess.run(command, capture_output=True, check=True),
                      args.rounds)
        print(f"perfstack trend, 500 runs x {len(verdicts)} series from SQLite: {whole:.2f} s "
              f"whole (process start and imports included); the history itself was written in "
              f"{build:.1f} s ({1e3 * build / 500:.1f} ms per report with its 189 rows, "
              f"save_report included)")


if __name__ == "__main__":
    main()
