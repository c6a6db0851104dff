"""Each compiled kernel traced to the user's lines: the time of inductor's generated code, in
the torch trace, summed per line of the user's source it fuses.

A compiled graph runs as one range in the trace, ``## Call CompiledFxGraph <key> ##``; the
ranges directly under it are its kernels in the order the generated code calls them
(``triton_poi_fused_mul_0`` on a GPU, ``graph_0_cpp_fused_relu_0`` on the CPU, ``aten::mm``
for a library call). The compile records' provenance (``perfstack_plugins.compiler.
provenance``) lists the same kernels, in the same order, with the user lines each fuses. A
graph's kernels are matched in order, by name, against each provenance sequence; the one
matching most (then: of the graph's own compile, the tightest, the latest) is the graph's.

A kernel's time is its device time on a GPU (the device kernels launched under its range,
linked by correlation) and its range's time on the CPU; a kernel fusing several lines gives
each an equal part. What no provenance names (a kernel without a match, a kernel inductor
knew no line for, time of the graph's call outside its kernels on a GPU) is *unattributed*:
``compiled_kernel_lines_share`` is the attributed part of the compiled kernels' time.
"""

from __future__ import annotations

import re
from collections import defaultdict
from typing import Any

from perfstack.records import datarecord, field
from perfstack.report import Better, Layer, Metric, Quantity, Row

from ..compiler.provenance import (
    Candidate,
    Entry,
    Site,
    kernel_match_name,
)
from .links import Linker
from .optree import Tree
from .trace import TraceAggregate, build_trees

SOURCE = "torch"
#: inductor's range around one call of a compiled graph.
GRAPH_CALL = "## Call CompiledFxGraph "
#: the range around a compiled forward: 'Torch-Compiled Region: 0/1' (dynamo's compile id)
REGION = "Torch-Compiled Region: "
#: a C++ kernel's range names the inductor graph it belongs to: graph_2_cpp_fused_...
GRAPH_ID = re.compile(r"^graph_(\d+)_")
#: kernels named in a line's row (the JSON's row; the text names fewer)
KERNELS_KEPT = 8
US = 1e-6


@datarecord
class _Line:
    """One user line's sums."""

    site: Site
    time: float = 0.0  # µs
    calls: int = 0
    kernels: dict[str, float] = field(default_factory=dict)  # kernel -> µs


@datarecord
class _Call:
    """One call of a compiled graph: its kernels' names and times (µs), in order."""

    key: str  # the graph (inductor's cache key in the range's name)
    names: list[str]
    times: list[float]
    outside: float  # device time launched by the call outside its kernels' ranges (µs)
    compile_id: str | None  # the forward's compile id, where the trace says
    graph: str | None  # inductor's graph id, from its C++ kernels' names


def _children(tree: Tree, i: int) -> list[int]:
    out, c, stop = [], i + 1, i + tree.size[i]
    while c < stop:
        out.append(c)
        c += tree.size[c]
    return out


def _compile_id(tree: Tree, i: int, names: list[str]) -> str | None:
    p = tree.parent[i]
    while p >= 0:
        name: str = names[tree.name[p]]
        if name.startswith(REGION):
            return name[len(REGION):].strip()
        p = tree.parent[p]
    return None


def _device_times(agg: TraceAggregate, trees: dict[str, Tree],
                  calls: dict[tuple[str, int], Any]) -> dict[tuple[str, int], float]:
    """Device µs launched under each op that is a kernel range of a graph call (by its tree
    and row), and under each graph call outside them (keyed by the call's own row)."""
    out: dict[tuple[str, int], float] = defaultdict(float)
    linker = Linker(agg, trees)
    tid_of = {id(t): tid for tid, t in trees.items()}
    for kernel in agg.kernels:
        found = linker.launcher(kernel)
        if found is None:
            continue
        tree, j = found
        tid = tid_of[id(tree)]
        while j >= 0:
            p = tree.parent[j]
            if (tid, j) in calls:  # launched by the call itself, outside a kernel's range
                out[(tid, j)] += kernel.dur
                break
            if p >= 0 and (tid, p) in calls:
                out[(tid, j)] += kernel.dur
                break
            j = p
    return out


def _calls(agg: TraceAggregate) -> tuple[list[_Call], bool]:
    """Every call of a compiled graph in the trace, and whether times are the device's."""
    trees = build_trees(agg)
    names = agg.names
    found: dict[tuple[str, int], Any] = {}
    for tid, tree in trees.items():
        for i, n in enumerate(tree.name):
            if names[n].startswith(GRAPH_CALL) and not tree.gone(i):
                found[(tid, i)] = tree
    if not found:
        return [], False
    device = bool(agg.kernels)
    times = _device_times(agg, trees, found) if device else {}
    out = []
    for (tid, i), tree in found.items():
        kids = [c for c in _children(tree, i) if not tree.gone(c)]
        kid_names = [names[tree.name[c]] for c in kids]
        if device:
            kid_times = [times.get((tid, c), 0.0) for c in kids]
        else:
            kid_times = [tree.end[c] - tree.ts[c] for c in kids]
        graph = next((m.group(1) for n in kid_names if (m := GRAPH_ID.match(n))), None)
        out.append(_Call(names[tree.name[i]][len(GRAPH_CALL):].strip(" #"), kid_names,
                         kid_times, times.get((tid, i), 0.0) if device else 0.0,
                         _compile_id(tree, i, names), graph))
    return out, device


