"""The flame graph's data: py-spy's sampled stacks merged into one tree, as JSON.

Each frame is ``{n: name, v: seconds, g: seconds holding the GIL, o: the workload's own code,
c: children}``. The GIL figure comes from py-spy's second (``--gil``) profile of the same run,
matched by the same stack. Frames under 0.05% of the samples are left out, so the page's size
follows what can be seen, not the profile's.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from perfstack.analysis.origin import origin, workload_dir
from perfstack.report import Report

from ..artifacts import GIL_SPEEDSCOPE, SPEEDSCOPE, artifact, locate, read_speedscope, walk_tree

#: Frames below this share of all samples are not drawn (nor sent).
MIN_SHARE = 0.0005
#: Frames deeper than this are drawn as one marked frame: the page's nesting stays bounded.
MAX_DEPTH = 200


def _label(key: str, home: str | None) -> tuple[str, bool]:
    """'func (short/path.py:12)' and whether it is the workload's own code."""
    func, _, where = key.partition(" (")
    file, _, line = where.rstrip(")").rpartition(":")
    if not file:
        return key, False
    place = origin(file, home)
    return f"{func} ({place.path}:{line})", place.ours


def _gil_tree(report: Report, base: Path | None) -> dict[str, Any] | None:
    path = artifact(report, base, None, GIL_SPEEDSCOPE)
    if path is None:
        return None
    try:
        return walk_tree(read_speedscope(path))
    except (OSError, ValueError, KeyError):
        return None


def _depth(node: dict[str, Any]) -> int:
    """How many frames lie below a node, down its deepest path (iteratively)."""
    deepest, todo = 0, [(node, 0)]
    while todo:
        here, depth = todo.pop()
        deepest = max(deepest, depth)
        todo.extend((child, depth + 1) for child in here["children"].values())
    return deepest


def flame_tree(report: Report, base: Path | None) -> tuple[dict[str, Any] | None, str | None]:
    """Return the flame graph's tree, or None and why there is none."""
    path, why = locate(report, base, None, SPEEDSCOPE)
    if path is None:
        return None, why or ("no sampled Python stacks beside this report (the sampling "
                             "backend keeps them: perfstack plugins lists it)")
    try:
        tree = walk_tree(read_speedscope(path))
    except (OSError, ValueError, KeyError) as exc:
        return None, f"the sampled Python stacks could not be read: {exc}"
    gil = _gil_tree(report, base)
    home = workload_dir(report)
    total = float(tree["value"]) or 1.0

    root: dict[str, Any] = {}
    # Iterative, and cut at MAX_DEPTH: a recursion thousands of frames deep once ended the
    # page (RecursionError); a flame that deep is a sliver no one can read past.
    todo: list[tuple[dict[str, Any], dict[str, Any] | None, dict[str, Any], int]] = [
        (tree, gil, root, 0)]
    while todo:
        node, held, out, depth = todo.pop()
        name, ours = (str(node["name"]), False) if depth == 0 else _label(str(node["name"]),
                                                                          home)
        value = float(node["value"])
        # Two samplers, two sample counts: the GIL-held time is capped at the frame's own.
        out.update({"n": name, "v": round(value, 6),
                    "g": round(min(value, float(held["value"])), 6) if held else 0.0,
                    "o": ours, "c": []})
        kept = [(key, child) for key, child in node["children"].items()
                if child["value"] / total >= MIN_SHARE]
        if depth > MAX_DEPTH and kept:  # depth 0: all threads, 1: a thread, then frames
            below = sum(float(child["value"]) for _, child in kept)
            out["c"].append({"n": f"… {_depth(node)} more frames (the flame is cut at "
                                  f"{MAX_DEPTH} frames deep)", "v": round(below, 6),
                             "g": 0.0, "o": False, "c": []})
            continue
        for key, child in kept:
            mine: dict[str, Any] = {}
            out["c"].append(mine)
            todo.append((child, (held or {}).get("children", {}).get(key), mine, depth + 1))
    root["n"] = "all threads"
    for thread in root["c"]:  # thread names are not code
        thread["o"] = False
    return root, None
