"""What a diff leads with: the workload's own figure, what the user changed, and the rows that
explain the change.

Every format (text, markdown, HTML, JSON) shows these first, in this order:

1. **the figure**: the workload's own measure of speed as it declared it
   (``perfstack.report_metric("throughput", ..., better="higher")``), else the wall time; per
   sample when the two sides ran different batch sizes and the figure is per step;
2. **what changed** between the sides, as the user made the change: the arguments, the script
   or its commit, the environment;
3. **the rows that explain it**: rows that appeared or vanished first, then rows that moved
   beyond the noise, by the seconds they moved; start-up work (imports) is folded away, since
   it moves between any two processes.
"""

from __future__ import annotations

import difflib
import math
import os
from collections.abc import Iterable
from typing import Any

from perfstack.analysis.diff.changes import EnvChange, MetricChange
from perfstack.analysis.diff.rows import RowChange
from perfstack.records import datarecord, field
from perfstack.report import Better, Metric, Report
from perfstack.report.units import fmt_seconds

#: Argument names that set the batch size, as the workloads people bring spell them.
BATCH_FLAGS = ("--batch-size", "--batch_size", "--batchsize", "--bs")
#: Rows the lead names at most (the diff's tables hold the rest).
LEAD_ROWS = 8


@datarecord
class Lead:
    """The head of a diff."""

    #: the workload's own figure, judged (None: neither report has one)
    figure: MetricChange | None
    #: how the figure was put per sample, when the batch sizes differ (None otherwise)
    per_sample: str | None
    #: what differs between the sides, one phrase each ("arguments: --batch-size 64 -> 256")
    changed: list[str]
    #: the rows that explain the change: appeared and vanished first, then moved beyond noise
    explain: list[RowChange] = field(default_factory=list)
    #: start-up rows that moved beyond noise or appeared, folded away: how many, seconds moved
    folded: int = 0
    folded_s: float = 0.0
    #: the two sides ran different work (other arguments): totals of the run are compared,
    #: not judged better or worse; only the figure is
    different_work: bool = False
    #: other programs kept the machine busy during the sides' runs: one phrase, or None
    busy: str | None = None
    #: when one side compiles more (torch.compile), whether its steps' saving pays the
    #: compile time back, and after how many steps: one phrase, or None
    payback: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON form (the rows by layer and key; the rows themselves are listed
        under the diff's ``rows``)."""
        return {"figure": self.figure.name if self.figure else None,
                "figure_change": self.figure.change if self.figure else None,
                "figure_verdict": self.figure.verdict if self.figure else None,
                "per_sample": self.per_sample, "changed": self.changed,
                "explain": [{"layer": r.layer, "key": r.key, "status": r.status}
                            for r in self.explain],
                "folded": self.folded, "folded_s": self.folded_s,
                "different_work": self.different_work, "busy": self.busy,
                "payback": self.payback}


def workload_identity(report: Report) -> tuple[str, tuple[str, ...]]:
    """Return what makes two reports comparable: the script's file name (or the module) and
    the workload's arguments. The folder may differ (two checkouts of one project)."""
    command = report.run.command
    if len(command) >= 3 and command[1] == "-m":
        return f"-m {command[2]}", tuple(command[3:])
    if len(command) >= 2:
        return os.path.basename(command[1]), tuple(command[2:])
    return " ".join(command), ()


def batch_size(args: list[str]) -> int | None:
    """Return the batch size the arguments set, or None."""
    for i, arg in enumerate(args):
        name, eq, value = arg.partition("=")
        if name in BATCH_FLAGS:
            text = value if eq else (args[i + 1] if i + 1 < len(args) else "")
            try:
                return int(text)
            except ValueError:
                return None
    return None


def argument_change(a: list[str], b: list[str]) -> str | None:
    """Return the arguments' difference in a few words ('--batch-size 64 -> 256'), or None."""
    if a == b:
        return None
    parts = []
    matcher = difflib.SequenceMatcher(a=a, b=b, autojunk=False)
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op == "equal":
            continue
        # The flag before a changed value says what the value is.
        flag = a[i1 - 1] if i1 > 0 and op == "replace" and a[i1 - 1].startswith("-") else ""
        old, new = " ".join(a[i1:i2]) or "(none)", " ".join(b[j1:j2]) or "(none)"
        parts.append(f"{flag} {old} -> {new}".strip())
    return ", ".join(parts)


def what_changed(base: Report, new: Report, environment: list[EnvChange]) -> list[str]:
    """Return what differs between the two sides as the user made it: the arguments, the
    script or its commit, the environment."""
    out = []
    (ta, a_args), (tb, b_args) = workload_identity(base), workload_identity(new)
    args = argument_change(list(a_args), list(b_args))
    if args:
        out.append(f"arguments: {args}")
    if ta != tb:
        out.append(f"script: {ta} -> {tb}")
    ra, rb = (r.environment.get("repository") for r in (base, new))
    if isinstance(ra, dict) and isinstance(rb, dict) and ra.get("commit") != rb.get("commit"):
        out.append(f"commit: {_commit(ra)} -> {_commit(rb)}")
    elif isinstance(ra, dict) and isinstance(rb, dict) and ra.get("dirty") != rb.get("dirty"):
        out.append(f"working tree: {_commit(ra)} -> {_commit(rb)}")
    if environment:
        names = ", ".join(e.what for e in environment[:3])
        more = f" and {len(environment) - 3} more" if len(environment) > 3 else ""
        out.append(f"environment: {names}{more}")
    return out


def _commit(repo: dict[str, Any]) -> str:
    commit = str(repo.get("commit") or "?")[:10]
    return commit + (" (uncommitted changes)" if repo.get("dirty") else "")


def payback(base: Report, new: Report) -> str | None:
    """'compiling took 34 s more a run; at 2.1 ms saved a step it pays back after 16,000
    steps' where the new side compiles more than the base (torch.compile against eager, or a
    change that recompiles), from each side's compile time and baseline step time; where
    its steps are no faster, that it never pays back."""
    def value(report: Report, name: str) -> float | None:
        m = report.metric(name)
        return float(m.value) if m is not None and m.value is not None else None

    extra = (value(new, "compile_time") or 0.0) - (value(base, "compile_time") or 0.0)
    a, b = value(base, "step_time"), value(new, "step_time")
    if extra <= 0.1 or a is None or b is None:
        return None
    spent = f"compiling took {fmt_seconds(extra)} more a run"
    if b >= a:
        return f"{spent}, and the steps are no faster ({fmt_seconds(b)} vs {fmt_seconds(a)}): "\
               "it never pays back"
    return (f"{spent}; at {fmt_seconds(a - b)} saved a step it pays back after "
            f"{math.ceil(extra / (a - b)):,} steps")


def busy(base: Report, new: Report) -> str | None:
    """Say how busy other programs kept the machine during the two sides' runs, when they
    disturbed any (``perfstack.machine.load``), or None."""
    from perfstack.machine import load as machineload

    runs = [r for report in (base, new) for r in report.run.runs if r.machine_load]
    hit = [r for r in runs if machineload.disturbed(r.machine_load)]
    if not hit:
        return None
    worst = machineload.most_others(r.machine_load for r in hit)
    return (f"the machine was busy: other programs kept up to {worst:.1f} CPUs busy during "
            f"{len(hit)} of {len(runs)} runs; the verdicts are weaker than on a quiet machine "
            "(run it again there)")


def figure(metrics: list[Metric]) -> str | None:
    """Return the name of the workload's own figure among a report's metrics: one the
    workload reported with a better direction (one named like a throughput first), else the
    wall time."""
    own = pick_figure(m.name for m in metrics
                      if m.source == "workload" and m.better != Better.NEITHER)
    if own is not None:
        return own
    return "wall_time" if any(m.name == "wall_time" for m in metrics) else None


def pick_figure(names: Iterable[str]) -> str | None:
    """Return which of the workload's own metrics (with a better direction) is its figure:
    one named like a throughput first, then by name; None for none."""
    return min(names, key=lambda n: ("throughput" not in n.lower(), n), default=None)


def per_sample(name: str, unit: str, base: Report, new: Report
               ) -> tuple[float, float, str] | None:
    """Return how to put a per-step figure per sample when the two sides' batch sizes differ:
    the factors for the base's and the new side's values, and how it was done (factors of 1
    for a figure per sample already); None when the batch sizes agree or are unknown."""
    ba, bb = (batch_size(list(workload_identity(r)[1])) for r in (base, new))
    if not ba or not bb or ba == bb:
        return None
    if "sample" in unit:  # per sample already: said, not scaled
        return 1.0, 1.0, f"per sample: {name} is in {unit} (batch {ba} -> {bb})"
    if unit.endswith("/s"):  # a rate of steps: samples/s = steps/s x batch
        return float(ba), float(bb), f"per sample: {name} x batch ({ba} -> {bb})"
    if unit == "s" and name != "wall_time":  # a time per step
        return 1 / ba, 1 / bb, f"per sample: {name} / batch ({ba} -> {bb})"
    return None


def explaining(rows: dict[str, list[RowChange]]) -> tuple[list[RowChange], int, float]:
    """Return the rows that explain a change, appeared and vanished ones first (by their
    seconds), then those that moved beyond noise (by the seconds they moved); and the start-up
    rows folded away: how many, and the seconds they moved in all."""
    def seconds(r: RowChange) -> float:
        if r.unit != "s":
            return 0.0
        if r.delta is not None:
            return abs(r.delta)
        return abs(r.new if r.new is not None else r.base or 0.0)

    candidates = [r for layer in rows.values() for r in layer
                  if not r.aggregate and r.beyond_noise and not r.by_metric]
    folded = [r for r in candidates if r.startup]
    kept = [r for r in candidates if not r.startup and (r.status != "changed" or seconds(r))]
    # Appeared and vanished first, by their seconds; then each layer's rows that moved most
    # (layers measure different windows: a sampler's whole run, a profiler's few steps, so
    # their seconds are ranked within a layer, not against each other).
    # A graph break that came or went explains a compiled model's change before anything
    # else: the time it cost is spread over the ops either side of it.
    once = sorted((r for r in kept if r.status != "changed"),
                  key=lambda r: (r.kind != "graph-break", r.layer != "compile", r.unit != "s",
                                 -seconds(r)))[:LEAD_ROWS // 2]
    moved: list[RowChange] = []
    per_layer = [sorted((r for r in kept if r.status == "changed" and r.layer == layer),
                        key=lambda r: (r.unit != "s", -seconds(r))) for layer in rows]
    for rank in range(LEAD_ROWS):
        moved += [layer[rank] for layer in per_layer if rank < len(layer)]
    return (once + moved)[:LEAD_ROWS], len(folded), sum(seconds(r) for r in folded)
