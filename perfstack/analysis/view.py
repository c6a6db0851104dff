"""The view of a report: every figure a reader sees, computed once, as numbers.

The text, markdown and HTML renderers all draw from :func:`build`; none computes a figure of
its own, so no two formats and no two tables can disagree. The order is the order a person in
a hurry reads: a headline (what bounds the workload, with its share, and the workload's own
hottest function), the findings, where the time goes, the drill-down, the layers, and last the
backends, the metrics and the raw artifacts.

Numbers only: words belong to the renderers. A few notes that explain a gap ("ops are not
linked to Python functions: use --torch-stack") are kept as sentences, once each.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from perfstack.analysis.budget import MAIN_PARTS, Budget, Node, drill_down, hardware_beside
from perfstack.analysis.budget import time_budget as _time_budget
from perfstack.analysis.kernels import KernelView, kernel_view
from perfstack.analysis.origin import origin, short_key, workload_dir
from perfstack.analysis.primary import Primary
from perfstack.analysis.stats import Summary, summarize
from perfstack.report import (
    BackendResult,
    Finding,
    Layer,
    Metric,
    Report,
    Row,
    RunRecord,
    order_findings,
)

#: Metric name prefixes that the budget shows already: not repeated in the metrics list.
BUDGET_PREFIXES = ("budget.", "split.")
#: Rows of each layer's first table in the default view (the drill-down already shows the
#: hottest); --full shows --top rows of every table.
DEFAULT_LAYER_ROWS = 3


@dataclass
class Header:
    """What ran, where, and how the runs ended."""

    command: list[str]
    facts: list[str]  # interpreter, OS, CPU, torch, thread settings: short phrases
    perfstack_version: str
    started: str
    duration_s: float
    runs: int
    failures: list[tuple[str, str]]  # (run id, how it ended) of runs that did not exit 0
    complete: bool
    wall: Summary | None  # the baseline's wall times
    printed_by: str | None  # the baseline run whose output is shown: the median one
    printed_median_of: str | None  # the figure it is the median run of ("throughput"...)
    printed: list[str]  # its last lines on stdout
    #: set for ``perfstack analyze``: the recorded files the report was read from
    analyzed: list[str] | None = None
    steps: dict[str, int] | None = None  # --steps: {"warmup": K, "measured": N}
    #: under --steps: (run id, steps it reached) of each clean run that ended before them
    short_of_steps: list[tuple[str, int | None]] = field(default_factory=list)
    repeat: int | None = None  # the baseline runs asked for (0: none, a quick look)


@dataclass
class Headline:
    """The answer in one or two sentences, as numbers and names."""

    bound: str | None  # the budget part that takes the most time ("startup", "kernels"...)
    bound_title: str | None
    bound_share: float | None  # % of the wall time
    bound_source: str | None
    hottest: Node | None  # the workload's own hottest function
    finding: Finding | None  # the first finding


@dataclass
class LayerTable:
    """One source's top rows of one layer, with the columns to show."""

    layer: str
    source: str
    total_rows: int
    columns: list[str]
    rows: list[Row]
    names: list[str]  # each row's name as shown: functions with a short path and their line
    folded: dict[str, int] = field(default_factory=dict)  # library -> rows folded into it
    #: rows left out because no value of theirs could be measured here, with the reason
    unmeasured: list[str] = field(default_factory=list)
    unmeasured_reason: str | None = None
    collapsed: bool = False  # shown as one line (its source and row count): --full opens it


@dataclass
class BackendLine:
    """One backend in one line: what happened, what it cost, where the notes are."""

    name: str
    status: str  # ok | partial | empty | unavailable | failed | crashed | timeout | ...
    layers: list[str]
    wall_s: float | None
    overhead: float | None  # ratio to the baseline's median wall time
    overhead_noise: float | None  # the baseline's relative spread: a ratio within it is noise
    notes: list[int]  # footnote numbers


@dataclass
class ArtifactLine:
    """A raw output kept beside the report, and the one command that opens it."""

    backend: str
    label: str
    path: str  # relative to the report's folder
    opener: str | None


