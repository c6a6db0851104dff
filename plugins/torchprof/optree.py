"""Each thread's ops as columns and as a tree over those columns, never as objects.

A long trace holds millions of ops; one Python object per op cost ~600 bytes each (690 MiB
for a 459 MB trace). Here an op is a row of typed arrays (~55 bytes), and the tree is arrays
too: sorted by start (longest first on a tie), the ops are in depth-first order, so an op's
subtree is the ``size[i]`` rows from ``i`` on, its children are found by jumping from one to
the next, and its parent is ``parent[i]``.

The nesting is torch's own (``EventList``): an op is a child of the innermost op on the same
thread that contains it, and a call whose only child is the same op counts once; the child is
*removed* and what points to it points to the op it was merged into, its *survivor*.

A call that only dispatched itself again in another type is a *redispatch*: under autocast,
``aten::addmm`` of fp32 inputs casts them (``aten::to`` children) and calls ``aten::addmm``
of bf16 inputs, which does the work. The outer call is not the op's call: its cost, calls and
device time are the inner one's (counted twice, and priced in the wrong type, otherwise).
"""

from __future__ import annotations

import bisect
from array import array
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

#: Nesting tolerance in µs: the trace's times have three decimals.
SLACK = 1e-3


class ThreadOps:
    """One thread's ops in the order read: start and end (µs), name and shape ids, the
    External id's code, and the concrete inputs of the few ops that need them (by row)."""

    __slots__ = ("dims", "end", "ext", "inputs", "name", "ts")

    def __init__(self) -> None:
        self.ts = array("d")
        self.end = array("d")
        self.name = array("i")
        self.dims = array("i")
        self.ext = array("q")
        self.inputs: dict[int, Any] = {}


class ThreadFrames:
    """One thread's user-code Python frames (with_stack): start, end and key id."""

    __slots__ = ("end", "key", "ts")

    def __init__(self) -> None:
        self.ts = array("d")
        self.end = array("d")
        self.key = array("i")


def _sorted_by_start(ts: array[float], end: array[float]) -> Any:
    """Rows by start, the longest first among equal starts; stable like Python's sort."""
    starts = np.frombuffer(ts, dtype=np.float64)
    ends = np.frombuffer(end, dtype=np.float64)
    return np.lexsort((-ends, starts))


_DTYPES = {"d": np.float64, "i": np.int32, "q": np.int64}


def _take(column: array[Any], order: Any) -> array[Any]:
    """The column's values in ``order``, as a column again."""
    values = np.frombuffer(column, dtype=_DTYPES[column.typecode])
    out = array(column.typecode)
    out.frombytes(values.take(order).tobytes())
    return out


def sorted_calls(frames: ThreadFrames) -> tuple[array[float], array[float], array[int]]:
    """A thread's Python calls (frames, module calls) as start, end and key columns, by
    start, the longest first among equal starts: an enclosing call before those it holds."""
    order = _sorted_by_start(frames.ts, frames.end)
    return _take(frames.ts, order), _take(frames.end, order), _take(frames.key, order)


