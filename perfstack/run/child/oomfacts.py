"""What a run that did not end cleanly knew of its memory at the end (``RunRecord.memory``):
the in-process memory watch's last high (``perfstack.inprocess.memwatch``), from the run's
folder or, under torchrun, the rank whose high was highest, and whether the kernel's OOM
killer's count rose during the run. Read only from a file the workload wrote: each field is
checked, a malformed one left out."""

from __future__ import annotations

import contextlib
import json
import math
from pathlib import Path
from typing import Any

from perfstack.runfolder.filenames import MEMWATCH_FILE, RANK_PREFIX, TENSORS_AT_OOM_FILE
from perfstack.runfolder.rundir import RunFolder


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) \
        and math.isfinite(value)


def _checked(data: Any) -> dict[str, Any]:
    """The watch file's fields that have the shape the report's schema gives them."""
    if not isinstance(data, dict):
        return {}
    out: dict[str, Any] = {}
    for key in ("peak_rss_bytes", "steps", "pid"):
        if isinstance(data.get(key), int) and not isinstance(data[key], bool) \
                and data[key] >= 0:
            out[key] = data[key]
    if _number(data.get("peak_epoch_s")):
        out["peak_epoch_s"] = float(data["peak_epoch_s"])
    stack = data.get("stack")
    if isinstance(stack, list):
        out["stack"] = [[str(f), ln if isinstance(ln, int) else None, str(fn)]
                        for f, ln, fn in (x for x in stack
                                          if isinstance(x, list) and len(x) == 3)]
    recent = data.get("recent")
    if isinstance(recent, list):
        out["recent"] = [[float(t), float(b)] for t, b in (
            x for x in recent if isinstance(x, list) and len(x) == 2
            and _number(x[0]) and _number(x[1]))]
    steps = data.get("step_rss_bytes")
    if isinstance(steps, list):
        out["step_rss_bytes"] = [b for b in steps if isinstance(b, int) and b >= 0]
    limits = data.get("limits")
    if isinstance(limits, dict):
        out["limits"] = {str(k): v for k, v in limits.items()
                         if isinstance(v, int) and not isinstance(v, bool) and v >= 0}
    return out


def _read(path: Path) -> dict[str, Any]:
    try:
        return _checked(json.loads(path.read_text("utf-8")))
    except (OSError, ValueError):
        return {}


def _tensors(path: Path) -> dict[str, Any]:
    """What kind of tensor held the memory (the host's or a device's) when the script died of
    a refused allocation, and the model's by module (``perfstack.inprocess.tensorkinds``), as
    ``{"tensors": {"device", "kinds", "modules"}}``, or nothing."""
    try:
        data = json.loads(path.read_text("utf-8"))
    except (OSError, ValueError):
        return {}
    kinds = data.get("kinds") if isinstance(data, dict) else None
    if not isinstance(kinds, dict):
        return {}

    def sizes(found: Any) -> dict[str, int]:
        return {str(k): v for k, v in (found.items() if isinstance(found, dict) else [])
                if isinstance(v, int) and not isinstance(v, bool) and v >= 0}

    return {"tensors": {"device": str(data.get("device", "cpu")), "kinds": sizes(kinds),
                        "modules": sizes(data.get("modules"))}}


def memory_at_end(folder: Path, oom_kills: int | None) -> dict[str, Any]:
    """The run's memory at its end: the highest high any of its processes wrote (and what
    kind of tensor held it, where the process died of a refused allocation), and
    ``oom_killed`` (None where the machine does not count OOM kills)."""
    homes = [folder]
    with contextlib.suppress(OSError):
        homes += [p for p in folder.iterdir() if p.is_dir() and p.name.startswith(RANK_PREFIX)]
    found = [{**_read(home / MEMWATCH_FILE), **_tensors(home / TENSORS_AT_OOM_FILE)}
             for home in homes]
    best = max(found, key=lambda d: d.get("peak_rss_bytes", -1))
    # A run that exited (a MemoryError) wrote every step's memory at its end: more than the
    # watch's last write holds where the steps were fast.
    at_exit = RunFolder(folder).step_resident()
    if len(at_exit) > len(best.get("step_rss_bytes", [])):
        best["step_rss_bytes"], best["steps"] = at_exit[-50:], len(at_exit)
        if at_exit[-1] > best.get("peak_rss_bytes", -1):
            best["peak_rss_bytes"] = at_exit[-1]
    return {"oom_killed": None if oom_kills is None else oom_kills > 0, **best}
