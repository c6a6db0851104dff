"""A job of many ranks: one row per op, kernel or function, not one per rank.

Each rank's rows carry their rank (``attrs.rank``, keys ``rank3:...``). From ``MANY_RANKS``
ranks on, the rows of one key are merged across the ranks that have them, so that a report
grows with what differs, not with ranks x ops: each value is the **mean per rank** over the
ranks that measured it (a typical rank), and ``attrs.across_ranks`` keeps, per value, the
least and the most with the rank of each (the ranks that stand out), and how many ranks had
the row (``attrs.ranks``); ``perfstack.report.job.rankfold`` folds them, a rank at a time.
Figures across ranks (step times, collective waits, the straggler) are computed from the
per-rank rows before they are merged.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from perfstack.report import Report, Row

if TYPE_CHECKING:
    from perfstack.report.job.rankfold import Position

#: From this many ranks a job's rows are merged across ranks, and every table speaks in
#: distributions, not one line per rank.
MANY_RANKS = 8


#: Runs of consecutive ranks named one by one at most; more are said as a count.
NAMED_RUNS = 4


def said_ranks(ranks: Iterable[int]) -> str:
    """Ranks in words: "rank 3", "ranks 0-3", "ranks 0-6, 8-4095"; past NAMED_RUNS runs of
    consecutive ranks, their count and span ("4,000 ranks in 0-4095")."""
    ordered = sorted(set(ranks))
    if len(ordered) == 1:
        return f"rank {ordered[0]}"
    runs: list[list[int]] = []
    for rank in ordered:
        if runs and rank == runs[-1][1] + 1:
            runs[-1][1] = rank
        else:
            runs.append([rank, rank])
    if len(runs) > NAMED_RUNS:
        return f"{len(ordered):,} ranks in {ordered[0]}-{ordered[-1]}"
    return "ranks " + ", ".join(f"{a}-{b}" if b > a + 1 else (f"{a}, {b}" if b > a else str(a))
                                for a, b in runs)


def merge_across_ranks(report: Report) -> int:
    """Merge the rows of a job of ``MANY_RANKS`` ranks or more by key; return how many rows
    were merged away (0: fewer ranks, nothing changed)."""
    ranks = {r.attrs["rank"] for rows in report.layers.values() for r in rows
             if isinstance(r.attrs.get("rank"), int)}
    if len(ranks) < MANY_RANKS:
        return 0
    from perfstack.report.job.rankfold import RowFold  # (reading a report needs only MANY_RANKS)

    before = sum(len(rows) for rows in report.layers.values())
    for layer, rows in report.layers.items():
        fold = RowFold()
        kept: list[tuple[Position, Row]] = []
        for i, row in enumerate(rows):
            rank = row.attrs.get("rank")
            if isinstance(rank, int):
                fold.add(layer, row, rank, (i,))
            else:
                kept.append(((i,), row))
        merged = fold.rows().get(layer, [])
        # each merged row takes its first rank's place
        report.layers[layer] = [row for _, row in sorted([*kept, *merged],
                                                         key=lambda item: item[0])]
    return before - sum(len(rows) for rows in report.layers.values())
