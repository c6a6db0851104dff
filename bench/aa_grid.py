"""The interleaved comparison's false alarms and power on simulated sessions, over the grid of
noise and run counts users have (issue 71): what `perfstack ab` decides, metric by metric and
for a session's family of metrics, with fixed seeds.

    .venv/bin/python bench/aa_grid.py [--reps 400] [--seed 57] [--metrics 12]

A session: ``--metrics`` metrics judged together as one `ab` session judges them (the
paired test, ``stats.compare_paired``, on each; Holm's weighted step-down over them with the
workload's figure holding half the weight, as ``diff._family_wise`` does). Each run is
slowed by its own log-normal load (sd 0.05 to 0.3) that every metric of the run shares, each
metric adds 2% of its own noise; the first metric is the workload's figure. Printed: the A/A
rate (any metric called changed) for 3, 5 and 10 runs a side; the rate the figure is caught
when it is 30% slower (sd 0.1, 5 runs a side); and with one run 3x slower (sd 0.05): the A/A
rate and the rate a 30% change is still caught. ``--no-outlier-rule`` judges without the
paired test's outlier rule, to weigh what it costs and buys.
"""

from __future__ import annotations

import argparse
import math
import random

from perfstack.analysis import stats
from perfstack.analysis.diff import FIGURE_WEIGHT
from perfstack.analysis.stats import holm


def _session(rng: random.Random, n: int, sd: float, effect: float, metrics: int,
             outlier: bool) -> tuple[bool, bool]:
    """One simulated session: (any metric called changed, the figure called changed)."""
    base: list[list[float]] = [[] for _ in range(metrics)]
    new: list[list[float]] = [[] for _ in range(metrics)]
    for i in range(n):
        load_a, load_b = math.exp(rng.gauss(0, sd)), math.exp(rng.gauss(0, sd))
        if outlier and i == 0:
            load_b *= 3
        for k in range(metrics):
            base[k].append((1 + k) * load_a * math.exp(rng.gauss(0, 0.02)))
            new[k].append((1 + k) * load_b * math.exp(rng.gauss(0, 0.02))
                          * (1 + effect if k == 0 else 1.0))
    found = [stats.compare_paired(b, a) for a, b in zip(new, base, strict=True)]
    pvalues = [c.pvalue if c.pvalue is not None else 1.0 for c in found]
    weights = [FIGURE_WEIGHT] + [(1 - FIGURE_WEIGHT) / (metrics - 1)] * (metrics - 1)
    kept = [k and bool(c.significant) for k, c in
            zip(holm(pvalues, 0.05, weights), found, strict=True)]
    return any(kept), kept[0]


def _rates(n: int, sd: float, effect: float, args: argparse.Namespace,
           outlier: bool = False) -> tuple[float, float]:
    rng = random.Random(args.seed)
    hits = [_session(rng, n, sd, effect, args.metrics, outlier) for _ in range(args.reps)]
    return (100 * sum(a for a, _ in hits) / args.reps,
            100 * sum(f for _, f in hits) / args.reps)


def main() -> None:
    """Print the grid."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--reps", type=int, default=400)
    p.add_argument("--seed", type=int, default=57)
    p.add_argument("--metrics", type=int, default=12)
    p.add_argument("--no-outlier-rule", action="store_true")
    args = p.parse_args()
    if args.no_outlier_rule:
        stats._without_outliers = lambda diffs: diffs  # type: ignore[assignment]
    print(f"{args.reps} sessions a cell, seed {args.seed}, {args.metrics} metrics a session"
          + (", without the outlier rule" if args.no_outlier_rule else ""))
    print("A/A: % of sessions with any metric called changed (family-wise)")
    print(f"{'per-run sd':>10} {'3 runs':>7} {'5 runs':>7} {'10 runs':>8}")
    for sd in (0.05, 0.1, 0.2, 0.3):
        cells = [f"{_rates(n, sd, 0.0, args)[0]:6.1f}%" for n in (3, 5, 10)]
        print(f"{sd:>10} " + " ".join(cells))
    print(f"30% slower, sd 0.1, 5 runs a side: the figure caught in "
          f"{_rates(5, 0.1, 0.3, args)[1]:.0f}% of sessions")
    print(f"one run 3x slower, sd 0.05, 5 runs a side: A/A alarms "
          f"{_rates(5, 0.05, 0.0, args, outlier=True)[0]:.1f}%, a 30% change caught "
          f"{_rates(5, 0.05, 0.3, args, outlier=True)[1]:.0f}%")


if __name__ == "__main__":
    main()
