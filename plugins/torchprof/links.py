"""Which op launched each device event, on every generation of Kineto's trace.

A device event (kernel, memcpy, memset) carries the correlation id of the runtime call that
launched it (``cudaLaunchKernel``, ``hipMemcpyWithStream``...), and usually an ``External id``:

- in traces from 2023 on, the External id is that of the op that made the call: it is used
  when it points to an op;
- in 2022-23 builds, a device event's External id is its own correlation id and points to no
  op: the runtime call with that correlation is found instead, and the launching op is the
  innermost op enclosing it in time on the thread that made the call.

A collective's kernel is launched from inside ``record_param_comms``; the op a reader wants is
the ``nccl:*`` (or ``c10d::``, ``gloo:``) op around it, so collectives go to that one. A device
event with no launching op (launched before the trace window opened, or by no op) is
*unattributed*: it counts in the kernel rows and the device totals, never as an op's time.
"""

from __future__ import annotations

import re

import numpy as np

from .optree import Tree
from .trace import NO_ID, Kernel, TraceAggregate

#: The op a collective's kernel belongs to (torch's c10d and backend annotations).
COLLECTIVE_OP = re.compile(r"^(nccl:|c10d::|gloo:|rccl:)")
#: Communication kernels, named by NCCL and RCCL.
COMM_KERNEL = re.compile(r"nccl|rccl", re.IGNORECASE)
#: The op that wraps a collective's launch in torch's distributed code.
PARAM_COMMS = "record_param_comms"


class Linker:
    """Finds the op that launched a device event; counts how each link was made.

    An op is named by its thread's tree and its row there (``optree.Tree``)."""

    def __init__(self, agg: TraceAggregate, trees: dict[str, Tree]) -> None:
        self.agg = agg
        self.trees = trees
        self.names = agg.names
        wanted: set[int] = set()
        for kernel in agg.kernels:
            wanted.add(kernel.ext)
            call = agg.runtime.get(kernel.correlation)
            if call is not None:
                wanted.add(call.ext)
        wanted.discard(NO_ID)
        #: External id -> the first op (by thread, then start) carrying it, merged or not
        self.by_ext: dict[int, tuple[Tree, int]] = {}
        if wanted:
            codes = np.fromiter(wanted, dtype=np.int64, count=len(wanted))
            for tree in trees.values():
                exts = np.frombuffer(tree.ext, dtype=np.int64)
                for i in np.flatnonzero(np.isin(exts, codes)).tolist():
                    if tree.ext[i] not in self.by_ext:
                        self.by_ext[tree.ext[i]] = (tree, tree.survivor(i))
        self.counts = {"external id": 0, "runtime call": 0, "none": 0}

    def launcher(self, kernel: Kernel) -> tuple[Tree, int] | None:
        """Return the op that launched ``kernel``, or None when no op did (unattributed)."""
        found = self._by_ext(kernel.ext, kernel.correlation)
        how = "external id"
        if found is None:
            call = self.agg.runtime.get(kernel.correlation)
            if call is not None:
                found = self._by_ext(call.ext, call.correlation)
                if found is None and call.tid in self.trees:
                    tree = self.trees[call.tid]
                    i = tree.innermost(call.ts)
                    found = (tree, i) if i >= 0 else None
                    how = "runtime call"
        if found is not None:
            tree, i = found
            if tree.is_step(i):
                found = None  # the step's range is not an op: nothing inside it made the call
            elif (self.names[tree.name[i]] == PARAM_COMMS
                  or COMM_KERNEL.search(kernel.name)):
                found = (tree, _collective(tree, i, self.names))
        self.counts[how if found is not None else "none"] += 1
        return found

    def _by_ext(self, ext: int, correlation: int) -> tuple[Tree, int] | None:
        # An External id equal to the correlation id is the older scheme's: it names no op.
        if ext in (NO_ID, correlation):
            return None
        return self.by_ext.get(ext)


def _is_collective(name: str) -> bool:
    return bool(COLLECTIVE_OP.match(name)) and not name.startswith("c10d::")


def _collective(tree: Tree, op: int, names: list[str]) -> int:
    """Return the collective's own op (``nccl:all_reduce``...) for a collective's launch.

    Depending on the build, that op encloses the launch, or is a child of the
    ``record_param_comms`` that made it (ending just before the launch); failing both, the
    ``c10d::`` op around it; failing all, ``op`` itself."""
    chain = []
    node = op
    while node >= 0:
        chain.append(node)
        node = tree.parent[node]
        if node >= 0:
            node = tree.survivor(node)
    named = next((n for n in chain if _is_collective(names[tree.name[n]])), None)
    if named is not None:
        return named
    comms = next((n for n in chain if names[tree.name[n]] == PARAM_COMMS), None)
    if comms is not None:
        inner = next((c for c in range(comms + 1, comms + tree.size[comms])
                      if not tree.gone(c) and _is_collective(names[tree.name[c]])), None)
        if inner is not None:
            return inner
    return next((n for n in chain if names[tree.name[n]].startswith("c10d::")), op)
