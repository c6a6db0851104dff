"""The ``text`` format: the report for a terminal, the answer first, whole at 80 columns.

Read top-down by a person in a hurry: what ran; the answer (what bounds the workload, the
workload's own hottest function, the top finding); the findings; where the time goes; the
drill-down; each layer's top rows; then the backends in one line each, the metrics and the
raw artifacts. Every figure comes from the view (``perfstack.analysis.view``), so this page
agrees with the markdown and HTML ones. Names are cut to fit the width, numbers never.
"""

from __future__ import annotations

from perfstack.plugin.mark import hookimpl
from perfstack.plugin.renderer import Renderer
from perfstack.render.text.report import TextRenderer
from perfstack.render.text.report import render_view as render_view


@hookimpl
def perfstack_renderers() -> list[Renderer]:
    """Provide the text renderer."""
    return [TextRenderer()]
