"""The ``text`` format: the report for a terminal, the answer first, whole at 80 columns.

Read top-down by a person in a hurry: what ran; the answer (what bounds the workload, the
workload's own hottest function, the top finding); the findings; where the time goes; the
drill-down; each layer's top rows; then the backends in one line each, the metrics and the
raw artifacts. Every figure comes from the view (``perfstack.analysis.view``), so this page
agrees with the markdown and HTML ones. Names are cut to fit the width, numbers never.
"""

from __future__ import annotations

import os
import re

from perfstack.analysis.view import BackendLine, View, build
from perfstack.analysis.views import homes
from perfstack.analysis.views.drilldown import Node
from perfstack.analysis.views.layers import LayerTable
from perfstack.plugin.mark import hookimpl
from perfstack.plugin.renderer import Renderer, RenderOptions
from perfstack.render.text import device as textdevice
from perfstack.render.text.grid import Column, Page, bar, cut, table, wrap
from perfstack.render.words.common import (
    LAYER_TITLES,
    STATUS_WORDS,
    answer_lines,
    beside_line,
    by_whom,
    command_line,
    fmt_overhead,
    node_figures,
    printed_caption,
    rank_cells,
    ranks_note,
    ranks_title,
    related_line,
    related_title,
    wall_line,
)
from perfstack.report import Report
from perfstack.report.rankrows import MANY_RANKS
from perfstack.report.units import fmt_seconds, fmt_value

SEVERITY_STYLE = {"critical": "red", "warning": "yellow", "info": "cyan"}


def _header(page: Page, view: View) -> None:
    h = view.header
    page.add(cut(command_line(h), page.width), "bold")
    page.extend(wrap(" · ".join(h.facts), page.width))
    page.extend(wrap(wall_line(h), page.width))
    for run_id, ended in h.failures:
        page.add(cut(f"run {run_id}: {ended}", page.width), "red", "bold")
    if not h.complete:
        page.add("INTERRUPTED: this report is partial", "magenta", "bold")
    if h.printed:
        page.add(cut(printed_caption(h), page.width), "dim")
        for line in h.printed:
            page.add(cut("  " + line, page.width))


def _answer(page: Page, view: View) -> None:
    page.section("Answer")
    for line in answer_lines(view):
        page.extend(wrap(line, page.width, indent=2, first="  "))


def _findings(page: Page, view: View) -> None:
    page.section(f"Findings ({len(view.findings)})" if view.findings else "Findings: none")
    for f in view.findings:
        prefix = f"  [{f.severity}] "
        lines = wrap(f"{f.title}  ({f.layer}, from {f.source})", page.width, first=prefix)
        if page.color:  # style the severity, which takes no width of its own
            lines[0] = lines[0].replace(f"[{f.severity}]", page.style(
                f"[{f.severity}]", SEVERITY_STYLE.get(f.severity, "")), 1)
        page.extend(lines)
        if view.full:
            for line in f.evidence:
                page.extend(wrap(line, page.width, indent=6, first="      "))
            page.extend(wrap(f"→ {f.action}", page.width, indent=6, first="    "))
        else:  # the short report: the first piece of evidence in two lines at most, the
            # action in three (at 80 columns, one cut line lost what to do)
            if f.evidence:
                page.extend(_at_most(2, wrap(f.evidence[0], page.width, indent=6,
                                             first="      "), page.width))
            page.extend(_at_most(3, wrap(f"→ {f.action}", page.width, indent=6,
                                         first="    "), page.width))


def _at_most(count: int, lines: list[str], width: int) -> list[str]:
    """The first ``count`` lines of a wrapped text, the last cut with '…' when more
    followed."""
    if len(lines) <= count:
        return lines
    last = lines[count - 1]
    room = width - 2  # for " …": the cut falls between words, never inside one
    text = last + " " + lines[count].strip()
    at = text.rfind(" ", len(last) - len(last.lstrip()) + 1, room + 1)
    if at <= 0:
        return [*lines[:count - 1], cut(text, width)]
    return [*lines[:count - 1], text[:at].rstrip() + " …"]


#: In the short report, the native part's subdivisions get a line each only when native code
#: takes at least this share of the wall time; else they are summed up on one line.
SPLIT_LINES_FROM = 25.0


