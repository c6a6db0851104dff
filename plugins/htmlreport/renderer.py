"""The html format's renderer, as the plugin registers it. The page itself (``document.py``,
its panes, the timeline) is imported when a page is drawn, not when the plugins load: every
command loads them, few draw a page."""

from __future__ import annotations

from typing import TYPE_CHECKING

from perfstack.plugin.renderer import Renderer, RenderOptions

if TYPE_CHECKING:
    from perfstack.analysis.diff import Diff
    from perfstack.report import Report


class HtmlRenderer(Renderer):
    """One self-contained interactive page: panes, tables, a flame graph; no network."""

    name = "html"
    description = "one self-contained interactive page: panes, tables, a flame graph (offline)"
    output_file_extension = ".html"

    def render(self, report: Report, options: RenderOptions) -> str:
        """Return the report as an HTML document: the full view (every metric, every
        finding's evidence), the same figures as the text and markdown reports."""
        from .document import render_report

        return render_report(report, options, options.output_dir)

    def render_diff(self, d: Diff, options: RenderOptions) -> str:
        """Return the comparison of two reports as an HTML document."""
        from .diffpage import diff_panes
        from .document import document

        tabs, body, data = diff_panes(d, options)
        return document(f"perfstack diff: {d.base} -> {d.new}", tabs, body, data)
