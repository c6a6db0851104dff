"""The ranks pane in text and markdown: a job's ranks side by side, the slowest named
(``perfstack.render.text`` lays out the page and calls it, as
``perfstack.analysis.panes.PANES`` lists it)."""

from __future__ import annotations

from perfstack.analysis.panes.ranks import RankTable
from perfstack.plugin.renderer import markdown_escape as escape
from perfstack.plugin.renderer import markdown_table
from perfstack.render.text.grid import Page
from perfstack.render.words.ranks import rank_cells, ranks_note, ranks_title


def text(page: Page, t: RankTable) -> None:
    """Each rank's figures and the straggler, or the spread past many ranks."""
    page.section(ranks_title(t))
    note = ranks_note(t)
    if note:
        page.sentences([note])
    page.named_table("rank", t.columns, rank_cells(t))
    if t.hidden_columns:
        page.add(f"  {t.hidden_columns} more per-rank figures with --full", "dim")


def markdown(t: RankTable) -> list[str]:
    """Each rank's figures and the straggler, or the spread past many ranks."""
    out = ["", f"### {escape(ranks_title(t))}", ""]
    note = ranks_note(t)
    out += [f"_{escape(note)}_", ""] if note else []
    return out + markdown_table(["rank", *map(escape, t.columns)], rank_cells(t))
