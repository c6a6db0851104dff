"""Where in the model the time goes: torch.profiler's ``nn.Module`` calls as rows by path.

The torch backend names every module's forward call by the attribute that holds it
(``nn.Module: lm_head (Linear)``, ranges of its own: moduleranges.py); with Python stacks
(``--torch-stack``) torch's tracer records them instead, as ``nn.Module: Linear_1`` (the class
and its instance number). Calls nest on their thread, so each call has a path
(``GPT2LMHeadModel/transformer (GPT2Model)/h.0 (GPT2Block)``); a row per path sums its calls:
``forward`` (host time, nested modules included), ``self`` (without them), and, where the
trace links forward ops to the backward ops autograd ran for them (``fwdbwd`` flows, every
training step), ``backward``: the host time of the distinct backward ops that the module's
forward ops (its nested modules' included) created. With the memory profile (torch's
``[memory]`` events) a row also gets ``allocated`` (bytes allocated in its forward calls)
and ``kept`` (what those calls left allocated, a call's mean: activations saved for
backward, and outputs).
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from typing import Any

import numpy as np

from perfstack.records import datarecord, field
from perfstack.report import Row

from .opgroups import SOURCE, US, q
from .optree import SLACK, Tree, sorted_calls
from .trace import TraceAggregate

#: The separator of a module path's parts (``ResNet_0/Sequential_1/Bottleneck_0``).
SEP = "/"


def module_type(name: str) -> str:
    """A module call's class: 'lm_head (Linear)' (perfstack's ranges, by attribute) ->
    'Linear'; 'Linear_1' (torch's tracer, by instance number) -> 'Linear'."""
    if name.endswith(")") and " (" in name:
        return name[name.rindex(" (") + 2:-1]
    return name.rpartition("_")[0] or name


@datarecord
class _Calls:
    """One thread's module calls in depth-first order: start, end, path and parent call."""

    ts: list[float] = field(default_factory=list)
    end: list[float] = field(default_factory=list)
    path: list[str] = field(default_factory=list)
    parent: list[int] = field(default_factory=list)

    def innermost(self, t: float) -> int:
        """The deepest call holding time ``t``, or -1."""
        i = bisect.bisect_right(self.ts, t) - 1
        while i >= 0 and not self.ts[i] <= t <= self.end[i] + SLACK:
            i = self.parent[i]
        return i

    def enclosing(self, i: int) -> list[int]:
        """Call ``i`` and the calls above it."""
        out = []
        while i >= 0:
            out.append(i)
            i = self.parent[i]
        return out


@datarecord
class _Entry:
    calls: int = 0
    forward: float = 0.0
    nested: float = 0.0
    first: float = float("inf")
    allocated: float = 0.0
    kept: float = 0.0
    backward: set[tuple[str, int]] = field(default_factory=set)


def _nest(agg: TraceAggregate, per: dict[str, _Entry]) -> dict[str, _Calls]:
    """Nest each thread's module calls and add each call to its path's entry."""
    out: dict[str, _Calls] = {}
    for tid, frames in agg.modules.items():
        ts, end, key = sorted_calls(frames)
        calls = out[tid] = _Calls()
        stack: list[int] = []
        for t, e, k in zip(ts, end, key, strict=True):
            while stack and calls.end[stack[-1]] <= t:
                stack.pop()
            parent = stack[-1] if stack else -1
            name = agg.module_names[k]
            path = f"{calls.path[parent]}{SEP}{name}" if parent >= 0 else name
            entry = per[path]
            entry.calls += 1
            entry.forward += e - t
            entry.first = min(entry.first, t)
            if parent >= 0:
                per[calls.path[parent]].nested += e - t
            stack.append(len(calls.ts))
            calls.ts.append(t)
            calls.end.append(e)
            calls.path.append(path)
            calls.parent.append(parent)
    return out


def _backward_op(tree: Tree, t: float) -> int:
    """The outermost op starting at ``t`` (the backward node's ``evaluate_function``), or
    -1."""
    i = tree.innermost(t)
    found = -1
    while i >= 0 and abs(tree.ts[i] - t) <= SLACK:
        found = i
        i = tree.parent[i]
    return found


def _backward(agg: TraceAggregate, trees: dict[str, Tree], calls: dict[str, _Calls],
              per: dict[str, _Entry]) -> bool:
    """Give each module the backward ops its forward ops created; whether any flow linked."""
    linked = False
    for code, (tid, t) in agg.flow_starts.items():
        end = agg.flow_ends.get(code)
        thread = calls.get(tid)
        if end is None or thread is None or end[0] not in trees:
            continue
        op = _backward_op(trees[end[0]], end[1])
        call = thread.innermost(t)
        if op < 0 or call < 0:
            continue
        linked = True
        for c in thread.enclosing(call):
            per[thread.path[c]].backward.add((end[0], op))
    return linked


def _memory(agg: TraceAggregate, calls: dict[str, _Calls], per: dict[str, _Entry]) -> bool:
    """Add each call's allocations and what it left allocated; whether any were recorded."""
    seen = False
    for tid, thread in calls.items():
        if tid not in agg.memory:
            continue
        ts, size = agg.memory[tid]
        order = np.argsort(np.frombuffer(ts, dtype=np.float64), kind="stable")
        times = np.frombuffer(ts, dtype=np.float64)[order]
        sizes = np.frombuffer(size, dtype=np.float64)[order]
        if not len(times):
            continue
        seen = True
        net = np.concatenate(([0.0], np.cumsum(sizes)))
        grown = np.concatenate(([0.0], np.cumsum(np.where(sizes > 0, sizes, 0.0))))
        lo = np.searchsorted(times, np.asarray(thread.ts), side="left")
        hi = np.searchsorted(times, np.asarray(thread.end), side="right")
        for path, a, b in zip(thread.path, lo.tolist(), hi.tolist(), strict=True):
            per[path].allocated += float(grown[b] - grown[a])
            per[path].kept += float(net[b] - net[a])
    return seen


def module_rows(agg: TraceAggregate, trees: dict[str, Tree]) -> list[Row]:
    """Rows by module path, in the model's order (depth first, by first call); none when the
    trace holds no module calls (recorded without Python stacks)."""
    if not agg.modules:
        return []
    per: dict[str, _Entry] = defaultdict(_Entry)
    calls = _nest(agg, per)
    linked = _backward(agg, trees, calls, per)
    with_memory = _memory(agg, calls, per)
    durations: dict[tuple[str, int], float] = {}
    rows = []
    for path, e in per.items():
        values = {"calls": q(e.calls, "count"), "forward": q(e.forward * US, "s"),
                  "self": q(max(e.forward - e.nested, 0.0) * US, "s")}
        if linked:
            seconds = 0.0
            for tid, op in e.backward:
                dur = durations.get((tid, op))
                if dur is None:
                    tree = trees[tid]
                    dur = durations[(tid, op)] = tree.end[op] - tree.ts[op]
                seconds += dur
            values["backward"] = q(seconds * US, "s")
        if with_memory:
            values["allocated"] = q(e.allocated, "B")
            values["kept"] = q(e.kept / e.calls, "B")
        parent, _, name = path.rpartition(SEP)
        attrs: dict[str, Any] = {"module": module_type(name),
                                 "depth": path.count(SEP), "first": e.first}
        if parent:
            attrs["parent"] = parent
        rows.append(Row(path, path, SOURCE, values, attrs))
    return _tree_order(rows)


def _tree_order(rows: list[Row]) -> list[Row]:
    """Depth first, each level by first call; the call time is dropped from the attrs."""
    children: dict[str, list[Row]] = defaultdict(list)
    for row in rows:
        children[row.attrs.get("parent", "")].append(row)
    out: list[Row] = []
    todo = sorted(children[""], key=lambda r: r.attrs["first"], reverse=True)
    while todo:
        row = todo.pop()
        out.append(row)
        todo += sorted(children[row.key], key=lambda r: r.attrs["first"], reverse=True)
    for row in out:
        del row.attrs["first"]
    return out