@dataclass
class DevicePart:
    """One part of the device's time over the profiled steps."""

    part: str  # compute, communication, memory, idle, host_wait
    share: float  # % of the steps' wall time
    depth: int  # 1: a part of the line above it (host_wait of idle)
    metric: str


@dataclass
class DeviceTime:
    """The device's time (the ``gpu_busy`` and ``gpu_time.*`` metrics a backend published)."""

    busy: float | None  # gpu_busy, %
    source: str
    window: str  # what the shares are of, from the metric's description
    parts: list[DevicePart]
    comm_overlap: float | None  # % of collective time hidden behind compute
    launch_delay_s: float | None  # median time from a launch call to the start on the device


#: The device breakdown's parts, in order, with the metric each comes from.
DEVICE_PARTS = (("compute", "gpu_time.compute", 0), ("communication", "gpu_time.communication", 0),
                ("memory", "gpu_time.memory", 0), ("idle", "gpu_time.idle", 0),
                ("host_wait", "gpu_idle.host_wait", 1))
DEVICE_METRICS = ("gpu_busy", "gpu_comm_overlap", "gpu_launch_delay",
                  *(name for _, name, _ in DEVICE_PARTS))


@dataclass
class RankTable:
    """A job's ranks side by side: each ``name[rankN]`` metric as a column, a rank a row."""

    columns: list[str]  # metric names without the [rankN]
    rows: list[tuple[int, list[Metric | None]]]  # (rank, its metric per column)
    slowest: int | None  # the slowest_rank metric
    gap: float | None  # straggler_gap, %
    hidden_columns: int  # per-rank metrics left out (--full shows them)


_RANKED = re.compile(r"^(?P<base>.+)\[rank(?P<rank>\d+)\]$")


def rank_table(report: Report, full: bool) -> RankTable | None:
    """The ranks table of a report of two ranks or more (every per-rank figure with
    ``full``, else those not marked detail), or None."""
    by_rank: dict[int, dict[str, Metric]] = {}
    order: list[str] = []
    detail: set[str] = set()
    for m in report.metrics:
        found = _RANKED.match(m.name)
        if found is None:
            continue
        base = found["base"]
        by_rank.setdefault(int(found["rank"]), {})[base] = m
        if base not in order:
            order.append(base)
        if m.detail:
            detail.add(base)
    if len(by_rank) < 2:
        return None
    columns = [c for c in order if full or c not in detail]
    slowest, gap = report.metric("slowest_rank"), report.metric("straggler_gap")
    return RankTable(
        columns, [(rank, [metrics.get(c) for c in columns])
                  for rank, metrics in sorted(by_rank.items())],
        int(slowest.value) if slowest is not None and slowest.value is not None else None,
        float(gap.value) if gap is not None and gap.value is not None else None,
        len(order) - len(columns))


@dataclass
class View:
    """Everything the renderers show."""

    header: Header
    headline: Headline
    findings: list[Finding]
    full: bool  # everything, not the short default (one line per finding's evidence, ...)
    budget: Budget
    device: DeviceTime | None  # the device's time over the profiled steps, when measured
    kernels: KernelView | None  # the device's kernel time by kernel and kind (GPU traces)
    ranks: RankTable | None  # a job's ranks side by side, when there are several
    #: figures of different backends that measure related things (Metric.group), each with
    #: its description, shown together so they read as one picture, not a contradiction
    related: dict[str, list[Metric]]
    tree: list[Node]
    tree_notes: list[str]
    beside: list[Metric]  # hardware figures shown next to the tree
    layers: dict[str, list[LayerTable]]
    metrics: list[Metric]
    hidden_metrics: int  # left out of the default view (--full shows them)
    backends: list[BackendLine]
    footnotes: list[str]  # backend reasons and notes, numbered from 1
    artifacts: list[ArtifactLine]
    #: per layer, the backends whose rows the default view leaves out because the metrics
    #: show the same figures (resources), with their row counts: measured, not missing
    as_metrics: dict[str, list[tuple[str, int]]] = field(default_factory=dict)


def _opener(path: str, openers: Sequence[tuple[str, str]]) -> str | None:
    """How to open a raw output, from the installed backends' ``openers`` (None: unknown)."""
    return next((how for ending, how in openers if path.endswith(ending)), None)


