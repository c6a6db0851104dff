"""The ``html`` format: one self-contained, interactive page that works offline.

``perfstack show report.json --format html -o report.html`` (and ``perfstack run --html``).
Panes after the TensorBoard profiler's: Overview (the answer, findings, where the time goes,
the drill-down, the backends, the metrics, the raw outputs), Python (a flame graph to zoom and
search, a call tree, every function), Ops (every op, sortable, searchable, grouped by name or
by name and shapes, its callers and kernels one click away), Kernels, Hardware, and
Ranks when there are ranks. ``perfstack diff A B --format html`` draws the comparison.

Everything is in the file: the CSS and the script (``report.css``, ``report.js`` beside this
module, written here, no library) and the data as JSON, which the script writes into the page
with ``textContent`` only, so a workload's ``<script>`` stays text. Nothing is fetched.
"""

from __future__ import annotations

from perfstack import hookimpl
from perfstack.plugin.renderer import Renderer

from .renderer import HtmlRenderer


@hookimpl
def perfstack_renderers() -> list[Renderer]:
    """Provide the html renderer."""
    return [HtmlRenderer()]
