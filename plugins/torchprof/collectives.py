"""Each collective kernel of a rank, in order, for the job's split of collective time.

A collective on the device lasts from the moment its rank launches it until every rank of the
group has arrived and the data has moved. One rank's trace cannot tell the two apart; the
ranks' traces together can (``perfstack.analysis.job.collectivesplit``). So each rank publishes,
per process group, the device time of each collective kernel in start order, as the samples
of ``gpu_collectives[GROUP]``: the i-th collective of a group is the same call on every rank.
Where the trace gives each collective's size, ``gpu_collective_bytes[GROUP]`` has, in the
same order, the bytes each moved over the rank's links (``busbytes``): with the time the
data moved, a bandwidth to hold against the links'.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Iterable
from typing import TYPE_CHECKING

from perfstack.report import Better, Metric

from .links import COMM_KERNEL
from .opgroups import SOURCE, US

if TYPE_CHECKING:
    from .trace import Kernel

#: The most collectives kept per group and rank (a long trace's first ones).
KEPT = 2000
#: A collective's bytes where the trace does not say them.
UNSIZED = -1.0


def group_of(kernel: Kernel) -> str:
    """The process group a collective kernel belongs to: the trace's own name for it, else
    its stream (one communicator per stream)."""
    return f"pg{kernel.group}" if kernel.group is not None else f"stream{kernel.stream}"


def collective_metrics(kernels: Iterable[Kernel], start: float, end: float) -> list[Metric]:
    """One ``gpu_collectives[GROUP]`` metric per process group of the collective kernels that
    start in [start, end] (µs): the samples each one's device time (s) in start order, the
    value their median. Nothing where the window holds no collective kernel."""
    by_group: dict[str, list[Kernel]] = defaultdict(list)
    for k in kernels:
        if k.cat == "kernel" and start <= k.ts <= end and COMM_KERNEL.search(k.name):
            by_group[group_of(k)].append(k)
    out = []
    for group, found in sorted(by_group.items()):
        found.sort(key=lambda k: k.ts)
        times = [k.dur * US for k in found[:KEPT]]
        out.append(Metric(
            f"gpu_collectives[{group}]", statistics.median(times), "s", "kernel", SOURCE,
            Better.NEITHER, samples=times, samples_of="collectives", detail=True,
            description="a collective kernel's device time (median) in this process group; "
            f"the samples: each one's, in start order (the first {KEPT} at most)"))
        moved = [k.moved for k in found[:KEPT]]
        if any(m is not None for m in moved):
            sizes = [UNSIZED if m is None else float(m) for m in moved]
            out.append(Metric(
                f"gpu_collective_bytes[{group}]", sum(m for m in moved if m is not None), "B",
                "kernel", SOURCE, Better.NEITHER, samples=sizes, samples_of="collectives",
                detail=True,
                description="bytes the collectives of this process group moved over the "
                "rank's links (each one's message times nccl-tests' bus factor: 2(n-1)/n for "
                "an all-reduce), summed; the samples: each one's, in the order of "
                f"gpu_collectives[{group}], {UNSIZED:g} where the trace does not say (a "
                "barrier, a coalesced group)"))
    return out