def align(names: list[str], entries: list[Entry]) -> list[int | None]:
    """Each kernel (by name, in call order) matched to the next provenance entry of the same
    name, in handle order: the entry's index, or None where none is left."""
    wanted = [kernel_match_name(n) for n in names]
    positions: dict[str, list[int]] = defaultdict(list)
    for k, e in enumerate(entries):
        positions[e.match_name].append(k)
    out: list[int | None] = []
    at = 0
    for name in wanted:
        found = next((k for k in positions.get(name, ()) if k >= at), None)
        out.append(found)
        if found is not None:
            at = found + 1
    return out


def _score(call: _Call, cand: Candidate, hint: str | None) -> tuple[int, int, int, int]:
    matched = [k for k in align(call.names, cand.entries) if k is not None]
    if not matched:
        return (0, 0, 0, 0)
    span = matched[-1] - matched[0] + 1
    own = int(hint is not None and cand.compile_id == hint)
    return (len(matched), own, -(span - len(matched)), cand.order)


def choose(calls: list[_Call], candidates: list[Candidate]) -> dict[str, Candidate]:
    """Each graph's provenance (by the graph's key), where any matches its kernels."""
    # A C++ kernel's graph id ties a backward's graph to its forward's compile id.
    graph_compile = {c.graph: c.compile_id for c in calls
                     if c.graph is not None and c.compile_id is not None}
    out: dict[str, Candidate] = {}
    for call in calls:
        if call.key in out or not call.names:
            continue
        hint = call.compile_id or graph_compile.get(call.graph or "")
        scored = [(_score(call, c, hint), i) for i, c in enumerate(candidates)]
        best = max(scored, default=None)
        if best is not None and best[0][0] > 0:
            out[call.key] = candidates[best[1]]
    return out


@datarecord
class KernelLines:
    """The compiled kernels' time per user line."""

    rows: list[Row]
    metrics: list[Metric]
    notes: list[str]


def _row(line: _Line, total: float, device: bool) -> Row:
    s = line.site
    kernels = sorted(line.kernels.items(), key=lambda kv: -kv[1])
    attrs: dict[str, Any] = {
        "kind": "compiled-line", "file": s.file, "line": s.line, "function": s.function,
        "code": s.code, "time_of": "device" if device else "cpu",
        "kernels": [{"name": k, "time": t * US} for k, t in kernels[:KERNELS_KEPT]],
        "kernel_count": len(kernels)}
    if s.callers:
        attrs["callers"] = s.callers
    return Row(f"line: {s.file}:{s.line}", s.code or f"{s.function} line {s.line}", SOURCE,
               {"time": Quantity(line.time * US, "s"),
                "share": Quantity(100 * line.time / total if total else None, "%"),
                "kernel_calls": Quantity(line.calls, "count")},
               attrs, {Layer.PYTHON.value: [f"{s.function} ({s.file}:{s.line})"]})


def kernel_lines(agg: TraceAggregate, candidates: list[Candidate]) -> KernelLines:
    """The compile layer's per-line rows of a trace, with the share attributed, or nothing
    where the trace holds no compiled graph's call."""
    calls, device = _calls(agg)
    if not calls:
        return KernelLines([], [], [])
    total = sum(sum(c.times) + c.outside for c in calls)
    clock = "device" if device else "CPU"
    metrics = [Metric(
        "compiled_kernel_time", total * US, "s", Layer.COMPILE, SOURCE, Better.LOWER,
        detail=True, description=(
            f"the {clock} time of the kernels inductor's compiled graphs ran in the profiled "
            "steps (each graph call's kernels and library calls, 'Call CompiledFxGraph' "
            "ranges)"))]
    if not candidates:
        return KernelLines([], metrics, [
            "compiled kernels not traced to user lines: the compile records hold no "
            "provenance (a torch without inductor's provenance tracking, or "
            "--torch-no-kernel-lines)"])
    chosen = choose(calls, candidates)
    lines: dict[tuple[str, int], _Line] = {}
    unattributed: dict[str, float] = defaultdict(float)
    attributed = 0.0
    for call in calls:
        cand = chosen.get(call.key)
        matches = align(call.names, cand.entries) if cand is not None else [None] * len(
            call.names)
        for name, t, k in zip(call.names, call.times, matches, strict=True):
            sites = cand.entries[k].sites if cand is not None and k is not None else []
            if not sites:
                unattributed[name] += t
                continue
            attributed += t
            for site in sites:
                line = lines.setdefault((site.file, site.line), _Line(site))
                line.time += t / len(sites)
                line.calls += 1
                line.kernels[name] = line.kernels.get(name, 0.0) + t / len(sites)
        if call.outside:
            unattributed["(launched by the graph's call itself)"] += call.outside
    rows = sorted((_row(v, total, device) for v in lines.values()),
                  key=lambda r: -(r.values["time"].value or 0))
    share = 100 * attributed / total if total else None
    metrics.append(Metric(
        "compiled_kernel_lines_share", share, "%", Layer.COMPILE, SOURCE, Better.HIGHER,
        detail=True, description=(
            f"of the compiled kernels' {clock} time traced to the user's source lines by "
            "inductor's provenance (a kernel fusing n lines gives each 1/n)")))
    notes = []
    if unattributed:
        top = sorted(unattributed.items(), key=lambda kv: -kv[1])[:3]
        notes.append("compiled kernels not traced to a line: " + ", ".join(
            f"{name} ({t / 1e3:.3f} ms)" for name, t in top)
            + (f" and {len(unattributed) - 3} more" if len(unattributed) > 3 else ""))
    return KernelLines(rows, metrics, notes)