def _header(report: Report, facts: list[str]) -> Header:
    run = report.run
    wall = report.metric("wall_time")
    summary = summarize(wall.samples) if wall is not None and wall.samples else None
    workload = next((m for m in report.metrics if m.source == "workload" and m.samples), None)
    printed_by, median_of, printed = _median_output(run.runs, workload or wall)
    return Header(list(run.command), facts, run.perfstack_version, run.started, run.duration_s,
                  len(run.runs), [(r.id, r.exit.describe()) for r in run.runs
                                  if not r.exit.clean], run.complete, summary, printed_by,
                  median_of, printed,
                  [f["path"] for f in run.analyzed] if run.analyzed is not None else None,
                  run.steps, _short_of_steps(report), run.repeat)


def _short_of_steps(report: Report) -> list[tuple[str, int | None]]:
    """Under ``--steps``: the runs that ended before the steps asked for (the workload made
    fewer), as (run id, the steps it reached); a run that saved no count is left out."""
    asked = report.run.steps
    if not asked:
        return []
    wanted = int(asked.get("warmup", 0)) + int(asked.get("measured", 0))
    return [(r.id, r.steps) for r in report.run.runs
            if r.steps is not None and r.steps < wanted and r.role in ("baseline", "backend")]


def _device(report: Report) -> DeviceTime | None:
    busy = report.metric("gpu_busy")
    parts = [DevicePart(part, float(m.value), depth, name) for part, name, depth in DEVICE_PARTS
             if (m := report.metric(name)) is not None and m.value is not None]
    if busy is None and not parts:
        return None
    # Over the profiled steps when the backend that measured the device had steps (it
    # published a per-step metric), else over the whole run.
    measured_by = {m.source for m in report.metrics
                   if m.name == "gpu_busy" or m.name.startswith("gpu_busy[")} - {"perfstack"}
    stepped = any(m.samples_of == "steps" and m.source in measured_by for m in report.metrics)
    window = "the profiled steps" if stepped else "the run"
    ranks = sum(1 for m in report.metrics if _RANKED.match(m.name)
                and m.name.startswith("gpu_busy["))
    if busy is not None and busy.source == "perfstack" and ranks > 1:  # the job's mean
        window += f" (the mean of {ranks} ranks)"
    overlap = report.metric("gpu_comm_overlap")
    delay = report.metric("gpu_launch_delay")
    return DeviceTime(
        float(busy.value) if busy is not None and busy.value is not None else None,
        busy.source if busy is not None else parts[0].metric, window, parts,
        float(overlap.value) if overlap is not None and overlap.value is not None else None,
        float(delay.value) if delay is not None and delay.value is not None else None)


