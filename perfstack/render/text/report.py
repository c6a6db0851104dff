"""The text report, section after section (``render_view``), and its renderer."""

from __future__ import annotations

from perfstack.analysis.panes import homes
from perfstack.analysis.view import View, build
from perfstack.plugin.renderer import Renderer, RenderOptions
from perfstack.render.text.closing import artifacts, backends, metrics
from perfstack.render.text.grid import Page
from perfstack.render.text.opening import answer, budget, findings, header
from perfstack.render.text.rows import layers, related, tree
from perfstack.report import Report


def render_view(view: View, width: int = 100, color: bool = False,
                providers: dict[str, list[str]] | None = None) -> str:
    """Return the text report of a view."""
    page = Page(width, color)
    header(page, view)
    answer(page, view)
    findings(page, view)
    budget(page, view)
    for stem, home in homes("perfstack.render.panes", view.panes):
        home.text(page, view.panes[stem])
    related(page, view)
    tree(page, view)
    layers(page, view, providers or {})
    backends(page, view)
    metrics(page, view)
    artifacts(page, view)
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
