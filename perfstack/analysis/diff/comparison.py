"""The whole comparison of two reports (``Diff``) and how it is made (``diff``): whether they
may be compared, the noise they are judged against, then the environment, the metrics, the rows
and the lead."""

from __future__ import annotations

from typing import Any

from perfstack.analysis.diff.changes import EnvChange, MetricChange
from perfstack.analysis.diff.drift import SESSION_NOISE, MachineDrift, machine_drift
from perfstack.analysis.diff.environment import environment_changes
from perfstack.analysis.diff.family import Family, family_of
from perfstack.analysis.diff.judge import Judge, one_run_threshold
from perfstack.analysis.diff.lead import (
    Lead,
    busy,
    explaining,
    figure,
    payback,
    per_sample,
    what_changed,
    workload_identity,
)
from perfstack.analysis.diff.metrics import different_work, metric_changes
from perfstack.analysis.diff.rows import RowChange, row_changes
from perfstack.analysis.stats import MIN_EFFECT, summarize
from perfstack.records import as_dict, datarecord
from perfstack.report import Report


@datarecord
class Diff:
    """The whole comparison."""

    base: str
    new: str
    environment: list[EnvChange]
    metrics: list[MetricChange]
    rows: dict[str, list[RowChange]]
    row_noise: float | None  # relative run-to-run noise the rows are judged against
    row_noise_reason: str
    machine: MachineDrift
    #: what every format shows first: the workload's figure, what changed, the rows that
    #: explain it
    lead: Lead | None = None
    #: what the verdicts guarantee: the metrics judged together and the false-alarm rate
    family: Family | None = None

    def regressions(self, threshold: float) -> list[MetricChange]:
        """Return metrics that got significantly worse by more than ``threshold`` (0.05=5%).

        Only metrics measured over repeated runs count: a metric sampled within one run per side
        (per-step times under a profiler, sampler intervals) says nothing about the next run."""
        return [m for m in self.metrics if m.verdict == "regression" and m.change is not None
                and abs(m.change) > threshold and m.samples_of == "runs"]

    def to_dict(self, threshold: float | None = None) -> dict[str, Any]:
        """Return the JSON form (``perfstack diff --format json``); with a ``threshold``, the
        gate's verdict too."""
        out = {
            "schema": "perfstack/diff", "version": 1, "base": self.base, "new": self.new,
            "environment": [as_dict(e) for e in self.environment],
            "metrics": [as_dict(m) for m in self.metrics],
            "rows": {layer: [as_dict(r) for r in rows] for layer, rows in self.rows.items()},
            "row_noise": self.row_noise, "row_noise_reason": self.row_noise_reason,
            "machine": {**as_dict(self.machine), "summary": self.machine.describe()},
            "lead": self.lead.to_dict() if self.lead else None,
            "family": self.family.to_dict() if self.family else None,
        }
        if threshold is not None:
            out["gate"] = {"threshold": threshold,
                           "regressions": [m.name for m in self.regressions(threshold)]}
        return out




def _noise(base: Report, new: Report, judge_paired: bool,
           session_noise: float) -> tuple[float | None, str]:
    rel = []
    for report in (base, new):
        wall = next((m for m in report.metrics if m.name == "wall_time" and m.samples), None)
        spread = summarize(wall.samples).relative_stdev if wall and wall.samples else None
        if spread is not None:
            rel.append(spread)
    if not rel:
        return None, ("rows of profiled runs are single measurements and neither report has "
                      "repeated baseline runs: their changes cannot be judged against noise "
                      "(use --repeat 3+)")
    noise = max(rel)
    limit = one_run_threshold(noise)
    sessions = ""
    if not judge_paired and session_noise > limit:
        limit = session_noise
        sessions = f", and the ±{100 * session_noise:.0f}% between-session noise"
    return noise, (f"rows measured in one profiled run per backend: a change counts as "
                   f"beyond noise above {100 * limit:.1f}% (3x the run-to-run noise "
                   f"of the wall time, ±{100 * noise:.1f}%, at least "
                   f"{100 * MIN_EFFECT * 2.5:.0f}%{sessions}, and above a sampled row's own "
                   "counting noise) and when it stays so once the machine's drift between the "
                   "two measuring runs (their probes) is taken out; rows that restate a metric "
                   "share its verdict")


def comparable(base: Report, new: Report) -> str | None:
    """Return why two reports should not be compared (different scripts or modules), or None.
    One script run with other arguments is compared: that is how a batch size is compared."""
    if is_paired(base, new):
        return None  # perfstack ab compared them on purpose
    a, b = workload_identity(base), workload_identity(new)
    if a[0] == b[0]:
        return None  # one script with other arguments: compared, the lead says how they differ
    return (f"the reports profile different workloads ({' '.join([a[0], *a[1]])} vs "
            f"{' '.join([b[0], *b[1]])}); --force compares them anyway")


def is_paired(base: Report, new: Report) -> bool:
    """Whether the two reports are the two sides of one ``perfstack ab`` session."""
    a, b = base.run.pairing, new.run.pairing
    return bool(a and b and a["id"] == b["id"] and a["side"] != b["side"])


def diff(base: Report, new: Report, base_name: str = "base", new_name: str = "new",
         session_noise: float = SESSION_NOISE) -> Diff:
    """Compare two reports; ``session_noise`` is the relative between-session noise assumed
    when they come from separate sessions."""
    paired = is_paired(base, new)
    machine = machine_drift(base, new, session_noise, paired)
    noise, why = _noise(base, new, paired, session_noise)
    wall = base.metric("wall_time")
    judge = Judge(noise, machine, float(wall.value) if wall and wall.value else None)
    lead_name = figure(new.metrics) or figure(base.metrics)
    lead_metric = new.metric(lead_name) or base.metric(lead_name) if lead_name else None
    sample = (per_sample(lead_metric.name, lead_metric.unit, base, new)
              if lead_metric is not None else None)
    metrics = metric_changes(base, new, judge,
                             {lead_metric.name: sample[:2]} if lead_metric and sample else None,
                             lead_name)
    different = workload_identity(base)[1] != workload_identity(new)[1] and not paired
    if different:
        different_work(metrics, lead_name)
    metrics.sort(key=lambda m: m.name != lead_name)  # the figure first; a stable sort
    verdicts = {(m.name, m.source): m.verdict for m in metrics}
    environment = environment_changes(base, new)
    rows = row_changes(base, new, judge, verdicts)
    explain, folded, folded_s = explaining(rows)
    lead = Lead(next((m for m in metrics if m.name == lead_name), None),
                sample[2] if sample else None, what_changed(base, new, environment),
                explain, folded, folded_s, different, busy(base, new), payback(base, new))
    return Diff(base_name, new_name, environment, metrics, rows, noise, why, machine, lead,
                family_of(metrics, lead_name, paired))