def _budget(page: Page, view: View) -> None:
    budget = view.budget
    if not budget.lines and view.device is not None:
        return  # the device's breakdown is the budget there is
    if not budget.lines:
        page.section("Where the time goes")
        page.add("  no backend measured a time budget" + by_whom(budget.measured_by), "dim")
        return
    wall = f" ({fmt_seconds(budget.wall_s)} wall time)" if budget.wall_s else ""
    page.section(f"Where the time goes{wall}")
    native = budget.share("native") or 0.0
    inline = not view.full and native < SPLIT_LINES_FROM
    shown = [ln for ln in budget.lines if not (inline and ln.depth)]
    bars = page.width >= 100
    rows = [[("└ " if ln.depth else "") + ln.title, f"{ln.share:.1f}%",
             fmt_seconds(ln.seconds) if ln.seconds is not None else "-",
             *([bar(ln.share)] if bars else []), ln.source] for ln in shown]
    page.extend(table([Column("part", name=True), Column("share"), Column("time"),
                       *([Column("")] if bars else []), Column("by")], rows, page.width))
    subs = [ln for ln in budget.lines if ln.depth]
    if inline and subs:
        parts = ", ".join(f"{ln.part} {ln.share:.1f}%" for ln in
                          sorted(subs, key=lambda ln: -ln.share))
        page.extend(wrap(f"native splits into {parts} ({subs[0].source})", page.width,
                         indent=4, first="  "))
    for note in budget.notes:
        page.extend(wrap(note, page.width, indent=2, first="  "))


def _ranks(page: Page, view: View) -> None:
    t = view.ranks
    if t is None:
        return
    page.section(ranks_title(t))
    note = ranks_note(t)
    if note:
        page.sentences([note])
    page.named_table("rank", t.columns, rank_cells(t))
    if t.hidden_columns:
        page.add(f"  {t.hidden_columns} more per-rank figures with --full", "dim")


def _related(page: Page, view: View) -> None:
    for group, metrics in view.related.items():
        page.add(f"  {related_title(group, metrics)}:")
        for m in metrics:
            if view.full:
                page.extend(wrap(related_line(m, True), page.width, indent=11, first="    "))
            else:
                page.add(cut("    " + related_line(m, False), page.width))


def _tree(page: Page, view: View) -> None:
    if not view.tree and not view.tree_notes:
        return
    page.section("Drill-down: your functions first → torch ops → kernels")
    if view.beside:
        line = "hardware: " + beside_line(view.beside)
        if view.full:
            page.extend(wrap(line, page.width, indent=2, first="  "))
        else:
            page.add(cut("  " + line, page.width))

    def add(node: Node, depth: int) -> None:
        indent = 2 + 3 * depth
        figures = node_figures(node)
        room = page.width - indent - len(figures) - 2
        label = cut(node.label, max(12, room))
        page.add(" " * indent + label + "  " + page.style(figures, "dim"))
        for child in node.children:
            add(child, depth + 1)

    for node in view.tree:
        add(node, 0)
    for note in view.tree_notes:
        page.extend(wrap(note, page.width, indent=2, first="  "))


def _layer_line(page: Page, layer: str, tables: list[LayerTable],
                providers: dict[str, list[str]], backends: list[BackendLine]) -> None:
    """The default report's one line per layer: who measured it, how many rows; for a layer
    with none, the backend that ran and could have filled it, else those that fill it."""
    name = LAYER_TITLES[layer].split(":")[0]
    if tables:
        what = ", ".join(f"{t.source} {t.total_rows} rows" for t in tables)
        page.add(cut(f"  {name:<10} {what}", page.width))
        return
    ran = [b.name for b in backends if b.status in ("ok", "partial") and layer in b.layers]
    feeds = providers.get(layer, [])
    hint = ("not measured: " + ", ".join(ran) + " ran without it (see "
            "perfstack run --help)" if ran else
            "not measured" + (" (--plugins " + ", ".join(feeds) + ")" if feeds else ""))
    page.add(cut(f"  {name:<10} {hint}", page.width), "dim")


