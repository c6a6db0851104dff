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
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from perfstack.analysis.panes import homes
from perfstack.analysis.panes.device import DeviceTime
from perfstack.analysis.panes.kernels import KernelView
from perfstack.analysis.panes.ranks import RANKED, RankTable
from perfstack.analysis.panes.roofline import RoofView
from perfstack.analysis.panes.steps import StepView
from perfstack.analysis.panes.streams import StreamView
from perfstack.analysis.rules.gpu import RULES as GPU_RULES
from perfstack.analysis.rules.time import GIL_RULE
from perfstack.analysis.stats import Summary, summarize
from perfstack.analysis.views.budget import MAIN_PARTS, UNSAMPLED_PARTS, Budget, hardware_beside
from perfstack.analysis.views.budget import time_budget as _time_budget
from perfstack.analysis.views.drilldown import Node, drill_down
from perfstack.analysis.views.layers import LayerTable, as_metrics, layer_tables
from perfstack.analysis.views.recorded import not_read, ranks_read, read_in_part
from perfstack.records import datarecord, field
from perfstack.report import (
    BackendResult,
    Finding,
    Metric,
    Report,
    RunRecord,
    order_findings,
)

#: Metric name prefixes that the budget shows already: not repeated in the metrics list.
BUDGET_PREFIXES = ("budget.", "split.")


@datarecord
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
    #: set for ``perfstack attach``: {"pid", "sampled_s", "ended"} (``RunInfo.attached``)
    attached: dict[str, Any] | None = None


@datarecord
class Headline:
    """The answer in one or two sentences, as numbers and names."""

    bound: str | None  # the budget part that takes the most time ("startup", "kernels"...)
    bound_title: str | None
    bound_share: float | None  # % of ``scope``
    bound_source: str | None
    hottest: Node | None  # the workload's own hottest function
    finding: Finding | None  # the first finding
    #: what ``bound_share`` is a share of: the wall time, or under --steps (a sampler that
    #: started after the warm-up steps) the time it sampled, the process's start-up and
    #: teardown left out: the answer is about the steps
    scope: str = "the wall time"
    #: what bounds a GPU's steps (perfstack.analysis.rules.gpu), where a device was measured
    gpu: Finding | None = None


@datarecord
class BackendLine:
    """One backend in one line: what happened, what it cost, where the notes are."""

    name: str
    status: str  # ok | partial | empty | unavailable | failed | crashed | timeout | ...
    layers: list[str]
    wall_s: float | None
    overhead: float | None  # ratio to the baseline's median wall time
    overhead_noise: float | None  # the baseline's relative spread: a ratio within it is noise
    notes: list[int]  # footnote numbers


@datarecord
class ArtifactLine:
    """A raw output kept beside the report, and the one command that opens it."""

    backend: str
    label: str
    path: str  # relative to the report's folder
    opener: str | None


@datarecord
class View:
    """Everything the renderers show."""

    header: Header
    headline: Headline
    findings: list[Finding]
    full: bool  # everything, not the short default (one line per finding's evidence, ...)
    budget: Budget
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
    #: each pane's figures by its stem (``perfstack.analysis.panes.PANES``), None where the
    #: report has nothing for it
    panes: dict[str, Any] = field(default_factory=dict)

    # The panes the answer and the page around the panes read, by name.
    @property
    def device(self) -> DeviceTime | None:
        """The device's time over the profiled steps, when measured."""
        return self.panes.get("device")

    @property
    def kernels(self) -> KernelView | None:
        """The device's kernel time by kernel and kind (GPU traces)."""
        return self.panes.get("kernels")

    @property
    def roofline(self) -> RoofView | None:
        """How close the ops ran to the machine's ceilings."""
        return self.panes.get("roofline")

    @property
    def steps(self) -> StepView | None:
        """Each profiled step by phase, and the outlier steps."""
        return self.panes.get("steps")

    @property
    def streams(self) -> StreamView | None:
        """Each GPU stream's busy share, idle causes and launch queue."""
        return self.panes.get("streams")

    @property
    def ranks(self) -> RankTable | None:
        """A job's ranks side by side, when there are several."""
        return self.panes.get("ranks")


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
                  run.steps, _short_of_steps(report), run.repeat, run.attached)


