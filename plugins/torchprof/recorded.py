"""Traces recorded elsewhere (``perfstack analyze``): which files are one process's, and
reading one process's files into records.

A trace's rank is its header's (``distributedInfo``), else its file name's (``rank-3``,
``*_rank3*``). Kineto names the files of one process ``<worker>.<time>.pt.trace.json``, one
per profiling cycle, in one folder: files of one rank in one folder with one worker name are
that process's cycles, read together. Two processes claiming one rank (another folder or
another worker name) are refused in one line naming both; files that say no rank are one
process per folder and worker name, numbered by the caller.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from perfstack.plugin.backend import Collected, Recorded

#: A rank in a trace's file name: rank-3.json.gz, rank3.pt.trace.json, trace_rank_12.json
RANK_IN_NAME = re.compile(r"rank[-_]?(\d+)", re.IGNORECASE)
#: What a trace says of each GPU that its datasheet is found by
#: (perfstack.machine.roofline.datasheets).
DEVICE_PROPERTIES = ("name", "totalGlobalMem", "computeMajor", "computeMinor", "numSms",
                     "warpSize")


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def rank_of(path: Path, header: dict[str, Any]) -> int | None:
    """The rank a trace says it is: its header's, else its name's, else None."""
    info = header.get("distributedInfo")
    rank = _int(info.get("rank")) if isinstance(info, dict) else None
    if rank is None:
        found = RANK_IN_NAME.search(path.name)
        rank = int(found[1]) if found else None
    return rank


def _process(path: Path) -> tuple[str, str]:
    """Which process wrote a file: its folder and Kineto's worker name (the name up to its
    first dot: ``host_4820`` of ``host_4820.1700000000.pt.trace.json``)."""
    return str(path.parent), path.name.split(".", 1)[0]


def units(files: Sequence[Path]) -> list[list[Path]]:
    """The files of each process, ranks in order, then the processes that say no rank;
    ValueError when two processes claim one rank. The headers remembered since the files
    were claimed are forgotten then (a job's thousands of them; each rank's reader reads its
    own header again as it reads the trace)."""
    from .header import forget_headers, trace_header

    by_rank: dict[int, dict[tuple[str, str], list[Path]]] = {}
    unranked: dict[tuple[str, str], list[Path]] = {}
    try:
        for path in files:
            rank = rank_of(path, trace_header(path) or {})
            group = unranked if rank is None else by_rank.setdefault(rank, {})
            group.setdefault(_process(path), []).append(path)
    finally:
        forget_headers()
    out = []
    for rank, processes in sorted(by_rank.items()):
        if len(processes) > 1:
            first, second = (paths[0] for paths in list(processes.values())[:2])
            raise ValueError(f"rank {rank} is claimed by two processes' traces: {first} and "
                             f"{second} (name one of them)")
        out += list(processes.values())
    return out + list(unranked.values())


def read(paths: Sequence[Path]) -> Recorded:
    """Read one process's trace files (its profiling cycles) into its records."""
    from .gunzip import TraceError
    from .rows import summarize
    from .trace import TraceAggregate

    agg = TraceAggregate()
    for path in paths:
        try:
            agg.add_file(path)
        except (TraceError, OSError, EOFError, ValueError) as exc:
            raise ValueError(f"{path}: cannot read the trace: {exc}") from None
    header = agg.headers[0] if agg.headers else {}  # (the first file's, as it was read)
    info = header.get("distributedInfo")
    world = _int(info.get("world_size")) if isinstance(info, dict) else None
    props = header.get("deviceProperties")
    props = [d for d in props if isinstance(d, dict)] if isinstance(props, list) else []
    rows, metrics, notes = summarize(agg)
    names = [str(d.get("name")) for d in props]
    if names:
        notes.append("GPU: " + ", ".join(sorted(set(names))))
    env: dict[str, Any] = {"devices": names} if names else {}
    if agg.truncated:  # what it holds is read; the report says, where it is read, that this
        # process was read in part (its device figures are of the steps it holds)
        env["read_in_part"] = ("trace cut short (the file ends mid-event: the run ended while "
                               "writing it, or it was copied in part)")
    if props:
        env["device_properties"] = [{k: d[k] for k in DEVICE_PROPERTIES if k in d}
                                    for d in props]
    return Recorded(Collected(rows=rows, metrics=metrics, notes=notes,
                              artifacts={("trace" if i == 0 else f"trace-{i}"): p
                                         for i, p in enumerate(paths)}),
                    files=list(paths), rank=rank_of(paths[0], header), world=world,
                    environment=env)
