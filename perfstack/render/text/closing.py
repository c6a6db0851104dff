"""The end of the text report: the backends in one line each, the metrics and the raw
artifacts with their openers."""

from __future__ import annotations

import os
import re

from perfstack.analysis.view import View
from perfstack.render.text.grid import Column, Page, cut, table, wrap
from perfstack.render.words.common import (
    STATUS_WORDS,
    fmt_overhead,
)
from perfstack.report.job.rankrows import MANY_RANKS
from perfstack.report.units import fmt_seconds, fmt_value

#: A backend's note in at most this many lines (all of it with --full).
FOOTNOTE_LINES = 2


def backends(page: Page, view: View) -> None:
    """The Backends section: one line each, its status, overhead and notes."""
    page.section("Backends")
    rows = []
    for b in view.backends:
        notes = "".join(f"[{n}]" for n in b.notes)
        rows.append([b.name, STATUS_WORDS.get(b.status, b.status),
                     fmt_seconds(b.wall_s) if b.wall_s is not None else "-",
                     fmt_overhead(b.overhead, b.overhead_noise), notes])
    page.extend(table([Column("backend", name=True), Column("status"), Column("wall"),
                       Column("overhead"), Column("notes")], rows, page.width))
    for i, note in enumerate(view.footnotes, 1):
        lines = wrap(note, page.width, indent=6, first=f"  [{i}] ")
        if view.full or len(lines) <= FOOTNOTE_LINES:
            page.extend(lines)
        else:  # (a skip's reason ends with its fix: two lines hold most of them whole)
            page.extend(lines[:FOOTNOTE_LINES - 1])
            page.add(cut(" " * 6 + " ".join(ln.strip() for ln in lines[FOOTNOTE_LINES - 1:]),
                         page.width))


def metrics(page: Page, view: View) -> None:
    """The Metrics section: every metric not shown above, with its value."""
    if not view.metrics:  # every one is shown above (or none was measured): no empty table
        if view.hidden_metrics:
            page.section(f"Metrics: {view.hidden_metrics}, shown above or with --full")
        return
    hidden = f"; {view.hidden_metrics} more with --full" if view.hidden_metrics else ""
    page.section(f"Metrics ({len(view.metrics)}{hidden})")
    rows = [[m.name, fmt_value(m.value, m.unit), m.source,
             "-" if m.value is None else str(len(m.samples)) if m.samples else "1"]
            for m in view.metrics]
    page.extend(table([Column("metric", name=True), Column("value"), Column("source"),
                       Column("n")], rows, page.width))
    unknown = [m for m in view.metrics if m.value is None and m.reason]
    for m in unknown:
        page.extend(wrap(f"{m.name}: {m.reason}", page.width, indent=4, first="  "))


#: A rank's raw output: ``trace.rank3``.
RANKED_LABEL = re.compile(r"^(.+)\.rank\d+$")


def artifacts(page: Page, view: View) -> None:
    """The raw outputs, each with where it is and what opens it."""
    if not view.artifacts:
        return
    folder = os.path.commonpath([os.path.dirname(a.path) or "." for a in view.artifacts])
    title = f"Raw outputs, in {folder}/" if folder not in ("", ".") else "Raw outputs"
    if len(title) <= page.width:
        page.section(title)
    else:  # a long folder on a line of its own, below the title
        page.section("Raw outputs")
        page.add(f"  in {folder}/")
    per_rank: dict[tuple[str, str], int] = {}
    for a in view.artifacts:
        found = RANKED_LABEL.match(a.label)
        if found is not None:
            per_rank[(a.backend, found[1])] = per_rank.get((a.backend, found[1]), 0) + 1
    shown: dict[tuple[str, str], int] = {}
    for a in view.artifacts:
        found = RANKED_LABEL.match(a.label)
        kind = (a.backend, found[1]) if found is not None else None
        if kind is not None and not view.full and per_rank[kind] >= MANY_RANKS:
            shown[kind] = shown.get(kind, 0) + 1
            if shown[kind] > 2:
                if shown[kind] == per_rank[kind]:  # a job of many ranks: two, then a count
                    page.add(f"  {a.backend} {kind[1]}: {per_rank[kind] - 2} more ranks' "
                             "files (--full lists them)", "dim")
                continue
        where = os.path.relpath(a.path, folder) if folder not in ("", ".") else a.path
        how = f"  ({a.opener})" if a.opener else ""
        page.extend(wrap(f"{a.backend} {a.label}: {where}{how}", page.width, indent=4,
                         first="  "))
