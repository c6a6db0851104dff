"""Every op of an aggregated trace folded into one group per op name and input shapes.

A group holds the calls, total and own time, FLOPs and bytes moved (``opcost``), host
allocations and calling user functions of its ops; on a CPU (no kernels in the trace) each
native op's own time is also kept, credited to the top-level op it ran under, for the kernel
layer. Ops are read from the trees' arrays (``optree``) one row at a time: nothing per op
outlives the loop.
"""

from __future__ import annotations

import functools
import json
from collections import defaultdict
from typing import Any

from perfstack.records import datarecord, field
from perfstack.report import Quantity, Row

from .evalranges import EVALUATION
from .opcost import Cost, cost
from .optree import Tree
from .trace import TraceAggregate, step_number

SOURCE = "torch"
#: The range torch's DataLoader opens around each batch it yields.
DATA_LOADING = "enumerate(DataLoader)"
#: dynamo names the ranges it times while compiling "_compile.compile_inner (dynamo_timed)".
COMPILING = "(dynamo_timed)"
#: Ops that only training runs: a backward pass, an optimizer's step. An evaluation range
#: holding one was a model kept in eval mode while it trained.
TRAINING = ("autograd::engine::evaluate_function", "Optimizer.step#")
US = 1e-6  # the trace's unit is the microsecond
MAX_LINKS = 5


@datarecord
class Group:
    """The ops of one name and input shapes (one framework row), times in µs."""

    name: str = ""
    dims: str = ""
    key: str = ""
    calls: int = 0
    total: float = 0.0
    self_time: float = 0.0
    device: float = 0.0
    flops: int | None = None
    bytes: int | None = None
    dtype: str | None = None
    kind: str | None = None
    #: it launched copies between host and device (their time is the link's)
    transfer: bool = False
    #: time of the calls made inside another op whose cost is counted (theirs is part of it)
    nested: float = 0.0
    alloc: float = 0.0
    callers: dict[str, float] = field(default_factory=lambda: defaultdict(float))


@functools.lru_cache(maxsize=65536)
def _shapes(dims: str) -> Any:
    return json.loads(dims)


def shapes(dims: str) -> Any:
    """The input shapes of an op from its key's form, parsed once per distinct form (shared:
    read it, never change it)."""
    return _shapes(dims) if dims else []


def top_links(weights: dict[str, float]) -> list[str]:
    """Return the keys of the heaviest ``MAX_LINKS`` weights, heaviest first."""
    return [k for k, _ in sorted(weights.items(), key=lambda kv: -kv[1])[:MAX_LINKS]]


def q(value: float, unit: str) -> Quantity:
    """Return a measured quantity."""
    return Quantity(value, unit)


