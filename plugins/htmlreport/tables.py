"""The data behind the HTML report's tables: every row of every layer, as JSON.

A table is one layer's rows from one backend, every value column, each cell the raw number
(for sorting) and the text every format prints for it (``perfstack.report.units``). Rows that link
across layers carry those links, so a function leads to its ops and an op to its kernels in
one click. An unknown value is "n/a" with its reason once per table, never a 0.
"""

from __future__ import annotations

from typing import Any

from perfstack.analysis.origin import origin, workload_dir
from perfstack.analysis.views.drilldown import same_function
from perfstack.analysis.views.layers import display_name
from perfstack.records import datarecord, field
from perfstack.render.words.common import value_title
from perfstack.report import Layer, Report, Row
from perfstack.report.units import fmt_value

from .charts import esc

#: The pane each layer's tables are shown in.
PANES = {"python": "pane-python", "module": "pane-modules", "framework": "pane-ops",
         "kernel": "pane-kernels", "hardware": "pane-hardware", "memory": "pane-memory"}
#: Units whose values add up when ops are grouped by name (times, counts, FLOPs, bytes).
ADDITIVE = ("s", "count", "flop", "B", "bytes")


#: The column a table is first sorted by where its rows have it: their own time.
SORT_FIRST = "self"
#: The unit of a column whose rows carry different units.
MIXED = "mixed"


#: Kinds of rows shown in a table of their own, and what they are called there.
APART_KINDS = {"thread": "threads", "native-frame": "native frames",
               "graph-break": "graph breaks", "wait": "where the main thread waits"}


def table_id(layer: str, source: str) -> str:
    """The id of one layer's table of one backend's rows."""
    return f"{layer}-{source}"


def _value_columns(rows: list[Row]) -> list[tuple[str, str]]:
    columns: dict[str, str] = {}
    for row in rows:
        for name, q in row.values.items():
            # A column whose rows differ in unit (resources: seconds, bytes, counts side by
            # side) has none of its own: each cell is written in its row's unit, never summed.
            if columns.setdefault(name, q.unit) != q.unit:
                columns[name] = MIXED
    ordered = sorted(columns.items(), key=lambda kv: kv[1] == "count")  # times first
    return ordered


#: The Timeline pane's id (``timeline``).
TIMELINE_PANE = "pane-timeline"


def _link(pane: str, table: str, filter_text: str, text: str) -> dict[str, str]:
    return {"pane": pane, "table": table, "filter": filter_text, "text": text}


def _op_group(row: Row) -> str:
    op = row.attrs.get("op")
    return op if isinstance(op, str) else row.name.split(" [")[0]


class _Index:
    """Which rows link to which, and each row's name as shown, computed once (a report may
    hold tens of thousands of rows: every lookup here is by key)."""

    def __init__(self, report: Report) -> None:
        self.home = workload_dir(report)
        self.report = report
        self.names: dict[tuple[str, str], str] = {}
        for layer, rows in report.layers.items():
            for row in rows:
                self.names[(layer.value, row.key)] = display_name(row, self.home)
        self.kernels_of: dict[str, list[Row]] = {}
        for row in report.layers.get(Layer.KERNEL, []):
            for op_key in row.links.get("framework", []):
                self.kernels_of.setdefault(op_key, []).append(row)
        self.ops_by_caller: dict[str, list[Row]] = {}
        for row in report.layers.get(Layer.FRAMEWORK, []):
            for caller in row.links.get("python", []):
                self.ops_by_caller.setdefault(caller, []).append(row)
        self.python = {r.key: r for r in report.layers.get(Layer.PYTHON, [])}
        self._resolved: dict[str, str] = {}

    def callers(self, op: Row) -> list[str]:
        return [self._python_name(k) for k in op.links.get("python", [])]

    def _python_name(self, key: str) -> str:
        if key not in self._resolved:
            row = self.python.get(key) or next(
                (r for k, r in self.python.items() if same_function(k, key)), None)
            self._resolved[key] = self.names[("python", row.key)] if row is not None else key
        return self._resolved[key]

    def ops_of(self, function: Row) -> list[Row]:
        out: list[Row] = []
        for caller, ops in self.ops_by_caller.items():
            if same_function(function.key, caller):
                out += ops
        return out