def _layers(page: Page, view: View, providers: dict[str, list[str]]) -> None:
    if not view.full:
        page.section("Layers (--full shows their top rows)")
        measured = [f"{LAYER_TITLES[layer].split(':')[0]}: " + ", ".join(
            f"{t.source} {t.total_rows} rows" for t in tables)
            for layer, tables in view.layers.items() if tables]
        if measured:
            page.extend(wrap(" · ".join(measured), page.width, indent=2, first="  "))
        for layer, tables in view.layers.items():
            shown = view.as_metrics.get(layer)
            if not tables and shown:  # measured: its figures are among the metrics
                name = LAYER_TITLES[layer].split(":")[0]
                page.add(cut(f"  {name:<10} " + ", ".join(
                    f"{source} {count} rows, shown as metrics" for source, count in shown),
                    page.width), "dim")
            elif not tables:
                _layer_line(page, layer, tables, providers, view.backends)
        return
    for layer, tables in view.layers.items():
        page.section(LAYER_TITLES[layer])
        if not tables:
            feeds = providers.get(layer, [])
            hint = ("nothing measured here" + (": filled by " + ", ".join(
                f"--plugins {p}" for p in feeds) if feeds else ""))
            page.extend(wrap(hint, page.width, indent=4, first="  "))
            continue
        for t in tables:
            folded = ""
            if t.folded:
                folded = f"; library code folded into {len(t.folded)} rows (--all-frames)"
            page.add(cut(f"  from {t.source} ({t.total_rows} rows{folded})", page.width), "dim")
            reasons: list[str] = []
            rows = []
            for row, name in zip(t.rows, t.names, strict=True):
                cells = [name]
                for col in t.columns:
                    q = row.values.get(col)
                    if q is None:
                        cells.append("")
                    elif q.value is None:
                        reason = q.reason or "unknown"
                        if reason not in reasons:
                            reasons.append(reason)
                        cells.append(f"n/a[{reasons.index(reason) + 1}]")
                    else:
                        cells.append(fmt_value(q.value, q.unit))
                rows.append(cells)
            if rows:
                page.extend(table([Column("name", name=True), *(Column(c) for c in t.columns)],
                                  rows, page.width))
            for i, reason in enumerate(reasons, 1):
                page.extend(wrap(f"[{i}] {reason}", page.width, indent=4, first="  "))
            if t.unmeasured:
                page.extend(wrap(f"not measured here: {', '.join(t.unmeasured)}"
                                 + (f" ({t.unmeasured_reason})" if t.unmeasured_reason else ""),
                                 page.width, indent=4, first="  "))


def _backends(page: Page, view: View) -> None:
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
        if view.full:
            page.extend(wrap(note, page.width, indent=6, first=f"  [{i}] "))
        else:
            page.add(cut(f"  [{i}] {note}", page.width))


def _metrics(page: Page, view: View) -> None:
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


def _artifacts(page: Page, view: View) -> None:
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


def render_view(view: View, width: int = 100, color: bool = False,
                providers: dict[str, list[str]] | None = None) -> str:
    """Return the text report of a view."""
    page = Page(width, color)
    _header(page, view)
    _answer(page, view)
    _findings(page, view)
    _budget(page, view)
    for stem, home in homes("perfstack.render.text"):
        if view.panes.get(stem) is not None:
            home.text(page, view.panes[stem])
    textdevice.device(page, view)
    textdevice.streams(page, view)
    textdevice.steps(page, view)
    textdevice.kernels(page, view)
    textdevice.roofline(page, view)
    _ranks(page, view)
    _related(page, view)
    _tree(page, view)
    _layers(page, view, providers or {})
    _backends(page, view)
    _metrics(page, view)
    _artifacts(page, view)
    return "\n".join(page.lines) + "\n"


class TextRenderer(Renderer):
    """The report for a terminal."""

    name = "text"
    description = "the report for a terminal, the answer first (colour when it is one)"

    def render(self, report: Report, options: RenderOptions) -> str:
        """Return the report as terminal text."""
        view = build(report, top=options.top, depth=options.depth, full=options.full,
                     all_frames=options.all_frames, report_dir=options.report_dir,
                     providers=options.metric_providers, openers=options.artifact_openers,
                     advice=options.advice)
        return render_view(view, options.width, options.color, options.layer_providers)


@hookimpl
def perfstack_renderers() -> list[Renderer]:
    """Provide the text renderer."""
    return [TextRenderer()]
