"""The html page of a report: its document (the CSS, the script and the data in one file) and
the panes in order (the renderer, ``renderer.py``, imports this module when it draws a page)."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any

from perfstack.analysis.panes import homes as view_homes
from perfstack.analysis.view import View, build
from perfstack.plugin.renderer import RenderOptions
from perfstack.report import Layer, Report
from perfstack.report.units import fmt_seconds

from ..artifacts import TIMELINE
from .charts import LAYER_COLOURS, bar_chart, esc, timeseries
from .flame import flame_tree
from .page import answer as page_answer
from .page import artifacts as page_artifacts
from .page import backends as page_backends
from .page import budget as page_budget
from .page import drill_down as page_drill_down
from .page import findings as page_findings
from .page import header as page_header
from .page import metrics as page_metrics
from .page import metrics_table as page_metrics_table
from .page import top_functions as page_top_functions
from .panes.context import PageContext
from .tables import SORT_FIRST, Tables, layer_tables
from .timeline import timeline as timeline_data
from .timeline import timeline_pane

#: The page's own tabs; each registered pane (``perfstack.analysis.panes.PANES``) draws its
#: sections into them (the overview, or the tab its module names ``WITHIN``) and its own tab
#: after the one it names (``AFTER``).
PANE_TITLES = {"pane-overview": "Overview", "pane-python": "Python", "pane-ops": "Ops",
               "pane-kernels": "Kernels", "pane-hardware": "Hardware",
               "pane-timeline": "Timeline"}


def _asset(name: str) -> str:
    return resources.files(__package__).joinpath(name).read_text("utf-8")


def script_json(data: Any) -> str:
    """JSON that is safe inside a ``<script>`` element: no ``<``, ``>`` or ``&`` as such."""
    return (json.dumps(data, separators=(",", ":"), allow_nan=False)
            .replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026"))


def document(title: str, tabs: list[tuple[str, str]], panes: str, data: dict[str, Any],
             scripts: tuple[str, ...] = (), tail: str = "") -> str:
    """The whole page: styles, tabs, panes, the script (and ``scripts``, more of this
    package's scripts by file name), the data, and ``tail`` (more data the scripts read
    later), in one file."""
    nav = "".join(f'<a href="#{pid}" role="tab" aria-selected="false">{esc(label)}</a>'
                  for pid, label in tabs)
    return (f'<!doctype html><html lang="en"><head><meta charset="utf-8">'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{esc(title)}</title><style>{_asset('report.css')}</style></head><body>"
            f'<nav class="tabs" role="tablist">{nav}</nav>{panes}'
            "<script>" + "\n".join(_asset(name) for name in ("report.js", *scripts))
            + "</script>"
            # the tables' data after the script: a page opened on its Timeline draws it
            # while the browser still reads them (a job's are megabytes)
            f'<script type="application/json" id="perfstack-data">{script_json(data)}</script>'
            f"{tail}</body></html>\n")


def _sampled_gpus(report: Report) -> bool:
    """Whether a backend that keeps a GPU timeline ran in this session (a machine without a
    GPU shows no empty GPU chart: the backends table says why it did not run)."""
    return any(b.run is not None and TIMELINE in b.artifacts for b in report.backends)


def _top_ops(view: View) -> str:
    """The ops as bars by their own time ("self", as the table below and the text rank them;
    the first time column where a backend has none), largest first."""
    items: list[tuple[str, float, str]] = []
    for t in view.layers.get("framework", []):
        timed = [c for c in t.columns if any(
            c in r.values and r.values[c].unit == "s" for r in t.rows)]
        if not timed:
            continue
        column = SORT_FIRST if SORT_FIRST in timed else timed[0]
        for row, name in zip(t.rows, t.names, strict=True):
            q = row.values.get(column)
            if q is not None and isinstance(q.value, (int, float)):
                items.append((name, float(q.value), f"{fmt_seconds(float(q.value))} {column}"))
        break
    items.sort(key=lambda item: -item[1])
    return ("<h3>Top ops</h3>" + bar_chart("top-ops", items, LAYER_COLOURS["framework"]))


def render_report(report: Report, options: RenderOptions, page_dir: Path | None = None) -> str:
    """Return the interactive page of one report."""
    view = build(report, top=options.top, depth=options.depth, full=True,
                 all_frames=options.all_frames, report_dir=options.report_dir,
                 providers=options.metric_providers, openers=options.artifact_openers,
                 advice=options.advice)
    tables = Tables({layer: layer_tables(report, layer) for layer in Layer},
                    options.layer_providers)
    homes = [(stem, home, view.panes.get(stem)) for stem, home in
             view_homes(f"{__package__}.panes")]
    timeline, timeline_said = timeline_data(report, options.report_dir, page_dir)
    page = PageContext(report, tables, timeline=timeline is not None)

    def sections(tab: str) -> list[str]:
        """The registered panes' sections drawn in one of the page's own tabs, in order."""
        shown = [(home, v) for _, home, v in homes if v is not None]
        if tab == "pane-overview":
            return [home.overview(v, page) for home, v in shown if hasattr(home, "overview")]
        return [home.within(v, page) for home, v in shown if getattr(home, "WITHIN", None) == tab]

    flame, flame_why = flame_tree(report, options.report_dir)
    overview = "".join([
        page_header(view), page_answer(view), page_findings(view), page_budget(view),
        *sections("pane-overview"), page_drill_down(view), page_top_functions(view),
        page_backends(view), page_metrics(view),
        page_artifacts(view, options.report_dir, page_dir)])
    python = ('<h2>Flame graph of the Python stacks</h2>'
              + ('<div id="flame-box"></div><h2>Call tree</h2><div id="tree-box"></div>'
                 if flame else f'<p class="muted" id="flamegraph-empty">{esc(flame_why)}</p>')
              + "".join(sections("pane-python")) + "<h2>Functions</h2>"
              + tables.html(Layer.PYTHON))
    ops = ("<h2>Ops</h2>" + _top_ops(view) + "".join(sections("pane-ops"))
           + tables.html(Layer.FRAMEWORK))
    kernels = ("<h2>Kernels</h2>" + "".join(sections("pane-kernels"))
               + tables.html(Layer.KERNEL))
    hardware = ("<h2>Hardware</h2>" + "".join(sections("pane-hardware"))
                + tables.html(Layer.HARDWARE)
                + (timeseries(report, options.report_dir) if _sampled_gpus(report) else ""))
    fixed = {"pane-overview": overview, "pane-python": python, "pane-ops": ops,
             "pane-kernels": kernels, "pane-hardware": hardware}
    panes: dict[str, str] = {}
    titles = dict(PANE_TITLES)
    for pid, content in fixed.items():
        panes[pid] = content
        for stem, home, v in homes:  # the registered panes that follow this one
            drawn = home.pane(v, page) if pid == getattr(home, "AFTER", None) else None
            if drawn is not None:
                panes[f"pane-{stem}"], titles[f"pane-{stem}"] = drawn, home.TAB
    tail = ""
    if timeline is not None:
        panes["pane-timeline"], tail = timeline_pane(timeline_said, timeline)
    body = "".join(f'<main class="pane" id="{pid}" hidden>{content}</main>'
                   for pid, content in panes.items())
    data = {"tables": {**{tid: spec for specs in tables.specs.values()
                          for tid, spec in specs.items()}, **page.specs,
                       "metrics": page_metrics_table(view)},
            "flame": flame, "flameGil": bool(flame and flame["g"])}
    return document("perfstack: " + " ".join(report.run.command),
                    [(pid, titles[pid]) for pid in panes], body, data,
                    ("timeline.js",) if timeline is not None else (), tail)