def _details(layer: str, row: Row, index: _Index) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    if layer == "python":
        ops = index.ops_of(row)[:12]
        if ops:
            out.append({"label": "torch ops it called", "links": [
                _link("pane-ops", table_id("framework", op.source), op.name, op.name)
                for op in ops]})
    elif layer == "framework":
        callers = index.callers(row)[:12]
        if callers:
            out.append({"label": "called from", "links": [
                _link("pane-python", table_id("python", _python_source(index.report)), name,
                      name) for name in callers]})
        kernels = index.kernels_of.get(row.key, [])[:12]
        if kernels:
            out.append({"label": "kernels it ran", "links": [
                _link("pane-kernels", table_id("kernel", k.source), k.name, k.name)
                for k in kernels]})
        out.append(_on_timeline(_op_group(row)))
    elif layer == "kernel":
        launchers = row.links.get("framework", [])[:6]
        if launchers:
            out.append({"label": "launched by", "links": [
                _link("pane-ops", table_id("framework", row.source),
                      index.names.get(("framework", key), key),
                      index.names.get(("framework", key), key)) for key in launchers]})
        out.append(_on_timeline(row.name))
    return out


def _on_timeline(name: str) -> dict[str, Any]:
    """A link to the Timeline pane's slices of this name (the page drops it where there is
    no Timeline pane)."""
    return {"label": "on the timeline", "links": [
        _link(TIMELINE_PANE, "", name, "its calls, the first one zoomed to")]}


def _python_source(report: Report) -> str:
    rows = report.layers.get(Layer.PYTHON, [])
    return rows[0].source if rows else ""


# long: one layer's tables, their columns, rows and links built in one pass
def layer_tables(report: Report, layer: Layer) -> dict[str, dict[str, Any]]:
    """Return the tables of one layer, by id: columns, rows (cells, key, links, group)."""
    index = _Index(report)
    by_source: dict[str, list[Row]] = {}
    for row in report.layers.get(layer, []):
        by_source.setdefault(row.source, []).append(row)
    # Rows of another kind (a sampler's threads, native frames) have values of their own: a
    # table of their own, not half-empty columns in the functions' table.
    groups: dict[tuple[str, str], list[Row]] = {}
    for source, rows in by_source.items():
        for row in rows:
            kind = row.attrs.get("kind")
            groups.setdefault((source, kind if isinstance(kind, str) and kind in
                               APART_KINDS else ""), []).append(row)
    out: dict[str, dict[str, Any]] = {}
    # the backend with the most rows first: py-spy's every function before torch's callers
    for (source, kind), rows in sorted(groups.items(), key=lambda kv: (kv[0][1] != "",
                                                                        -len(kv[1]))):
        values = _value_columns(rows)
        columns: list[dict[str, Any]] = [{"title": "name"}]
        extra: list[str] = []
        if layer is Layer.PYTHON:
            columns.append({"title": "code"})
            extra.append("code")
        if layer is Layer.FRAMEWORK and any(r.links.get("python") for r in rows):
            columns.append({"title": "called from"})
            extra.append("callers")
        if layer is Layer.KERNEL and any(r.links.get("framework") for r in rows):
            columns.append({"title": "launched by"})
            extra.append("launcher")
        for attr, title in (("isa", "ISA"), ("stream", "stream"), ("device", "device")):
            if layer is Layer.KERNEL and any(attr in r.attrs for r in rows):
                columns.append({"title": title})
                extra.append(attr)
        columns += [{"title": value_title(name, unit), "name": name, "num": True, "unit": unit,
                     "sum": unit in ADDITIVE} for name, unit in values]
        reasons: list[str] = []
        body = []
        for row in rows:
            cells: list[Any] = [index.names[(layer.value, row.key)]]
            for what in extra:
                if what == "code":
                    where = origin(str(row.attrs.get("file") or ""), index.home)
                    kind = row.attrs.get("kind")
                    cells.append(str(kind) if isinstance(kind, str) and kind else
                                 ("yours" if where.ours else where.library))
                elif what == "callers":
                    cells.append(", ".join(index.callers(row)[:3]))
                elif what == "launcher":
                    cells.append(", ".join(index.names.get(("framework", k), k)
                                           for k in row.links.get("framework", [])[:2]))
                else:  # an attribute shown as it is: ISA, stream, device
                    value = row.attrs.get(what)
                    cells.append("" if value is None else str(value))
            for name, _unit in values:
                q = row.values.get(name)
                if q is None:
                    cells.append([None, ""])
                elif q.value is None:
                    reason = q.reason or "unknown"
                    if reason not in reasons:
                        reasons.append(reason)
                    cells.append([None, f"n/a [{reasons.index(reason) + 1}]"])
                else:
                    cells.append([float(q.value), fmt_value(q.value, q.unit)])
            entry: dict[str, Any] = {"c": cells, "k": row.key}
            details = _details(layer.value, row, index)
            if details:
                entry["d"] = details
            if layer is Layer.FRAMEWORK:
                entry["g"] = _op_group(row)
            body.append(entry)
        # Sorted at first as the text and the Top ops chart rank: by own time ("self")
        # where the rows have it, else by the first time column.
        first_time = next((i for i, c in enumerate(columns) if c.get("unit") == "s"
                           and c.get("name") == SORT_FIRST),
                          next((i for i, c in enumerate(columns) if c.get("unit") == "s"), -1))
        spec: dict[str, Any] = {"id": table_id(layer.value, f"{source}-{kind}" if kind
                                               else source),
                                "title": (f"{APART_KINDS[kind]} from {source}" if kind else
                                          f"{layer.value} rows from {source}"),
                                "columns": columns, "rows": body, "sort": first_time,
                                "notes": reasons, "source": source}
        if layer is Layer.FRAMEWORK:
            spec["group"] = "group by op name (all shapes together)"
        out[spec["id"]] = spec
    return out


