"""``perfstack show --format markdown``: the report for an issue or a pull request.

The same view and the same sentences as the terminal report (``perfstack.render.words.common``): the
answer, findings, where the time goes, the drill-down; the layers, backends, metrics and raw
outputs folded into ``<details>`` so the page opens short. Every string that came from the
workload (function and op names, paths, printed output) is escaped, so a name like
``<script>`` or ``a|b`` cannot break a table or inject markup.
"""

from __future__ import annotations

from perfstack.analysis.panes import homes
from perfstack.analysis.view import View, build
from perfstack.analysis.views.drilldown import Node
from perfstack.plugin.mark import hookimpl
from perfstack.plugin.renderer import Renderer, RenderOptions
from perfstack.plugin.renderer import markdown_escape as escape
from perfstack.plugin.renderer import markdown_table as _table
from perfstack.render.words.common import (
    LAYER_TITLES,
    STATUS_WORDS,
    answer_lines,
    by_whom,
    command_line,
    fmt_overhead,
    node_figures,
    printed_caption,
    related_line,
    related_title,
    wall_line,
)
from perfstack.report import Report
from perfstack.report.units import fmt_seconds, fmt_value

SEVERITY_MARK = {"critical": "🔴 critical", "warning": "🟠 warning", "info": "🔵 info"}


def _details(summary: str, body: list[str]) -> list[str]:
    return ["<details>", f"<summary>{summary}</summary>", "", *body, "", "</details>", ""]


def _tree(nodes: list[Node], depth: int = 0) -> list[str]:
    out = []
    for node in nodes:
        out.append(f"{'  ' * depth}- {escape(node.label)}: {escape(node_figures(node))} "
                   f"({escape(node.source)})")
        out += _tree(node.children, depth + 1)
    return out


def render_view(view: View) -> str:
    """Return the markdown report of a view."""
    h = view.header
    title = (" ".join(h.command) if h.analyzed is None and h.attached is None
             else command_line(h))
    out = [f"## perfstack: {escape(title)}", "",
           escape(" · ".join(h.facts)) + "  ", escape(wall_line(h)), ""]
    if not h.complete:
        out += ["**Interrupted: this report is partial.**", ""]
    if h.printed:  # an indented code block: shown as it is, whatever it holds
        out += [f"_{escape(printed_caption(h))}_", "", *("    " + line for line in h.printed),
                ""]
    out += [f"**Answer.** {' '.join(escape(line) for line in answer_lines(view))}", ""]
    out += [f"### Findings ({len(view.findings)})", ""]
    if not view.findings:
        out.append("No findings.")
    for f in view.findings:
        out.append(f"- **{SEVERITY_MARK.get(f.severity, f.severity)}** {escape(f.title)} "
                   f"({escape(f.layer)}, from {escape(f.source)})  ")
        out += [f"  {escape(e)}  " for e in f.evidence]
        out.append(f"  → {escape(f.action)}")
    d = view.device
    if d is None or view.budget.lines:
        out += ["", "### Where the time goes", ""]
    if view.budget.lines:
        out += _table(["part", "share", "time", "by"], [
            [("└ " if ln.depth else "") + escape(ln.title), f"{ln.share:.1f}%",
             fmt_seconds(ln.seconds) if ln.seconds is not None else "—", escape(ln.source)]
            for ln in view.budget.lines])
        out += [f"_{escape(n)}_" for n in view.budget.notes]
    elif d is None:
        out.append("_no backend measured a time budget"
                   + escape(by_whom(view.budget.measured_by)) + "_")
    for stem, home in homes("perfstack.render.panes", view.panes):
        out += home.markdown(view.panes[stem])
    for group, metrics in view.related.items():
        out += ["", f"_{escape(related_title(group, metrics))}:_", ""]
        out += [f"- {escape(related_line(m, True).strip())}" for m in metrics]
    if view.tree:
        out += ["", "### Drill-down: your functions first → torch ops → kernels", ""]
        out += _tree(view.tree)
        out += [f"_{escape(n)}_" for n in view.tree_notes]
    out.append("")
    for layer, tables in view.layers.items():
        body: list[str] = []
        for t in tables:
            body += [f"from **{escape(t.source)}** ({t.total_rows} rows)", ""]
            body += _table(["name", *map(escape, t.columns)], [
                [escape(name), *(escape(fmt_value(r.values[c].value, r.values[c].unit,
                                                  r.values[c].reason))
                                 if c in r.values else "" for c in t.columns)]
                for r, name in zip(t.rows, t.names, strict=True)])
            body.append("")
        out += _details(escape(LAYER_TITLES[layer]), body or ["_nothing measured here_"])
    backends = _table(["backend", "status", "wall", "overhead", "notes"], [
        [escape(b.name), STATUS_WORDS.get(b.status, b.status),
         fmt_seconds(b.wall_s) if b.wall_s is not None else "—",
         fmt_overhead(b.overhead, b.overhead_noise), "".join(f"[{n}]" for n in b.notes)]
        for b in view.backends])
    backends += ["", *[f"{i}. {escape(note)}" for i, note in enumerate(view.footnotes, 1)]]
    out += _details("Backends", backends)
    out += _details(f"Metrics ({len(view.metrics)})", _table(
        ["metric", "value", "source", "n"],
        [[escape(m.name), escape(fmt_value(m.value, m.unit, m.reason)), escape(m.source),
          str(len(m.samples or []) or 1)] for m in view.metrics]))
    if view.artifacts:
        out += _details("Raw outputs", [
            f"- {escape(a.backend)} {escape(a.label)}: `{a.path}`"
            + (f" — {escape(a.opener)}" if a.opener else "") for a in view.artifacts])
    return "\n".join(out).rstrip() + "\n"


class MarkdownRenderer(Renderer):
    """GitHub-flavoured markdown of the whole report."""

    name = "markdown"
    description = "markdown for an issue or a pull request (the answer first)"
    output_file_extension = ".md"

    def render(self, report: Report, options: RenderOptions) -> str:
        """Return the report as markdown."""
        # The whole view: what a terminal leaves to --full, markdown folds into <details>.
        return render_view(build(report, top=options.top, depth=options.depth, full=True,
                                 all_frames=options.all_frames, report_dir=options.report_dir,
                                 providers=options.metric_providers,
                                 openers=options.artifact_openers, advice=options.advice))


@hookimpl
def perfstack_renderers() -> list[Renderer]:
    """Provide the markdown format."""
    return [MarkdownRenderer()]
