"""Write perfstack/analysis/pairednull.py: the null distribution of the screened paired test.

    .venv/bin/python scripts/paired_null_table.py [--sims 2000000] [--seed 71]

``perfstack ab`` judges a metric by a paired t-test on the log ratios of its interleaved
pairs, after Grubbs' test has screened out at most one pair disturbed far beyond the others
(``perfstack/analysis/pairedtest.py``). Leaving a pair out changes the t statistic's
distribution: the pairs kept are the closest together, so their t is larger than Student's
for the same data. The test therefore refers its statistic (the p-value the screened t-test
states, ``naive``) to its own null distribution: for n pairs of independent normal log ratios
with mean 0 (the model of log-normal run-to-run noise; the statistic does not depend on the
noise's size), the chance that ``naive`` is at most each level of ``LEVELS``. The calibrated
p-value is that chance, read off the table (a parametric bootstrap computed once: Beran's
prepivoting, 1988).

The table is computed with numpy and scipy, the same arithmetic as the pure-Python test the
reports run; a test checks a few entries against the pure-Python test on fresh simulations.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
from scipy import stats

#: the naive p-values the table is read at: 10 a decade, from 1 down to 1e-6
LEVELS = [round(10 ** (-k / 10), 12) for k in range(61)]
#: the pair counts tabulated (fewer than 5 are never screened; more than the last use its row,
#: which overstates their p-values a little: screening matters less the more pairs there are)
COUNTS = range(5, 31)
GRUBBS_ALPHA = 0.005


def _t_p(x: np.ndarray) -> np.ndarray:
    n = x.shape[1]
    t = x.mean(1) / (x.std(1, ddof=1) / np.sqrt(n))
    return np.asarray(2 * stats.t.sf(np.abs(t), n - 1))


def naive_p(x: np.ndarray) -> np.ndarray:
    """The screened t-test's own p-value for each row of ``x`` (as the pure-Python test)."""
    rows, n = x.shape
    m = x.mean(1, keepdims=True)
    s = x.std(1, ddof=1, keepdims=True)
    dev = np.abs(x - m) / s
    worst = dev.argmax(1)
    g = dev.max(1)
    room = (n - 1) ** 2 - n * g * g
    t = np.sqrt(n * (n - 2) * g * g / np.maximum(room, 1e-300))
    grubbs = np.where(room > 0, np.minimum(1.0, n * 2 * stats.t.sf(t, n - 2)), 0.0)
    keep = np.ones_like(x, dtype=bool)
    keep[np.arange(rows), worst] = False
    kept = x[keep].reshape(rows, n - 1)
    return np.where(grubbs <= GRUBBS_ALPHA, _t_p(kept), _t_p(x))


def table(sims: int, seed: int) -> dict[int, list[float]]:
    """For each pair count, P(naive p <= level) at every level, from ``sims`` null samples."""
    rng = np.random.default_rng(seed)
    out: dict[int, list[float]] = {}
    levels = np.array(LEVELS)
    for n in COUNTS:
        found = np.concatenate([naive_p(rng.standard_normal((sims // 10, n)))
                                for _ in range(10)])
        found.sort()
        counts = np.searchsorted(found, levels, side="right")
        # never below the level itself: screening can only make the test call more, and a
        # Monte Carlo count a little under it would make the test anti-conservative there
        out[n] = [max(float(c) / sims, lv) for c, lv in zip(counts, levels, strict=True)]
    return out


def main() -> None:
    """Compute the table and write the module."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sims", type=int, default=2_000_000)
    p.add_argument("--seed", type=int, default=71)
    args = p.parse_args()
    rows = table(args.sims, args.seed)
    lines = [
        '"""The null distribution of the screened paired test (``pairedtest``), written by',
        "scripts/paired_null_table.py: do not edit. For n pairs (key), the chance under the",
        "null (independent normal log ratios, mean 0) that the screened t-test's own p-value is",
        f"at most each of LEVELS; {args.sims:,} simulations a row, seed {args.seed}, Grubbs'",
        f'screen at {GRUBBS_ALPHA}."""',
        "",
        f"GRUBBS_ALPHA = {GRUBBS_ALPHA}",
        f"SIMULATIONS = {args.sims}",
        "",
        "#: the levels, 10 a decade from 1 down to 1e-6 (as the script defines them)",
        "LEVELS = [round(10 ** (-k / 10), 12) for k in range(61)]",
        "",
        "NULL: dict[int, list[float]] = {",
    ]
    for n, row in rows.items():
        lines.append(f"    {n}: [")
        values = [f"{v:.6g}" for v in row]
        for i in range(0, len(values), 8):
            lines.append("        " + ", ".join(values[i:i + 8]) + ",")
        lines.append("    ],")
    lines.append("}")
    out = Path(__file__).resolve().parent.parent / "perfstack/analysis/pairednull.py"
    out.write_text("\n".join(lines) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