#: What a layer's rows are called where a table of them is empty.
ROW_WORDS = {Layer.PYTHON: "Python", Layer.FRAMEWORK: "op", Layer.KERNEL: "kernel",
             Layer.HARDWARE: "hardware", Layer.MEMORY: "memory", Layer.COMPILE: "compile",
             Layer.MODULE: "module"}


@datarecord
class Tables:
    """The page's tables of rows, by layer, as the panes place them."""

    specs: dict[Layer, dict[str, dict[str, Any]]]
    #: layer -> the installed backends that feed it (``RenderOptions.layer_providers``)
    providers: dict[str, list[str]] = field(default_factory=dict)

    def has(self, layer: Layer) -> bool:
        """Whether the layer has any row."""
        return bool(self.specs.get(layer))

    def empty(self, layer: Layer) -> str:
        """'no op rows (--plugins torch, valuepatterns)': what an empty table lacks, and the
        installed backends that feed its layer, as the text words it."""
        feeds = self.providers.get(layer.value, [])
        return (f"no {ROW_WORDS.get(layer, layer.value)} rows"
                + (f" (--plugins {', '.join(feeds)})" if feeds else ""))

    def html(self, layer: Layer, empty: str | None = None) -> str:
        """Each table of the layer (filled by the page's script from its data), or one line
        saying it is empty (``empty``, else :meth:`empty`)."""
        specs = self.specs.get(layer) or {}
        if not specs:
            return f'<p class="muted">{esc(empty or self.empty(layer))}</p>'
        out = []
        for spec in specs.values():
            notes = "".join(f"<li>{esc(n)}</li>" for n in spec["notes"])
            out.append(f'<section><h3>from {esc(spec["source"])} ({len(spec["rows"])} rows)'
                       f'</h3><div class="table" id="table-{esc(spec["id"])}"></div>'
                       + (f'<ol class="muted">{notes}</ol>' if notes else "") + "</section>")
        return "".join(out)
