"""A job's ranks side by side, as every format shows them: each ``name[rankN]`` metric a
column, a rank a row; past ``MANY_RANKS`` ranks each figure's distribution and the ranks that
stand out."""

from __future__ import annotations

import re
from typing import Any

from perfstack.analysis.stats import median
from perfstack.records import datarecord, field
from perfstack.report import Metric, Report
from perfstack.report.job.rankrows import MANY_RANKS
from perfstack.report.units import nearest_rank, numeric


@datarecord
class RankTable:
    """A job's ranks side by side: each ``name[rankN]`` metric as a column, a rank a row."""

    columns: list[str]  # metric names without the [rankN]
    rows: list[tuple[int, list[Metric | None]]]  # (rank, its metric per column)
    slowest: int | None  # the slowest_rank metric
    gap: float | None  # straggler_gap, %
    hidden_columns: int  # per-rank metrics left out (--full shows them)
    #: a job of MANY_RANKS or more, unless --full: each column's distribution over every
    #: rank ("median", "p90", "max": value and unit per column), and ``rows`` holds only the
    #: ranks that stand out (the slowest, and the rank of each column's extremes)
    summary: list[tuple[str, list[tuple[float, str] | None]]] = field(default_factory=list)
    ranks: int = 0  # how many ranks the job has (``rows`` may list fewer)
    merged_rows: bool = False  # the layers' rows are each key's mean per rank (rankrows)
    #: a big job (``perfstack.report.job.rankcolumns``): the report keeps whole only the ranks
    #: that stand out, every rank's figures are in the distributions
    kept_only: bool = False


RANKED = re.compile(r"^(?P<base>.+)\[rank(?P<rank>\d+)\]$")
#: The most ranks listed beside the distributions.
STANDING_OUT = 6


def _distributions(columns: list[str], rows: list[tuple[int, list[Metric | None]]],
                   slowest: int | None) -> tuple[list[tuple[str, list[tuple[float, str] | None]]],
                                                 list[tuple[int, list[Metric | None]]]]:
    """Each column's median, p90 (nearest rank) and max over every rank, and the ranks that
    stand out: the slowest, then the rank of each column's most and least, in that order."""
    stats: dict[str, list[tuple[float, str] | None]] = {"median": [], "p90": [], "max": []}
    standing: list[int] = [slowest] if slowest is not None else []
    for i in range(len(columns)):
        known = sorted((v, rank, m.unit) for rank, ms in rows
                       if (m := ms[i]) is not None and (v := numeric(m.value)) is not None)
        if not known:
            for key in stats:
                stats[key].append(None)
            continue
        unit = known[0][2]
        values = [v for v, _, _ in known]
        stats["median"].append((median(values), unit))
        stats["p90"].append((nearest_rank(values, 0.9), unit))
        stats["max"].append((values[-1], unit))
        standing += [known[-1][1], known[0][1]]
    keep = list(dict.fromkeys(standing))[:STANDING_OUT]
    by_rank = dict(rows)
    return list(stats.items()), [(rank, by_rank[rank]) for rank in keep if rank in by_rank]


def rank_table(report: Report, full: bool) -> RankTable | None:
    """The ranks table of a report of two ranks or more (every per-rank figure with
    ``full``, else those not marked detail), or None."""
    across = report.environment.get("across_ranks")
    if isinstance(across, dict) and across.get("figures"):
        return _big_table(report, across, full)
    by_rank: dict[int, dict[str, Metric]] = {}
    order: list[str] = []
    detail: set[str] = set()
    for m in report.metrics:
        found = RANKED.match(m.name)
        if found is None:
            continue
        base = found["base"]
        by_rank.setdefault(int(found["rank"]), {})[base] = m
        if base not in order:
            order.append(base)
        if m.detail:
            detail.add(base)
    if len(by_rank) < 2:
        return None
    columns = [c for c in order if full or c not in detail]
    slowest, gap = report.metric("slowest_rank"), report.metric("straggler_gap")
    slow = int(slowest.value) if slowest is not None and slowest.value is not None else None
    rows = [(rank, [metrics.get(c) for c in columns]) for rank, metrics in sorted(by_rank.items())]
    summary: list[tuple[str, list[tuple[float, str] | None]]] = []
    if not full and len(rows) >= MANY_RANKS:
        summary, rows = _distributions(columns, rows, slow)
    return RankTable(
        columns, rows, slow,
        float(gap.value) if gap is not None and gap.value is not None else None,
        len(order) - len(columns), summary, len(by_rank),
        bool(report.environment.get("rows_across_ranks")))


def _big_table(report: Report, across: dict[str, Any], full: bool) -> RankTable:
    """The ranks table of a big job: each figure's distribution over every rank (the
    report's ``environment.across_ranks``), then the ranks that stand out (the slowest, the
    rank of each column's most and least; with ``full`` every rank kept whole)."""
    figures = [f for f in across["figures"] if isinstance(f, dict) and "name" in f]
    order = [str(f["name"]) for f in figures]
    shown = [f for f in figures if full or not f.get("detail")]
    columns = [str(f["name"]) for f in shown]
    by_rank: dict[int, dict[str, Metric]] = {}
    for m in report.metrics:
        found = RANKED.match(m.name)
        if found is not None:
            by_rank.setdefault(int(found["rank"]), {})[found["base"]] = m
    slowest, gap = report.metric("slowest_rank"), report.metric("straggler_gap")
    slow = int(slowest.value) if slowest is not None and slowest.value is not None else None
    summary: list[tuple[str, list[tuple[float, str] | None]]] = [
        (label, [(float(f[label]), str(f.get("unit") or "")) if numeric(f.get(label)) is not None
                 else None for f in shown]) for label in ("median", "p90", "max")]
    standing = [slow] if slow is not None else []
    for f in shown:
        standing += [r for r in (f.get("max_rank"), f.get("min_rank")) if isinstance(r, int)]
    keep = sorted(by_rank) if full else list(dict.fromkeys(standing))[:STANDING_OUT]
    rows = [(rank, [by_rank[rank].get(c) for c in columns]) for rank in keep if rank in by_rank]
    ranks = across.get("ranks")
    return RankTable(
        columns, rows, slow,
        float(gap.value) if gap is not None and gap.value is not None else None,
        len(order) - len(columns), summary, ranks if isinstance(ranks, int) else len(by_rank),
        bool(report.environment.get("rows_across_ranks")), kept_only=True)


def view(report: Report, top: int, full: bool) -> RankTable | None:
    """The pane's figures (its registered entry, ``perfstack.analysis.panes.PANES``)."""
    return rank_table(report, full)


def shows(name: str) -> bool:
    """Whether the pane shows metric ``name``: every per-rank figure, the slowest rank and
    the straggler's gap."""
    return RANKED.match(name) is not None or name in ("slowest_rank", "straggler_gap")
