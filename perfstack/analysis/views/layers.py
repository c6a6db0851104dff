"""Each layer's tables as every format shows them: a backend's top rows of one layer, the
columns to show, Python rows named by their function and short path, a library's functions
folded into one row, rows no value of which could be measured here left out with the
reason, and a backend whose rows only restate its metrics shown as those metrics."""

from __future__ import annotations

from perfstack.analysis.origin import origin, short_key, workload_dir
from perfstack.analysis.primary import Primary
from perfstack.records import datarecord, field
from perfstack.report import Layer, Quantity, Report, Row

#: Rows of each layer's first table in the default view (the drill-down already shows the
#: hottest); --full shows --top rows of every table.
DEFAULT_LAYER_ROWS = 3


@datarecord
class LayerTable:
    """One source's top rows of one layer, with the columns to show."""

    layer: str
    source: str
    total_rows: int
    columns: list[str]
    rows: list[Row]
    names: list[str]  # each row's name as shown: functions with a short path and their line
    folded: dict[str, int] = field(default_factory=dict)  # library -> rows folded into it
    #: rows left out because no value of theirs could be measured here, with the reason
    unmeasured: list[str] = field(default_factory=list)
    unmeasured_reason: str | None = None
    collapsed: bool = False  # shown as one line (its source and row count): --full opens it


def _columns(rows: list[Row], limit: int) -> list[str]:
    """The value columns to show: in the rows' own order, times and shares before counts (a
    reader looks for seconds first), at most ``limit``."""
    columns: list[str] = []
    units: dict[str, str] = {}
    for row in rows:
        for name, q in row.values.items():
            if name not in columns:
                columns.append(name)
                units[name] = q.unit
    columns.sort(key=lambda n: units[n] == "count")  # stable: keeps the rows' order otherwise
    return columns[:limit]


def _fold_python(rows: list[Row], home: str | None,
                 rank: Primary) -> tuple[list[Row], dict[str, int]]:
    """The workload's own functions as they are; each library's functions as one row (their
    own time summed): the workload's code leads."""
    from perfstack.report import Quantity

    ours: list[Row] = []
    libraries: dict[str, list[Row]] = {}
    for row in rows:
        file = row.attrs.get("file")
        if row.attrs.get("kind") is not None or file is None:
            ours.append(row)
            continue
        where = origin(str(file), home)
        if where.ours:
            ours.append(row)
        else:
            libraries.setdefault(where.library, []).append(row)
    folded: list[Row] = []
    for library, members in libraries.items():
        values: dict[str, Quantity] = {}
        # Own times add up; inclusive ones of nested frames would count twice.
        for name in ("self", "self_time", "self_share", "calls"):
            numbers = [float(q.value) for m in members
                       if (q := m.values.get(name)) is not None
                       and isinstance(q.value, (int, float))]
            if numbers:
                unit = next(m.values[name].unit for m in members if name in m.values)
                values[name] = Quantity(sum(numbers), unit)
        plural = "function" if len(members) == 1 else "functions"
        folded.append(Row(f"library:{library}", f"[{library}] {len(members)} {plural}",
                          members[0].source, values,
                          {"kind": "library", "library": library, "functions": len(members)}))
    merged = ours + folded
    merged.sort(key=lambda r: (r.attrs.get("kind") in ("thread", "wait"),
                               r.attrs.get("kind") == "library", -rank.value(r)))
    return merged, {k: len(v) for k, v in libraries.items()}


def display_name(row: Row, home: str | None) -> str:
    """Return a row's name as shown: a Python function as 'function (short/path.py:line)', the
    path as ``origin`` shows it; any other row by its own name."""
    function, file = row.attrs.get("function"), row.attrs.get("file")
    if isinstance(function, str) and isinstance(file, str):
        line = row.attrs.get("line")
        resumes = row.attrs.get("resumes")  # dynamo's resume function after a graph break
        if isinstance(resumes, str):
            function = f"after the break in {resumes}"
        where = short_key(function, file, line if isinstance(line, int) else None, home)
        if row.attrs.get("kind") == "graph-break":  # a place in a function, not the function
            return f"graph break in {where}: {row.attrs.get('reason') or row.name}"
        return where
    return row.name


def _unmeasured(row: Row) -> bool:
    """Whether none of the row's values (but perf's running share) could be measured here."""
    if not row.values:
        return False
    for name, q in row.values.items():  # noqa: SIM110 - a loop: all() of a generator costs 3x here
        if q.value is not None and name != "running":
            return False
    return True


def _restates_metrics(rows: list[Row]) -> bool:
    """Whether every row restates a metric (``attrs.metric``): the metrics show them."""
    return bool(rows) and all(isinstance(r.attrs.get("metric"), str) for r in rows)


def _by_source(report: Report, layer: Layer) -> dict[str, list[Row]]:
    """A layer's rows by the backend that measured them, in the report's order."""
    by_source: dict[str, list[Row]] = {}
    for row in report.layers.get(layer, []):
        by_source.setdefault(row.source, []).append(row)
    return by_source


def as_metrics(report: Report) -> dict[str, list[tuple[str, int]]]:
    """The layers' backends whose rows restate metrics (left out of the default view)."""
    out: dict[str, list[tuple[str, int]]] = {}
    for layer in Layer:
        for source, rows in _by_source(report, layer).items():
            if _restates_metrics(rows):
                out.setdefault(layer.value, []).append((source, len(rows)))
    return out


def layer_tables(report: Report, top: int, all_frames: bool, max_columns: int,
                  full: bool = True) -> dict[str, list[LayerTable]]:
    home = workload_dir(report)
    rank = Primary(report)
    out: dict[str, list[LayerTable]] = {}
    for layer in Layer:
        tables: list[LayerTable] = []
        for source, rows in _by_source(report, layer).items():
            if not full and _restates_metrics(rows):
                continue
            folded: dict[str, int] = {}
            shown = rows
            if layer is Layer.PYTHON and not all_frames:
                shown, folded = _fold_python(rows, home, rank)
            unmeasured: list[Row] = []
            if not full:
                unmeasured = [r for r in shown if _unmeasured(r)]
                shown = [r for r in shown if not _unmeasured(r)]
            collapsed = not full  # the default shows a layer as one line: the tree leads
            shown = [] if collapsed else shown[:top if full else min(top, DEFAULT_LAYER_ROWS)]
            reason = next((q.reason for r in unmeasured for q in r.values.values() if q.reason),
                          None)
            tables.append(LayerTable(layer.value, source, len(rows),
                                     _columns(shown, max_columns), shown,
                                     [display_name(r, home) for r in shown], folded,
                                     [display_name(r, home) for r in unmeasured], reason,
                                     collapsed))
        out[layer.value] = tables
    return out
