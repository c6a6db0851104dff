"""A job's ranks in words, defined once for every renderer: the heading with the slowest
rank, what a job of many ranks shows instead of a row a rank, and the rows."""

from __future__ import annotations

from perfstack.analysis.panes.ranks import RankTable
from perfstack.report.units import fmt_value, pct


def ranks_title(t: RankTable) -> str:
    """'Ranks (2): rank 1 is the slowest, 25% slower per step than the fastest'."""
    count = t.ranks or len(t.rows)
    if t.slowest is None:
        return f"Ranks ({count})"
    gap = f", {pct(t.gap)} slower per step than the fastest" if t.gap is not None else ""
    return f"Ranks ({count}): rank {t.slowest} is the slowest{gap}"


def ranks_note(t: RankTable, where_all: str = "--full lists every rank") -> str | None:
    """What the table of a job of many ranks shows instead of a line per rank, and where
    every rank is listed (``where_all``: the command line's option, or a page's tab)."""
    merged = ("; every op, kernel and function below is its mean per rank over the ranks "
              "that ran it (its least and most, with their ranks, in the JSON)"
              if t.merged_rows else "")
    if not t.summary:
        return merged[2].upper() + merged[3:] if merged else None  # (not capitalize(): "JSON")
    if t.kept_only:  # a big job: no rank but those that stand out is in the report
        where_all = "the report keeps only those whole; its JSON has each distribution"
    return (f"each figure's median, p90 and most over all {t.ranks:,} ranks, then the ranks "
            f"that stand out ({where_all}){merged}")


def rank_cells(t: RankTable) -> list[list[str]]:
    """The ranks table's rows, values formatted, '-' where there is none: the distributions
    first (a job of many ranks), then each rank listed."""
    out = [[label, *(fmt_value(v[0], v[1]) if v is not None else "-" for v in values)]
           for label, values in t.summary]
    return out + [[f"rank {rank}", *(fmt_value(m.value, m.unit, m.reason) if m is not None
                                     else "-" for m in metrics)] for rank, metrics in t.rows]
