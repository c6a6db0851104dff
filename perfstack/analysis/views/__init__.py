"""The views of a report, one module a concept (``compile``, ``modules``, ``memory``, ``device``,
``steps``, ``roofline``, ``streams``, ``layers``): each turns the report's rows and metrics
into what every format shows of that concept. ``perfstack.analysis.view`` gathers them into
the one view of a report."""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from types import ModuleType

#: The report's panes, in the order every format shows them. A pane is a stem with one module
#: in each home: ``perfstack.analysis.views.STEM`` (``view(report, top, full)``, the pane's
#: figures or None; ``METRICS``, the metrics it shows), ``perfstack.render.words.STEM`` (its
#: words), ``perfstack.render.text.STEM`` (``text(page, v)`` and ``markdown(v)``) and the HTML
#: plugin's ``panes/STEM.py`` (``TAB``, ``AFTER``, ``pane(v, tables)``, ``overview(v)``). A new
#: pane is those four files and its stem here.
PANES = ("compile", "modules", "memory")


def homes(package: str) -> Iterator[tuple[str, ModuleType]]:
    """Each pane's module in ``package`` (a home of panes), in the order of PANES; a pane
    that home has no module for is left out (a format that does not show it)."""
    for stem in PANES:
        try:
            yield stem, importlib.import_module(f"{package}.{stem}")
        except ModuleNotFoundError as exc:
            if exc.name != f"{package}.{stem}":
                raise
