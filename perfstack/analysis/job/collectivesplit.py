"""Time in collectives, split into waiting for the last rank and moving data.

A collective kernel starts on a rank when that rank launches it and ends, on every rank at
about the same moment, once the last rank of its group has arrived and the data has moved.
So the rank that arrived last spent the least time in it: that least time (over the ranks) is
the collective's time moving data, and each rank's excess over it is time spent waiting for
the last one. Summed over a group's collectives (the i-th of a group is the same call on every
rank: groups issue their collectives in one order), per rank:

- ``waiting``: the sum over collectives of the rank's time minus the least time of any rank;
- ``moving``: the sum of the least times (the same for every rank of the group).

The inputs are each rank's ``gpu_collectives[GROUP][rankN]`` samples (each collective kernel's
device time in start order). Ranks that ran a different number of collectives in a group are
not aligned: the group is left out, and said why.

Where the traces gave the collectives' sizes (``gpu_collective_bytes[GROUP][rankN]``, the bytes
each moved over a rank's links, in the same order, -1 where a trace did not say), the bytes
of the collectives of known size over their time moving data is the bandwidth the links
delivered, with no waiting in it (``moved_bytes`` over ``sized_time``).
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable

from perfstack.records import datarecord, field

COLLECTIVES = re.compile(r"^gpu_collectives\[(?P<group>[^\]]+)\]\[rank(?P<rank>\d+)\]$")
SIZES = re.compile(r"^gpu_collective_bytes\[(?P<group>[^\]]+)\]\[rank(?P<rank>\d+)\]$")


@datarecord
class Split:
    """Each rank's collective time (s) split into waiting and moving, over the aligned
    groups; ``left_out``: the groups not aligned, each with why."""

    waiting: dict[int, float] = field(default_factory=dict)
    moving: dict[int, float] = field(default_factory=dict)
    collectives: int = 0  # aligned collectives, every group
    groups: list[str] = field(default_factory=list)
    left_out: list[str] = field(default_factory=list)
    moved_bytes: float = 0.0  # over a rank's links, by the collectives of known size
    sized_time: float = 0.0  # their time moving data (s)


def split(published: Iterable[tuple[str, list[float] | None]]) -> Split | None:
    """The split of the ranks' collective time from their figures ``published`` (each
    metric's name and samples), or None where fewer than two ranks published their
    collectives."""
    by_group: dict[str, dict[int, list[float]]] = defaultdict(dict)
    sizes: dict[str, dict[int, list[float]]] = defaultdict(dict)
    for name, samples in published:
        found = COLLECTIVES.match(name)
        if found and samples:
            by_group[found["group"]][int(found["rank"])] = samples
        sized = SIZES.match(name)
        if sized and samples:
            sizes[sized["group"]][int(sized["rank"])] = samples
    out = Split()
    for group, ranks in sorted(by_group.items()):
        if len(ranks) < 2:
            continue
        counts = {len(times) for times in ranks.values()}
        if len(counts) > 1:
            out.left_out.append(
                f"{group}: the ranks ran {min(counts)} to {max(counts)} collectives in the "
                "window, so they cannot be matched one to one")
            continue
        least = [min(times) for times in zip(*ranks.values(), strict=True)]
        moving = sum(least)
        for rank, times in ranks.items():
            out.waiting[rank] = out.waiting.get(rank, 0.0) + sum(
                t - m for t, m in zip(times, least, strict=True))
            out.moving[rank] = out.moving.get(rank, 0.0) + moving
        out.collectives += len(least)
        out.groups.append(group)
        known = next((b for b in sizes[group].values() if len(b) == len(least)), None)
        if known is not None:  # the collectives whose size the trace gave (-1: it did not)
            out.moved_bytes += sum(b for b in known if b >= 0)
            out.sized_time += sum(t for t, b in zip(least, known, strict=True) if b >= 0)
    return out if out.waiting or out.left_out else None
