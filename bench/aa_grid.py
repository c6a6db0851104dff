"""False alarms and power of the verdict on simulated sessions, over the grid of noise and
run counts users have (issue 71), with fixed seeds: what `perfstack ab` (interleaved pairs)
and `perfstack diff` of two separate sessions decide, metric by metric and for the family.

    .venv/bin/python bench/aa_grid.py [--reps 2000] [--seed 57] [--metrics 12]

A session: ``--metrics`` metrics judged together as one session judges them (``ab``: the
screened paired test, ``stats.compare_paired``; ``diff``: ``stats.compare`` on the two sides'
runs; then Holm's weighted step-down with the workload's figure holding ``FIGURE_WEIGHT``
of the family, as ``diff.family.family_wise`` does). Each run is slowed by its own log-normal load
(sd 0.05 to 0.3) that every metric of the run shares, each metric adds 2% noise of its own;
the first metric is the workload's figure. Printed: the A/A rate (any metric called changed)
for 3 to 10 runs a side; the rate the figure is caught when it is 30% slower; and with one
run 3x slower: the A/A rate, the pair left out, and the rate a 30% change is still caught.
Every cell has its own seed (the seed, the mode and the cell), so cells are independent.
"""

from __future__ import annotations

import argparse
import math
import random

from perfstack.analysis import stats
from perfstack.analysis.diff import FIGURE_WEIGHT
from perfstack.analysis.stats import holm

SDS = (0.05, 0.1, 0.2, 0.3)
RUNS = tuple(range(3, 11))


def session(rng: random.Random, n: int, sd: float, effect: float, metrics: int = 12,
            outlier: bool = False, paired: bool = True) -> tuple[bool, bool]:
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
    judge = stats.compare_paired if paired else stats.compare
    found = [judge(a, b) for a, b in zip(base, new, strict=True)]
    pvalues = [c.pvalue if c.pvalue is not None else 1.0 for c in found]
    weights = [FIGURE_WEIGHT] + [(1 - FIGURE_WEIGHT) / (metrics - 1)] * (metrics - 1)
    kept = [k and bool(c.significant) for k, c in
            zip(holm(pvalues, 0.05, weights), found, strict=True)]
    return any(kept), kept[0]


def rates(n: int, sd: float, effect: float, reps: int, seed: int, *, metrics: int = 12,
          outlier: bool = False, paired: bool = True) -> tuple[float, float]:
    """The share of ``reps`` sessions that call any metric changed, and the figure."""
    rng = random.Random(f"{seed} {paired} {n} {sd} {effect} {outlier} {metrics}")
    hits = [session(rng, n, sd, effect, metrics, outlier, paired) for _ in range(reps)]
    return sum(a for a, _ in hits) / reps, sum(f for _, f in hits) / reps


def main() -> None:
    """Print the grid."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--reps", type=int, default=2000)
    p.add_argument("--seed", type=int, default=57)
    p.add_argument("--metrics", type=int, default=12)
    args = p.parse_args()
    print(f"{args.reps} sessions a cell, seed {args.seed}, {args.metrics} metrics a session, "
          f"the figure holding {FIGURE_WEIGHT:.0%} of the 5% family")
    for paired, title in ((True, "ab (interleaved pairs)"), (False, "diff (separate sessions)")):
        print(f"\n{title}: A/A sessions with any metric called changed")
        print(f"{'per-run sd':>10} " + " ".join(f"{n:>2} runs" for n in RUNS))
        for sd in SDS:
            cells = [rates(n, sd, 0.0, args.reps, args.seed, metrics=args.metrics,
                           paired=paired)[0] for n in RUNS]
            print(f"{sd:>10} " + " ".join(f"{100 * c:6.1f}%" for c in cells))
        caught = [rates(n, 0.1, 0.3, args.reps, args.seed, metrics=args.metrics,
                        paired=paired)[1] for n in (3, 5, 10)]
        print("30% slower, sd 0.1: the figure caught " + ", ".join(
            f"{100 * c:.0f}% at {n} runs" for c, n in zip(caught, (3, 5, 10), strict=True)))
        for n in (5, 7):
            aa = rates(n, 0.05, 0.0, args.reps, args.seed, metrics=args.metrics, outlier=True,
                       paired=paired)[0]
            hit = rates(n, 0.05, 0.3, args.reps, args.seed, metrics=args.metrics,
                        outlier=True, paired=paired)[1]
            print(f"one run 3x slower, sd 0.05, {n} runs a side: A/A alarms {100 * aa:.1f}%, "
                  f"a 30% change caught {100 * hit:.0f}%")


if __name__ == "__main__":
    main()