class Tree:
    """One thread's ops nested as torch nests them, as arrays in depth-first order."""

    def __init__(self, ops: ThreadOps, step_names: set[int]) -> None:
        order = _sorted_by_start(ops.ts, ops.end)
        self.ts = _take(ops.ts, order)
        self.end = _take(ops.end, order)
        self.name = _take(ops.name, order)
        self.dims = _take(ops.dims, order)
        self.ext = _take(ops.ext, order)
        self.inputs: dict[int, Any] = {}
        if ops.inputs:
            row_of = np.empty(len(order), dtype=np.int64)
            row_of[order] = np.arange(len(order))
            self.inputs = {int(row_of[k]): v for k, v in ops.inputs.items()}
        self.step_names = step_names
        n = len(self.ts)
        self.parent = array("i", [-1]) * n
        self.size = array("i", [1]) * n
        self.nchildren = array("i", [0]) * n
        self.childsum = array("d", [0.0]) * n  # the children's summed durations
        self.removed = bytearray(n)
        self.redispatch = bytearray(n)  # see the module's docstring
        self.frame: array[int] | None = None  # the innermost user frame's key id at the start
        self.alloc: dict[int, float] = {}  # host bytes allocated in the op itself
        self._nest()
        self._remove_duplicates()
        self.roots = [i for i in range(n) if self.parent[i] < 0 and self.name[i] != 0]
        self.root_starts = [self.ts[i] for i in self.roots]

    def _nest(self) -> None:
        ts, end, parent, size = self.ts, self.end, self.parent, self.size
        nchildren, childsum = self.nchildren, self.childsum
        stack: list[int] = []
        ends: list[float] = []
        for i in range(len(ts)):
            e = end[i]
            while ends and ends[-1] < e - SLACK:
                j = stack.pop()
                ends.pop()
                size[j] = i - j
            if stack:
                p = stack[-1]
                parent[i] = p
                nchildren[p] += 1
                childsum[p] += e - ts[i]
            stack.append(i)
            ends.append(e)
        n = len(ts)
        for j in stack:
            size[j] = n - j

    def _remove_duplicates(self) -> None:
        # torch's EventList._remove_dup_nodes: a call whose only child is the same op is one
        # call. In depth-first order one pass decides it: the child goes when its parent (or
        # the op that parent was merged into, which has the same name) has it as only child.
        name, parent, nchildren, removed = self.name, self.parent, self.nchildren, self.removed
        for i in range(len(name)):
            p = parent[i]
            if p >= 0 and name[i] != 0 and name[i] == name[p] and nchildren[p] == 1:
                removed[i] = 1

    def mark_redispatches(self, same_shapes_other_types: Callable[[int, int], bool]) -> None:
        """Mark each call whose child is the same op on the same shapes in other types
        (``same_shapes_other_types(outer dims id, inner dims id)``): autocast's."""
        if not len(self.name):
            return
        names = np.frombuffer(self.name, dtype=np.int32)
        parents = np.frombuffer(self.parent, dtype=np.int32)
        has = parents >= 0
        children = np.nonzero(has & (names == names[np.where(has, parents, 0)])
                              & (names != 0))[0]
        for i in children.tolist():
            p = self.parent[i]
            if not self.removed[i] and not self.removed[p] and \
                    same_shapes_other_types(self.dims[p], self.dims[i]):
                self.redispatch[p] = 1

    def gone(self, i: int) -> bool:
        """Whether op ``i`` is not an op of its own (merged into its parent, or unnamed)."""
        return bool(self.removed[i]) or self.name[i] == 0

    def survivor(self, i: int) -> int:
        """Return the op itself, or the op it was merged into."""
        while (self.removed[i] or self.name[i] == 0) and self.parent[i] >= 0:
            i = self.parent[i]
        return i

    def is_step(self, i: int) -> bool:
        """Whether op ``i`` is a profiler step's range (``ProfilerStep#N``)."""
        return self.name[i] in self.step_names

    def own(self, i: int) -> float:
        """Op ``i``'s duration outside its children (after duplicates are merged in)."""
        c = i
        while self.nchildren[c] == 1 and self.removed[c + 1]:
            c += 1
        own: float = (self.end[i] - self.ts[i]) - self.childsum[c]
        return own

    def innermost(self, t: float) -> int:
        """Return the deepest op holding time ``t`` (its survivor), or -1: the last root that
        starts by ``t``, then at each level the first child holding it."""
        k = bisect.bisect_right(self.root_starts, t) - 1
        if k < 0:
            return -1
        ts, end, size = self.ts, self.end, self.size
        node = self.roots[k]
        if not ts[node] <= t <= end[node]:
            return -1
        while True:
            c, stop = node + 1, node + size[node]
            while c < stop and not ts[c] <= t <= end[c]:
                c += size[c]
            if c >= stop:
                return self.survivor(node)
            node = c

    def ancestors(self, i: int) -> Iterator[int]:
        """Yield op ``i`` and every op above it that is an op (not a step, not merged, not a
        redispatch of the op under it)."""
        while i >= 0:
            if not self.gone(i) and not self.is_step(i) and not self.redispatch[i]:
                yield i
            i = self.parent[i]

    def assign_memory(self, ts: array[float], size: array[float]) -> None:
        """Give each allocation's bytes to the innermost op holding it."""
        alloc = self.alloc
        for t, nbytes in zip(ts, size, strict=True):
            if nbytes > 0:
                i = self.innermost(t)
                if i >= 0:
                    alloc[i] = alloc.get(i, 0.0) + nbytes

    def assign_frames(self, frames: ThreadFrames) -> None:
        """Give each op the innermost user-code frame running when it started."""
        fts, fend, fkey = sorted_calls(frames)
        out = self.frame = array("i", [-1]) * len(self.ts)
        stack: list[int] = []
        fi, nf = 0, len(fts)
        for i, t in enumerate(self.ts):
            while fi < nf and fts[fi] <= t:
                stack.append(fi)
                fi += 1
            while stack and fend[stack[-1]] < t:
                stack.pop()
            for f in reversed(stack):
                if fts[f] <= t <= fend[f]:
                    out[i] = fkey[f]
                    break
