"""The report's panes, as figures: one module a pane (``compile``, ``modules``, ``memory``,
``device``, ``streams``, ``steps``, ``kernels``, ``roofline``, ``ranks``), each turning the
report's rows and metrics into what every format shows of it; ``PANES`` orders them and
``homes`` finds each pane's module in any of its homes."""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from types import ModuleType

#: The report's panes, in the order every format shows them (after the answer, the findings
#: and where the time goes; before the drill-down, the layers and the backends). A pane is a
#: stem with one module in each home: ``perfstack.analysis.panes.STEM`` (``view(report, top,
#: full)``, the pane's figures or None; ``shows(name)``, whether a metric is shown there and
#: so left out of the metrics table, where it shows any), ``perfstack.render.words.STEM`` (its
#: words), ``perfstack.render.panes.STEM`` (``text(page, v)`` and ``markdown(v)``) and the HTML
#: plugin's ``panes/STEM.py`` (its places on the page: ``overview(v, page)``, a section of a
#: tab of the page's own (``WITHIN``, ``within(v, page)``) and a tab of its own (``TAB``,
#: ``AFTER``, ``pane(v, page)``)). A new pane is those four files and its stem here.
PANES = ("compile", "modules", "memory", "device", "streams", "steps", "kernels", "roofline",
         "ranks")


def homes(package: str, shown: dict[str, object] | None = None
          ) -> Iterator[tuple[str, ModuleType]]:
    """Each pane's module in ``package`` (a home of panes), in the order of PANES; a pane
    that home has no module for is left out (a format that does not show it), and with
    ``shown`` (a view's panes) so is each pane the view has nothing for: its modules are
    not even imported."""
    for stem in PANES:
        if shown is not None and shown.get(stem) is None:
            continue
        try:
            yield stem, importlib.import_module(f"{package}.{stem}")
        except ModuleNotFoundError as exc:
            if exc.name != f"{package}.{stem}":
                raise
