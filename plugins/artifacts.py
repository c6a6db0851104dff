"""Reading the built-in backends' artifacts back for the HTML report and the merged trace.

A report names its artifacts relative to the report file's folder; these helpers resolve them
and read py-spy's speedscope profile (stacks, per thread, in sample order), torch.profiler's
Chrome trace, and the NVML sampler's JSON lines. Each returns nothing when the file is gone:
a report moved without its run folder still renders, without those parts.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from perfstack.report import Report


def artifact(report: Report, base: Path | None, backend: str, label: str) -> Path | None:
    """Return the path of a backend's artifact when it still exists."""
    entry = next((b for b in report.backends if b.name == backend), None)
    if entry is None or label not in entry.artifacts:
        return None
    path = Path(entry.artifacts[label])
    if not path.is_absolute():
        path = (base or Path.cwd()) / path
    return path if path.is_file() else None


@dataclass
class Stacks:
    """Sampled stacks: per thread, (frames root first, seconds) in sample order."""

    threads: dict[str, list[tuple[list[str], float]]]


def _is_ours(file: str) -> bool:
    return file.endswith(("perfstack/bootstrap.py", "/runpy.py")) or file == "<frozen runpy>"


def read_speedscope(path: Path) -> Stacks:
    """Read a py-spy speedscope file into stacks of 'func (file:line)' labels."""
    data = json.loads(path.read_text("utf-8"))
    frames = data["shared"]["frames"]
    labels = [f"{f.get('name', '?')} ({f.get('file', '?')}:{f.get('line') or 0})"
              for f in frames]
    ours = [_is_ours(str(f.get("file") or "")) for f in frames]
    threads: dict[str, list[tuple[list[str], float]]] = {}
    for profile in data.get("profiles", []):
        name = str(profile.get("name", "thread"))
        rows = threads.setdefault(name, [])
        for stack, weight in zip(profile.get("samples", []), profile.get("weights", []),
                                 strict=False):
            rows.append(([labels[i] for i in stack if not ours[i]], float(weight)))
    return Stacks(threads)


def read_chrome_trace(path: Path) -> list[dict[str, Any]]:
    """Return the trace events of a Chrome trace JSON (object or bare list form)."""
    data = json.loads(path.read_text("utf-8", errors="replace"))
    events = data.get("traceEvents", []) if isinstance(data, dict) else data
    return [e for e in events if isinstance(e, dict)]


def read_nvml(path: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Return the NVML sampler's header and samples (``t`` seconds from its start)."""
    lines = path.read_text("utf-8").splitlines()
    if not lines:
        return {}, []
    header = json.loads(lines[0])
    samples = []
    for line in lines[1:]:
        try:
            samples.append(json.loads(line))
        except ValueError:
            continue  # a line cut short when the sampler was stopped
    return header, samples


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


def iter_tree(node: dict[str, Any], depth: int = 0, start: float = 0.0) -> Iterator[
        tuple[dict[str, Any], int, float]]:
    """Yield (node, depth, start) in drawing order, children widest first."""
    yield node, depth, start
    offset = start
    for child in sorted(node["children"].values(), key=lambda c: -c["value"]):
        yield from iter_tree(child, depth + 1, offset)
        offset += child["value"]