def _median_output(runs: list[RunRecord],
                   metric: Metric | None) -> tuple[str | None, str | None, list[str]]:
    """The last lines printed by the median baseline run: the run whose value of the
    workload's first metric (one sample per clean baseline run, in run order) is nearest that
    metric's median, so the printed figure agrees with the metric; else the median wall."""
    clean = [r for r in runs if r.role == "baseline" and r.exit.clean]
    samples = metric.samples if metric is not None and metric.source == "workload" else None
    if metric is not None and metric.value is not None and samples and clean \
            and len(samples) == len(clean):
        target = float(metric.value)
        pick = min(range(len(clean)), key=lambda i: abs(samples[i] - target))
        chosen, by = clean[pick], metric.name
    else:
        timed = sorted((r for r in clean if r.wall_s is not None), key=lambda r: r.wall_s or 0.0)
        if not timed:
            return None, None, []
        chosen, by = timed[(len(timed) - 1) // 2], "wall time"
    lines = (chosen.stdout_tail or "").splitlines()[-3:]
    return chosen.id, by, lines


def ranks_read(recorded: dict[str, Any]) -> str:
    """Which ranks' files a report of recorded traces holds: "rank 0 read", "ranks 0-3 read",
    "ranks 0, 2 read" (a job's size says how many there were, not how many were read)."""
    ranks = sorted(int(k[4:]) for k in recorded if k.startswith("rank") and k[4:].isdigit())
    if not ranks:
        return "which ranks were read is not known"
    if len(ranks) == 1:
        return f"rank {ranks[0]} read"
    if ranks == list(range(ranks[0], ranks[-1] + 1)):
        return f"ranks {ranks[0]}-{ranks[-1]} read"
    return "ranks " + ", ".join(map(str, ranks)) + " read"


def environment_facts(env: dict[str, Any]) -> list[str]:
    """Short phrases about the machine: interpreter, OS, CPU, torch, threads."""
    def block(name: str) -> dict[str, Any]:
        value = env.get(name)
        return value if isinstance(value, dict) else {}

    py, cpu, osinfo, torch = block("python"), block("cpu"), block("os"), block("torch")
    facts = [f"{py.get('implementation', 'Python')} {py.get('version', '?')}",
             f"{osinfo.get('system', '?')} {osinfo.get('machine', '')}".strip()]
    isa = cpu.get("isa") or []
    best = next((w for w in ("AMX-BF16", "AVX-512F", "AVX2", "NEON") if w in isa), None)
    facts.append(f"{cpu.get('model') or 'unknown CPU'} ({cpu.get('logical_cpus', '?')} CPUs"
                 + (f", {best}" if best else "") + ")")
    recorded = block("recorded")
    if recorded:  # perfstack analyze: only what the files say about where they were recorded
        devices = sorted({d for r in recorded.values() if isinstance(r, dict)
                          for d in r.get("devices") or []})
        facts = ["recorded elsewhere"] + (["on " + ", ".join(devices)] if devices else [])
        world = recorded.get("world_size")
        if isinstance(world, int) and world > 1:
            facts.append(f"a job of {world} ranks, {ranks_read(recorded)}")
        return facts
    if torch.get("version"):
        facts.append(f"torch {torch['version']}")
    threads = env.get("threads") or {}
    if isinstance(threads, dict) and threads:
        facts.append(" ".join(f"{k}={v}" for k, v in sorted(threads.items())))
    return facts


def _headline(budget: Budget, tree: list[Node], findings: list[Finding]) -> Headline:
    parts = [ln for ln in budget.lines if ln.part in MAIN_PARTS or ln.depth == 1]
    # The biggest part of the main thread's time; a split of the native part is more precise
    # than "native" itself when it is the larger piece of it.
    top = max(parts, key=lambda ln: ln.share, default=None)
    hottest = next((n for n in tree if n.ours), None)
    return Headline(top.part if top else None, top.title if top else None,
                    top.share if top else None, top.source if top else None, hottest,
                    findings[0] if findings else None)


def _columns(rows: list[Row], limit: int) -> list[str]:
    """The value columns to show: in the rows' own order, times and shares before counts (a
    reader looks for seconds first), at most ``limit``."""
    columns: list[str] = []
    units: dict[str, str] = {}
    for row in rows:
        for name, q in row.values.items():
            if name not in columns:
                columns.append(name)
                units[name] = q.unit
    columns.sort(key=lambda n: units[n] == "count")  # stable: keeps the rows' order otherwise
    return columns[:limit]


def _fold_python(rows: list[Row], home: str | None,
                 rank: Primary) -> tuple[list[Row], dict[str, int]]:
    """The workload's own functions as they are; each library's functions as one row (their
    own time summed): the workload's code leads."""
    from perfstack.report import Quantity

    ours: list[Row] = []
    libraries: dict[str, list[Row]] = {}
    for row in rows:
        file = row.attrs.get("file")
        if row.attrs.get("kind") is not None or file is None:
            ours.append(row)
            continue
        where = origin(str(file), home)
        if where.ours:
            ours.append(row)
        else:
            libraries.setdefault(where.library, []).append(row)
    folded: list[Row] = []
    for library, members in libraries.items():
        values: dict[str, Quantity] = {}
        # Own times add up; inclusive ones of nested frames would count twice.
        for name in ("self", "self_time", "self_share", "calls"):
            numbers = [float(q.value) for m in members
                       if (q := m.values.get(name)) is not None
                       and isinstance(q.value, (int, float))]
            if numbers:
                unit = next(m.values[name].unit for m in members if name in m.values)
                values[name] = Quantity(sum(numbers), unit)
        plural = "function" if len(members) == 1 else "functions"
        folded.append(Row(f"library:{library}", f"[{library}] {len(members)} {plural}",
                          members[0].source, values,
                          {"kind": "library", "library": library, "functions": len(members)}))
    merged = ours + folded
    merged.sort(key=lambda r: (r.attrs.get("kind") == "thread",
                               r.attrs.get("kind") == "library", -rank.value(r)))
    return merged, {k: len(v) for k, v in libraries.items()}


def display_name(row: Row, home: str | None) -> str:
    """Return a row's name as shown: a Python function as 'function (short/path.py:line)', the
    path as ``origin`` shows it; any other row by its own name."""
    function, file = row.attrs.get("function"), row.attrs.get("file")
    if isinstance(function, str) and isinstance(file, str):
        line = row.attrs.get("line")
        return short_key(function, file, line if isinstance(line, int) else None, home)
    return row.name


def _unmeasured(row: Row) -> bool:
    """Whether none of the row's values (but perf's running share) could be measured here."""
    if not row.values:
        return False
    for name, q in row.values.items():  # noqa: SIM110 - a loop: all() of a generator costs 3x here
        if q.value is not None and name != "running":
            return False
    return True


def _restates_metrics(rows: list[Row]) -> bool:
    """Whether every row restates a metric (``attrs.metric``): the metrics show them."""
    return bool(rows) and all(isinstance(r.attrs.get("metric"), str) for r in rows)


def _by_source(report: Report, layer: Layer) -> dict[str, list[Row]]:
    """A layer's rows by the backend that measured them, in the report's order."""
    by_source: dict[str, list[Row]] = {}
    for row in report.layers.get(layer, []):
        by_source.setdefault(row.source, []).append(row)
    return by_source


def _as_metrics(report: Report) -> dict[str, list[tuple[str, int]]]:
    """The layers' backends whose rows restate metrics (left out of the default view)."""
    out: dict[str, list[tuple[str, int]]] = {}
    for layer in Layer:
        for source, rows in _by_source(report, layer).items():
            if _restates_metrics(rows):
                out.setdefault(layer.value, []).append((source, len(rows)))
    return out


def _layer_tables(report: Report, top: int, all_frames: bool, max_columns: int,
                  full: bool = True) -> dict[str, list[LayerTable]]:
    home = workload_dir(report)
    rank = Primary(report)
    out: dict[str, list[LayerTable]] = {}
    for layer in Layer:
        tables: list[LayerTable] = []
        for source, rows in _by_source(report, layer).items():
            if not full and _restates_metrics(rows):
                continue
            folded: dict[str, int] = {}
            shown = rows
            if layer is Layer.PYTHON and not all_frames:
                shown, folded = _fold_python(rows, home, rank)
            unmeasured: list[Row] = []
            if not full:
                unmeasured = [r for r in shown if _unmeasured(r)]
                shown = [r for r in shown if not _unmeasured(r)]
            collapsed = not full  # the default shows a layer as one line: the tree leads
            shown = [] if collapsed else shown[:top if full else min(top, DEFAULT_LAYER_ROWS)]
            reason = next((q.reason for r in unmeasured for q in r.values.values() if q.reason),
                          None)
            tables.append(LayerTable(layer.value, source, len(rows),
                                     _columns(shown, max_columns), shown,
                                     [display_name(r, home) for r in shown], folded,
                                     [display_name(r, home) for r in unmeasured], reason,
                                     collapsed))
        out[layer.value] = tables
    return out


def _related(report: Report) -> dict[str, list[Metric]]:
    groups: dict[str, list[Metric]] = {}
    for m in report.metrics:
        if m.group and m.value is not None:
            groups.setdefault(m.group, []).append(m)
    return {g: ms for g, ms in groups.items() if len({m.source for m in ms}) > 1 or len(ms) > 2}


def _default_metric(m: Metric) -> bool:
    return not m.name.startswith(BUDGET_PREFIXES) and not m.detail


def _backends(report: Report, footnotes: list[str], full: bool) -> list[BackendLine]:
    lines = []
    for b in report.backends:
        notes = []
        for text in _backend_notes(b, full):
            if text not in footnotes:
                footnotes.append(text)
            notes.append(footnotes.index(text) + 1)
        ratio = b.overhead.ratio if b.overhead else None
        noise = None
        if b.overhead and b.overhead.baseline_stdev_s is not None \
                and b.overhead.baseline_median_s:
            noise = b.overhead.baseline_stdev_s / b.overhead.baseline_median_s
            if b.overhead.basis == "step":  # the median of many steps: its standard error
                noise /= b.overhead.baseline_n ** 0.5
        lines.append(BackendLine(b.name, b.status.value, list(b.layers), b.wall_s, ratio, noise,
                                 notes))
    return lines


def _backend_notes(b: BackendResult, full: bool) -> list[str]:
    """Why a backend is not simply ok (always), and its notes (with ``full``)."""
    out = []
    if b.reason:
        out.append(b.reason + (f" (fix: {b.fix})" if b.fix else ""))
    if full:
        out += b.notes
    return out


def _artifacts(report: Report, report_dir: Path | None,
               openers: Sequence[tuple[str, str]]) -> list[ArtifactLine]:
    """Every raw output, its path as a user standing here types it, and its opener."""
    out = []
    for b in report.backends:
        for label, path in b.artifacts.items():
            if report_dir is not None and not os.path.isabs(path):
                path = os.path.relpath(report_dir / path)
            out.append(ArtifactLine(b.name, label, path, _opener(path, openers)))
    return out


def build(report: Report, top: int = 10, depth: int = 3, full: bool = False,
          all_frames: bool = False, max_columns: int = 6,
          report_dir: Path | None = None,
          providers: dict[str, list[str]] | None = None,
          openers: Sequence[tuple[str, str]] = ()) -> View:
    """Return the view of ``report``: ``top`` rows per table, drill-down ``depth`` (1-3),
    every metric with ``full``, library frames unfolded with ``all_frames``; artifact paths
    relative to the current folder when ``report_dir`` (the report file's folder) is given,
    each with how it opens where an installed backend says (``openers``)."""
    findings = order_findings(report.findings)
    budget = _time_budget(report, providers)
    # The short report shows three ops under a function and the top kernel of each op.
    tree, tree_notes = drill_down(report, top=top, depth=depth, all_frames=all_frames,
                                  children=top if full else min(top, 3),
                                  kernels=None if full else 1)
    footnotes: list[str] = []
    related = _related(report)
    beside = hardware_beside(report)
    # Figures the page shows already: the related block, the drill-down's hardware line, and
    # the baseline's wall time in the header.
    shown_elsewhere = {id(m) for ms in related.values() for m in ms} | {id(m) for m in beside}
    device = _device(report)
    if device is not None:
        shown_elsewhere |= {id(m) for m in report.metrics if m.name in DEVICE_METRICS}
    ranks = rank_table(report, full)
    if ranks is not None:
        shown_elsewhere |= {id(m) for m in report.metrics if _RANKED.match(m.name)
                            or m.name in ("slowest_rank", "straggler_gap")}
    wall = report.metric("wall_time")
    if wall is not None and wall.samples:
        shown_elsewhere.add(id(wall))
    metrics = [m for m in report.metrics
               if full or (_default_metric(m) and id(m) not in shown_elsewhere)]
    return View(
        header=_header(report, environment_facts(report.environment)),
        headline=_headline(budget, tree, findings),
        findings=findings,
        full=full,
        budget=budget,
        device=device,
        kernels=kernel_view(report, top=5 if not full else max(top, 5)),
        ranks=ranks,
        related=related,
        tree=tree,
        tree_notes=tree_notes,
        beside=beside,
        layers=_layer_tables(report, top, all_frames, max_columns, full),
        as_metrics=_as_metrics(report) if not full else {},
        metrics=metrics,
        hidden_metrics=len(report.metrics) - len(metrics),
        backends=_backends(report, footnotes, full),
        footnotes=footnotes,
        artifacts=_artifacts(report, report_dir, openers),
    )
