"""Reading the built-in backends' artifacts back for the HTML report and the merged trace.

A report names its artifacts relative to the report file's folder; these helpers resolve them
and read py-spy's speedscope profile (stacks, per thread, in sample order) and the NVML
sampler's JSON lines. Each returns nothing when the file is gone:
a report moved without its run folder still renders, without those parts.
"""

from __future__ import annotations

import stat
from pathlib import Path
from typing import Any

from perfstack.records import datarecord
from perfstack.report import Report

from .pyspy.speedscope import frame_key, is_ours, read_profile

#: The most of one artifact the page and the merged trace read (its bytes, decompressed for
#: a .gz): a report is a file people pass around, and its artifacts are read whole into
#: memory (a 3 GiB one ended ``show`` in MemoryError). Perfstack's own are far below it (the
#: largest shared GPU trace decompresses to 25 MiB); Perfetto's UI loads about 2 GB at most.
ARTIFACT_MAX_BYTES = 512 << 20
#: The labels of the artifacts read here, whichever backend keeps them: sampled Python
#: stacks (speedscope), those stacks while holding the GIL, and GPU samples over time.
SPEEDSCOPE = "speedscope"
GIL_SPEEDSCOPE = "gil_speedscope"
TIMELINE = "timeline"


def locate(report: Report, base: Path | None, backend: str | None,
           label: str) -> tuple[Path | None, str | None]:
    """Return (path, None) for a backend's artifact that can be read, (None, why) for one the
    report names that cannot (gone, not a regular file, over ARTIFACT_MAX_BYTES), (None, None)
    when the report names none. ``backend`` None: the first backend that keeps ``label``."""
    entry = next((b for b in report.backends if b.name == backend
                  or (backend is None and label in b.artifacts)), None)
    if entry is None or label not in entry.artifacts:
        return None, None
    path = Path(entry.artifacts[label])
    if not path.is_absolute():
        path = (base or Path.cwd()) / path
    try:
        info = path.stat()
    except OSError:
        return None, f"{path}: gone (the report was moved without its run folder?)"
    if not stat.S_ISREG(info.st_mode):  # a FIFO would block, a device never end
        return None, f"{path}: not a regular file; not read"
    if info.st_size > ARTIFACT_MAX_BYTES:
        return None, (f"{path}: {info.st_size >> 20} MiB, over the {ARTIFACT_MAX_BYTES >> 20} "
                      "MiB read for a page or a trace; not read")
    return path, None


def artifact(report: Report, base: Path | None, backend: str | None,
             label: str) -> Path | None:
    """Return the path of a backend's artifact when it still exists and can be read."""
    return locate(report, base, backend, label)[0]


@datarecord
class Stacks:
    """Sampled stacks: per thread, (frames root first, seconds) in sample order."""

    threads: dict[str, list[tuple[list[str], float]]]


def read_speedscope(path: Path) -> Stacks:
    """Read a py-spy speedscope file into stacks of the Python layer's keys, perfstack's own
    bootstrap frames left out (the pyspy backend's reader and keys, so the two agree)."""
    try:
        frames, profiles = read_profile(path)
        labels = [frame_key(f) for f in frames]
        ours = [is_ours(f) for f in frames]
        threads: dict[str, list[tuple[list[str], float]]] = {}
        for profile in profiles:
            rows = threads.setdefault(str(profile.get("name", "thread")), [])
            for stack, weight in zip(profile.get("samples", []), profile.get("weights", []),
                                     strict=False):
                rows.append(([labels[i] for i in stack if not ours[i]], float(weight)))
    except (TypeError, KeyError, IndexError, AttributeError) as exc:
        # A file of the right name but not the shape py-spy writes: the page and the trace
        # go on without it.
        raise ValueError(f"{path}: not a speedscope profile as py-spy writes it ({exc})") \
            from None
    return Stacks(threads)


def read_nvml(path: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Return the NVML sampler's header and samples (``t`` seconds from its start)."""
    from .nvmlsampler.sampler import read_timeline

    return read_timeline(path)


def walk_tree(stacks: Stacks) -> dict[str, Any]:
    """Merge stacks into a tree {name, value (s), children{}} with one root per thread."""
    root: dict[str, Any] = {"name": "all", "value": 0.0, "children": {}}
    for thread, samples in stacks.threads.items():
        node = root["children"].setdefault(thread, {"name": thread, "value": 0.0,
                                                    "children": {}})
        for frames, seconds in samples:
            root["value"] += seconds
            node["value"] += seconds
            here = node
            for label in frames:
                here = here["children"].setdefault(label, {"name": label, "value": 0.0,
                                                           "children": {}})
                here["value"] += seconds
    return root
