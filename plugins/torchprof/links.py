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
from collections.abc import Iterable
from typing import Any

from .trace import STEP_PREFIX, Kernel, Op, TraceAggregate, innermost

#: The op a collective's kernel belongs to (torch's c10d and backend annotations).
COLLECTIVE_OP = re.compile(r"^(nccl:|c10d::|gloo:|rccl:)")
#: Communication kernels, named by NCCL and RCCL.
COMM_KERNEL = re.compile(r"nccl|rccl", re.IGNORECASE)
#: The op that wraps a collective's launch in torch's distributed code.
PARAM_COMMS = "record_param_comms"


def survivor(op: Op) -> Op:
    """Return the op itself, or the op it was merged into (torch's duplicate removal)."""
    while not op.name and op.parent is not None:
        op = op.parent
    return op


class Linker:
    """Finds the op that launched a device event; counts how each link was made."""

    def __init__(self, agg: TraceAggregate) -> None:
        self.agg = agg
        self.by_ext: dict[Any, Op] = {}
        self.roots: dict[str, tuple[list[Op], list[float]]] = {}
        for tid, ops in agg.ops.items():
            for op in ops:
                if op.ext is not None:
                    self.by_ext.setdefault(op.ext, survivor(op))
            roots = sorted((o for o in ops if o.parent is None and o.name), key=lambda o: o.ts)
            self.roots[tid] = (roots, [o.ts for o in roots])
        self.counts = {"external id": 0, "runtime call": 0, "none": 0}

    def launcher(self, kernel: Kernel) -> Op | None:
        """Return the op that launched ``kernel``, or None when no op did (unattributed)."""
        op = self._by_ext(kernel.ext, kernel.correlation)
        how = "external id"
        if op is None:
            call = self.agg.runtime.get(kernel.correlation)
            if call is not None:
                op = self._by_ext(call.ext, call.correlation)
                if op is None and call.tid in self.roots:
                    roots, starts = self.roots[call.tid]
                    op = innermost(roots, starts, call.ts)
                    how = "runtime call"
        if op is not None and op.name.startswith(STEP_PREFIX):
            op = None  # the step's range is not an op: nothing inside it made the call
        if op is not None and (op.name == PARAM_COMMS or COMM_KERNEL.search(kernel.name)):
            op = _collective(op)
        self.counts[how if op is not None else "none"] += 1
        return op

    def _by_ext(self, ext: Any, correlation: Any) -> Op | None:
        # An External id equal to the correlation id is the older scheme's: it names no op.
        if ext is None or ext == correlation:
            return None
        return self.by_ext.get(ext)


def _collective(op: Op) -> Op:
    """Return the collective's own op (``nccl:all_reduce``...) for a collective's launch.

    Depending on the build, that op encloses the launch, or is a child of the
    ``record_param_comms`` that made it (ending just before the launch); failing both, the
    ``c10d::`` op around it; failing all, ``op`` itself."""
    chain = []
    node: Op | None = op
    while node is not None:
        chain.append(node)
        node = node.parent
    named = next((n for n in chain if COLLECTIVE_OP.match(n.name)
                  and not n.name.startswith("c10d::")), None)
    if named is not None:
        return named
    comms = next((n for n in chain if n.name == PARAM_COMMS), None)
    if comms is not None:
        inner = _first_named(comms)
        if inner is not None:
            return inner
    return next((n for n in chain if n.name.startswith("c10d::")), op)


def _first_named(op: Op) -> Op | None:
    """Return the first op under ``op`` (depth first) named like a collective's own op."""
    for child in op.children:
        if COLLECTIVE_OP.match(child.name) and not child.name.startswith("c10d::"):
            return child
        inner = _first_named(child)
        if inner is not None:
            return inner
    return None


def ancestors(op: Op) -> Iterable[Op]:
    """Yield the op and every op above it that is a real op (not a step, not merged away)."""
    node: Op | None = op
    while node is not None:
        if node.name and not node.name.startswith(STEP_PREFIX):
            yield node
        node = node.parent
