"""The HTML report's ranks: the overview's table (from ``MANY_RANKS`` ranks each figure's
distribution and the ranks that stand out), and the Ranks tab: the cross-rank findings, the
step times as a rank x step heat map, and every per-rank figure, a rank a row."""

from __future__ import annotations

from typing import Any

from perfstack.analysis.panes.ranks import RankTable, rank_table
from perfstack.render.words.ranks import rank_cells, ranks_note, ranks_title
from perfstack.report.units import numeric

from ..charts import esc
from ..grid import table
from ..rankheat import rank_heat_map
from .context import PageContext

#: The pane's tab, and the tab it follows.
TAB = "Ranks"
AFTER = "pane-hardware"


def _head(t: RankTable, section_id: str, note: str | None) -> str:
    """A ranks section's opening: its id, its title (the slowest rank) and its note."""
    return (f'<section id="{section_id}"><h2>{esc(ranks_title(t))}</h2>'
            + (f'<p class="muted">{esc(note)}</p>' if note else ""))


def _cells(t: RankTable, head: str, cells: list[list[str]]) -> str:
    """Rows of the text's rank cells as a table: the first column named ``head``."""
    return table([head, *t.columns], [[esc(c) for c in row] for row in cells],
                 set(range(1, len(t.columns) + 1)))


def section(t: RankTable, section_id: str = "ranks", where_all: str | None = None) -> str:
    """A job's ranks side by side: step time, device busy, collective wait per rank; a job of
    many ranks as distributions, ``where_all`` saying where every rank is listed."""
    note = ranks_note(t, where_all) if where_all else ranks_note(t)
    return _head(t, section_id, note) + _cells(t, "rank", rank_cells(t)) + "</section>"


def overview(t: RankTable, page: PageContext) -> str:
    """The overview's table, as the text report's (the page's view has every rank: a job of
    many ranks is shown by its distributions here, every rank in the Ranks tab)."""
    short = rank_table(page.report, full=False)
    if short is not None and short.summary:
        return section(short, where_all="the Ranks tab lists every rank and figure")
    return section(t)


def every_rank(t: RankTable) -> dict[str, Any]:
    """Every rank's figures as a table the page's script lays out when the tab is first
    shown (sortable and searchable: a job of hundreds of ranks is tens of thousands of
    cells), a rank a row, in the words of the text's table."""
    rows = []
    for (rank, metrics), cells in zip(t.rows, rank_cells(t)[len(t.summary):], strict=True):
        rows.append({"c": [[rank, cells[0]], *(
            [numeric(m.value) if m is not None else None, text]
            for m, text in zip(metrics, cells[1:], strict=True))], "k": cells[0]})
    return {"id": "ranks-all", "title": "ranks", "sort": -1, "notes": [], "source": "report",
            "columns": [{"title": "rank", "num": True},
                        *({"title": c, "num": True} for c in t.columns)], "rows": rows}


def pane(t: RankTable | None, page: PageContext) -> str | None:
    """The tab (none for a report of one rank): the cross-rank findings, the heat map and
    every rank's figures."""
    if t is None:
        return None
    found = "".join(f"<li>{esc(f.title)}</li>" for f in page.report.findings
                    if f.rule.startswith("dist."))
    page.specs["ranks-all"] = every_rank(t)
    # a big job's distributions over every rank: three rows, above the ranks
    spread = (_cells(t, "over every rank", rank_cells(t)[:len(t.summary)]) if t.summary
              else "")
    return ((f"<h3>Findings</h3><ul>{found}</ul>" if found else "")
            + rank_heat_map(page.report) + _head(t, "ranks-all", ranks_note(t)) + spread
            + '<div class="table" id="table-ranks-all"></div></section>')