class OpGroups:
    """Every op of every thread folded into one group per op name and input shapes; on a
    CPU, also each native op's own time (its kernel row) and where it was called from."""

    def __init__(self, agg: TraceAggregate, with_flops: bool, stepped: bool,
                 native: bool) -> None:
        self.agg, self.with_flops, self.stepped, self.native = agg, with_flops, stepped, native
        self.groups: dict[str, Group] = {}
        self.steps: list[float] = []
        self.windows: list[tuple[float, float]] = []
        #: each step range's N (``ProfilerStep#N``: the step's number in the workload), as
        #: ``windows``; None where a range's name holds no number
        self.numbers: list[int | None] = []
        self.first: float | None = None  # the first op's start and the last one's end (µs)
        self.last: float | None = None
        self.root_frames: dict[str, int] = defaultdict(int)  # user frame -> top-level ops
        #: each op directly under a step range: (start, end, "data" or "ops"), µs; data
        #: loading is the DataLoader's own range (``enumerate(DataLoader)#...``)
        self.step_children: list[tuple[float, float, str]] = []
        self._by_id: dict[tuple[int, int], Group] = {}
        self._costs: dict[tuple[int, int], Cost] = {}
        self._native: dict[int, dict[str, Any]] = {}

    @staticmethod
    def _under_compile(tree: Tree, i: int, compiling: list[bool]) -> bool:
        """Whether op ``i`` runs inside one of dynamo's timed compile ranges."""
        p = tree.parent[i]
        while p >= 0:
            if compiling[tree.name[p]]:
                return True
            p = tree.parent[p]
        return False

    def group(self, tree: Tree, i: int) -> Group:
        """Return the group of op ``i``, made on first use."""
        ids = (tree.name[i], tree.dims[i])
        g = self._by_id.get(ids)
        if g is None:
            name, dims = self.agg.names[ids[0]], self.agg.dims[ids[1]]
            key = f"{name} {dims}" if dims else name
            g = self.groups.get(key)
            if g is None:
                g = self.groups[key] = Group(name=name, dims=dims, key=key)
            self._by_id[ids] = g
        return g

    def add(self, tree: Tree) -> None:
        """Fold one thread's ops in."""
        names, frame_keys = self.agg.names, self.agg.frame_keys
        steps = tree.step_names
        native_of = ["::" in name for name in names]
        compiling = [name.endswith(COMPILING) for name in names]
        evaluating = [name == EVALUATION for name in names]
        training = [name.startswith(TRAINING) for name in names]
        see_through: set[int] = set()  # eval-mode ranges that trained: their ops count as ever
        ts, end, name, parent = tree.ts, tree.end, tree.name, tree.parent
        removed, frame, alloc, inputs = tree.removed, tree.frame, tree.alloc, tree.inputs
        redispatch = tree.redispatch
        first, last = self.first, self.last
        costed = bytearray(len(ts))  # the op or one above it has a known cost
        for i in range(len(ts)):
            n = name[i]
            if removed[i] or n == 0:
                if parent[i] >= 0 and costed[parent[i]]:
                    costed[i] = 1
                continue
            start, stop = ts[i], end[i]
            first = start if first is None or start < first else first
            last = stop if last is None or stop > last else last
            f = frame[i] if frame is not None else -1
            if f >= 0 and parent[i] < 0:
                self.root_frames[frame_keys[f]] += 1
            if n in steps:
                if self.stepped:
                    self.steps.append((stop - start) * US)
                    self.windows.append((start, stop))
                    self.numbers.append(step_number(names[n]))
                continue
            p = parent[i]
            if self.stepped and (p < 0 or name[p] in steps or p in see_through):
                # Under a step, or a root op that may cross one: an optimizer's step range
                # outlasts the step range its post-step hook closed, and holds every op of a
                # closure (Lightning, LBFGS: forward and backward inside optimizer.step).
                phase = ("data" if names[n].startswith(DATA_LOADING) else "compile"
                         if names[n].endswith(COMPILING) else "eval" if evaluating[n]
                         else "ops")
                if phase == "eval" and any(training[name[j]]
                                           for j in range(i + 1, i + tree.size[i])):
                    see_through.add(i)
                else:
                    self.step_children.append((start, stop, phase))
            elif self.stepped and compiling[n] and not self._under_compile(tree, i, compiling):
                # dynamo compiling inside an op (the compiled model's call): its own phase,
                # taken out of the op's
                self.step_children.append((start, stop, "compile_in"))
            if redispatch[i]:  # autocast's outer call: the inner one is the op's call
                if p >= 0 and costed[p]:
                    costed[i] = 1
                continue
            g = self.group(tree, i)
            dur = stop - start
            own = tree.own(i)
            g.calls += 1
            g.total += dur
            g.self_time += own
            if alloc:
                g.alloc += alloc.get(i, 0.0)
            if self.with_flops:
                above = parent[i] >= 0 and costed[parent[i]]
                if above:
                    g.nested += dur
                if self._count_cost(g, tree, i, inputs.get(i)) or above:
                    costed[i] = 1
            if f >= 0:
                g.callers[frame_keys[f]] += dur
            if self.native and native_of[n]:
                self._native_time(tree, i, own)
        self.first, self.last = first, last

    def _count_cost(self, g: Group, tree: Tree, i: int, concrete: Any) -> bool:
        """Add one call's FLOPs and bytes to its group; return whether either is known."""
        ids = (tree.name[i], tree.dims[i])
        if concrete is None:  # the cost depends on the name, shapes and types only
            found = self._costs.get(ids)
            if found is None:
                found = self._costs[ids] = cost(g.name, shapes(g.dims), self.agg.types[ids[1]])
        else:
            found = cost(g.name, shapes(g.dims), self.agg.types[ids[1]], concrete)
        if found.flops is not None:
            g.flops = (g.flops or 0) + found.flops
        if found.bytes is not None:
            g.bytes = (g.bytes or 0) + found.bytes
        if found.dtype is not None and g.dtype is None:
            g.dtype = found.dtype
        if found.kind is not None:
            g.kind = found.kind
        return found.flops is not None or found.bytes is not None

    def _native_time(self, tree: Tree, i: int, own: float) -> None:
        """On a CPU the trace has no kernels: each op's self time is its own native code,
        credited to the top-level op it ran under."""
        root = i
        parent = tree.parent
        while parent[root] >= 0 and not tree.is_step(parent[root]):
            root = parent[root]
        entry = self._native.get(tree.name[i])
        if entry is None:
            entry = self._native[tree.name[i]] = {"calls": 0, "self": 0.0,
                                                  "roots": defaultdict(float)}
        entry["calls"] += 1
        entry["self"] += own
        if root != i:
            entry["roots"][self.group(tree, root).key] += own

    def native_rows(self) -> list[Row]:
        """The kernel layer on a CPU: each native op's own time (record_function ranges run
        no native code of their own)."""
        rows = [
            Row(self.agg.names[n], self.agg.names[n], SOURCE,
                {"calls": q(e["calls"], "count"), "self": q(e["self"] * US, "s")},
                {"kind": "cpu-op-native", "meaning": "time in the op's own code, outside child "
                 "ops"},
                {"framework": top_links(e["roots"])} if e["roots"] else {})
            for n, e in self._native.items()
        ]
        rows.sort(key=lambda r: -(r.values["self"].value or 0))
        return rows