def _short_of_steps(report: Report) -> list[tuple[str, int | None]]:
    """Under ``--steps``: the runs that ended before the steps asked for (the workload made
    fewer), as (run id, the steps it reached); a run that saved no count is left out."""
    asked = report.run.steps
    if not asked:
        return []
    wanted = int(asked.get("warmup", 0)) + int(asked.get("measured", 0))
    return [(r.id, r.steps) for r in report.run.runs
            if r.steps is not None and r.steps < wanted and r.role in ("baseline", "backend")]


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
    recorded, reading = block("recorded"), block("reading")
    if recorded or reading:  # perfstack analyze: only what the files say of where they ran
        devices = sorted({d for r in recorded.values() if isinstance(r, dict)
                          for d in r.get("devices") or []})
        facts = ["recorded elsewhere"] + (["on " + ", ".join(devices)] if devices else [])
        world = recorded.get("world_size")
        if isinstance(world, int) and world > 1:
            facts.append(f"a job of {world} ranks, {ranks_read(recorded)}")
        return facts + read_in_part(recorded) + not_read(reading)
    if torch.get("version"):
        facts.append(f"torch {torch['version']}")
    threads = env.get("threads") or {}
    if isinstance(threads, dict) and threads:
        facts.append(" ".join(f"{k}={v}" for k, v in sorted(threads.items())))
    return facts


def _headline(budget: Budget, tree: list[Node], findings: list[Finding]) -> Headline:
    windowed = any(ln.part in UNSAMPLED_PARTS for ln in budget.lines)
    # Under --steps the sampler saw the measured steps and the teardown: the answer is about
    # the steps, so start-up (the teardown, here) does not compete with them.
    skipped = (*UNSAMPLED_PARTS, "startup") if windowed else UNSAMPLED_PARTS
    parts = [ln for ln in budget.lines if (ln.part in MAIN_PARTS or ln.depth == 1)
             and ln.part not in skipped]
    # The biggest part of the main thread's time; a split of the native part is more precise
    # than "native" itself when it is the larger piece of it.
    top = max(parts, key=lambda ln: ln.share, default=None)
    hottest = next((n for n in tree if n.ours), None)
    share, scope = (top.share if top else None), "the wall time"
    bound = top.part if top else None
    if bound == "idle" and any(f.rule == GIL_RULE for f in findings):
        bound = "contended"  # it waits for its own threads, and they for the GIL
    if windowed and top is not None:
        steps = sum(ln.share for ln in parts if ln.depth == 0)
        share, scope = (100 * top.share / steps if steps else None,
                        "the measured steps' sampled time")
    gpu = next((f for f in findings if f.rule in GPU_RULES.values()), None)
    return Headline(bound, top.title if top else None, share,
                    top.source if top else None, hottest,
                    findings[0] if findings else None, scope, gpu)


def _related(report: Report) -> dict[str, list[Metric]]:
    groups: dict[str, list[Metric]] = {}
    for m in report.metrics:  # (a job's per-rank figures are the ranks table's)
        if m.group and m.value is not None and not RANKED.match(m.name):
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
          openers: Sequence[tuple[str, str]] = (),
          advice: dict[str, list[str]] | None = None) -> View:
    """Return the view of ``report``: ``top`` rows per table, drill-down ``depth`` (1-3),
    every metric with ``full``, library frames unfolded with ``all_frames``; artifact paths
    relative to the current folder when ``report_dir`` (the report file's folder) is given,
    each with how it opens where an installed backend says (``openers``); a gap's hint in
    the words of the installed backends that would fill it (``advice``)."""
    findings = order_findings(report.findings)
    budget = _time_budget(report, providers)
    # The short report shows three ops under a function and the top kernel of each op.
    tree, tree_notes = drill_down(report, top=top, depth=depth, all_frames=all_frames,
                                  children=top if full else min(top, 3),
                                  kernels=None if full else 1, advice=advice or {})
    footnotes: list[str] = []
    related = _related(report)
    beside = hardware_beside(report)
    # Figures the page shows already: the related block, the drill-down's hardware line, and
    # the baseline's wall time in the header.
    shown_elsewhere = {id(m) for ms in related.values() for m in ms} | {id(m) for m in beside}
    wall = report.metric("wall_time")
    if wall is not None and wall.samples:
        shown_elsewhere.add(id(wall))
    panes = {}
    for stem, home in homes("perfstack.analysis.panes"):
        panes[stem] = home.view(report, top, full)
        shows = getattr(home, "shows", None)
        if panes[stem] is not None and shows is not None:
            shown_elsewhere |= {id(m) for m in report.metrics if shows(m.name)}
    metrics = [m for m in report.metrics
               if full or (_default_metric(m) and id(m) not in shown_elsewhere)]
    return View(
        header=_header(report, environment_facts(report.environment)),
        headline=_headline(budget, tree, findings),
        findings=findings,
        full=full,
        budget=budget,
        panes=panes,
        related=related,
        tree=tree,
        tree_notes=tree_notes,
        beside=beside,
        layers=layer_tables(report, top, all_frames, max_columns, full),
        as_metrics=as_metrics(report) if not full else {},
        metrics=metrics,
        hidden_metrics=len(report.metrics) - len(metrics),
        backends=_backends(report, footnotes, full),
        footnotes=footnotes,
        artifacts=_artifacts(report, report_dir, openers),
    )
