"""Where in the model the time goes: the module layer's rows (the model's ``nn.Module`` calls
by path, each valued ``calls``, ``forward``, ``self``, ``backward`` and, with a memory
profile, ``kept``) as the pruned tree every format shows.

A module's ``share`` is its forward plus backward time over the model's (its root modules'
forward plus backward), 0..100; the model's share of the steps is the model's time over
the profiled steps' (``torch_step_time``'s samples, summed). Whichever backend measured the
rows; the view names none.
"""

from __future__ import annotations

from collections import defaultdict

from perfstack.records import datarecord, field
from perfstack.report import Layer, Report, Row

#: A module is listed when it holds this share of the model's time (or --full: FULL_SHARE).
SHARE = 3.0
FULL_SHARE = 0.5
#: The separator of a module path's parts.
SEP = "/"


@datarecord
class ModuleLine:
    """One module of the tree, as shown."""

    key: str  # its path: ResNet_0/Sequential_1/Bottleneck_0
    name: str  # the path's last part: Bottleneck_0
    depth: int
    calls: float | None
    forward: float | None  # s, nested modules included
    backward: float | None  # s; None when no backward was linked
    share: float  # of the model's time, 0..100
    kept: float | None = None  # bytes a call left allocated (a memory profile)

    @property
    def dotted(self) -> str:
        """The module as its code reaches it, from the model: ``transformer.h.0.attn (
        GPT2Attention)`` for a path of attribute-named calls; the path itself for torch's
        tracer's names (``ResNet_0/Sequential_1``)."""
        parts = self.key.split(SEP)
        named = [p.endswith(")") and " (" in p for p in parts]
        if not all(named[1:]) or not any(named):
            return self.key
        attrs = [p[:p.rindex(" (")] for p, n in zip(parts, named, strict=True) if n]
        return f"{'.'.join(attrs)}{parts[-1][parts[-1].rindex(' ('):]}"


@datarecord
class ModuleView:
    """The model's time by module: the largest parts as a tree, and by module type."""

    lines: list[ModuleLine]
    model: float  # s: the root modules' forward plus backward
    forward: float  # s: the root modules' forward
    backward: float | None  # s: the root modules' backward; None when none was linked
    steps: int | None  # the profiled steps, when the run had steps
    step_share: float | None  # the model's time over the profiled steps', 0..100
    kinds: list[tuple[str, float, int]]  # (module type, share 0..100, modules): leaves only
    more: int  # modules not listed
    source: str
    modules: int = 0
    kept: bool = False  # the lines carry what each call left allocated
    rank: int | None = None  # the rank whose modules these are (a job's lowest)
    ranks: int = 1
    largest: ModuleLine | None = field(default=None)  # the largest module with no modules in it


def _value(row: Row, name: str) -> float | None:
    q = row.values.get(name)
    return q.value if q is not None else None


def _time(row: Row) -> float:
    return (_value(row, "forward") or 0.0) + (_value(row, "backward") or 0.0)


def _path(row: Row) -> str:
    """The module's path without a rank's or a node's prefix (``rank1:``): a module's name
    holds no colon."""
    return row.key.rpartition(":")[2]


def module_view(report: Report, top: int = 12, full: bool = False) -> ModuleView | None:
    """The module view of ``report``, or None when no module was recorded. A job's ranks
    each have their modules: the lowest rank's are shown (``rank``, of ``ranks``)."""
    every = report.layers.get(Layer.MODULE, [])
    if not every:
        return None
    ranks = sorted({r.attrs.get("rank") for r in every}, key=lambda x: (x is not None, x))
    rows = [r for r in every if r.attrs.get("rank") == ranks[0]]
    roots = [r for r in rows if "parent" not in r.attrs]
    model = sum(_time(r) for r in roots)
    if model <= 0:
        return None
    linked = any("backward" in r.values for r in rows)
    parents = {r.attrs.get("parent") for r in rows}
    leaves = [r for r in rows if _path(r) not in parents]
    share = {_path(r): 100 * _time(r) / model for r in rows}
    floor = FULL_SHARE if full else SHARE
    wanted = sorted((_path(r) for r in rows if share[_path(r)] >= floor),
                    key=lambda p: -share[p])
    keep = set()
    for path in wanted[:top if not full else max(top, 40)]:
        key: str | None = path  # a listed module's parents are listed too, for the tree
        while key and key not in keep:
            keep.add(key)
            key = key.rpartition(SEP)[0] or None

    def line(r: Row) -> ModuleLine:
        path = _path(r)
        return ModuleLine(path, path.rpartition(SEP)[2], int(r.attrs.get("depth", 0)),
                          _value(r, "calls"), _value(r, "forward"),
                          _value(r, "backward") if linked else None, share[path],
                          _value(r, "kept"))

    lines = [line(r) for r in rows if _path(r) in keep]
    kinds: dict[str, list[float]] = defaultdict(list)
    for r in leaves:
        kinds[str(r.attrs.get("module") or _path(r))].append(share[_path(r)])
    by_kind = sorted(((k, sum(v), len(v)) for k, v in kinds.items()), key=lambda t: -t[1])
    steps_metric = report.metric("torch_step_time")
    steps = len(steps_metric.samples) if steps_metric and steps_metric.samples else None
    step_total = sum(steps_metric.samples) if steps_metric and steps_metric.samples else None
    largest = max(leaves, key=_time, default=None)
    return ModuleView(
        lines=lines, model=model, forward=sum(_value(r, "forward") or 0.0 for r in roots),
        backward=sum(_value(r, "backward") or 0.0 for r in roots) if linked else None,
        steps=steps, step_share=100 * model / step_total if step_total else None,
        kinds=by_kind, more=len(rows) - len(lines), source=rows[0].source, modules=len(rows),
        kept=any(ln.kept is not None for ln in lines), rank=ranks[0], ranks=len(ranks),
        largest=line(largest) if largest is not None else None)


def view(report: Report, top: int, full: bool) -> ModuleView | None:
    """The pane's figures (its registered entry, ``perfstack.analysis.panes.PANES``)."""
    return module_view(report, full=full)
