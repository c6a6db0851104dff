"""What changed between two reports, in which layer, and whether it is more than noise.

Order of the answer: environment differences first (a different torch, CPU or thread setting
explains most differences), then how the machine itself moved (``drift``: the
probe timed in every run, instruction counts where the machine counts them), then metrics
matched by name and source, judged with a proper test where both sides have repeated samples,
then rows matched by key in every layer, sorted by the time they moved.

Two kinds of pairs of reports are judged differently:

- two reports of one ``perfstack ab`` session: their baseline runs were interleaved, so the
  i-th samples form a pair and a paired test sees through drift (``stats.compare_paired``);
- two separate sessions: each session's repeats agree more closely with each other than with
  another session's, so a two-sample test alone calls machine drift a change. A change counts
  only when the test says so, it exceeds the between-session noise, and it still does, in the
  same direction, once the machine's drift (the probes) is taken out.

Rows of a profiled run are single measurements (one run per backend): they are judged against
the run-to-run noise of the wall time, corrected by the probes of the two runs that measured
them, and the output says so. Rows that restate a metric (resources' medians of the baseline
runs) share that metric's verdict.
"""

from __future__ import annotations

from typing import Any

from perfstack.analysis.diff.changes import EnvChange as EnvChange  # re-exported: moved there
from perfstack.analysis.diff.changes import MetricChange as MetricChange
from perfstack.analysis.diff.drift import SESSION_NOISE, MachineDrift, drift_for, machine_drift
from perfstack.analysis.diff.family import FAMILY_ALPHA as FAMILY_ALPHA
from perfstack.analysis.diff.family import FIGURE_WEIGHT as FIGURE_WEIGHT
from perfstack.analysis.diff.family import Family, family_of, family_wise
from perfstack.analysis.diff.judge import SMALL_TIME, Judge, one_run_threshold
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
from perfstack.analysis.diff.rows import RowChange, row_changes
from perfstack.analysis.perrank import RANKED, distributions, is_big
from perfstack.analysis.stats import MIN_EFFECT, compare, compare_paired, summarize
from perfstack.records import as_dict, datarecord
from perfstack.report import Better, Metric, Report
from perfstack.report.units import fmt_seconds

#: Environment facts that change performance, as (label, path in the environment block).
ENV_FACTS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("Python", ("python", "version")),
    ("Python implementation", ("python", "implementation")),
    ("GIL enabled", ("python", "gil_enabled")),
    ("torch version", ("torch", "version")),
    ("torch build (git)", ("torch", "git_version")),
    ("torch debug build", ("torch", "debug")),
    ("torch CUDA", ("torch", "cuda")),
    ("torch CPU capability", ("torch", "cpu_capability")),
    ("torch intra-op threads", ("torch", "intra_op_threads")),
    ("torch inter-op threads", ("torch", "inter_op_threads")),
    ("CPU model", ("cpu", "model")),
    ("CPU ISA", ("cpu", "isa")),
    ("logical CPUs", ("cpu", "logical_cpus")),
    ("usable CPUs", ("cpu", "affinity")),
    ("sockets", ("cpu", "sockets")),
    ("thread settings", ("threads",)),
    ("OS release", ("os", "release")),
    ("installed packages", ("packages",)),
)

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


def _get(env: dict[str, Any], path: tuple[str, ...]) -> Any:
    node: Any = env
    for part in path:
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def environment_changes(base: Report, new: Report) -> list[EnvChange]:
    """Return the environment facts that differ (one missing on a side is not a difference)."""
    out = []
    from perfstack.machine.environment import plugin_blocks

    def fields(env: dict[str, Any], block: str) -> list[str]:
        found = env.get(block)
        return list(found) if isinstance(found, dict) else []

    # A plugin's block (perfstack_environment): each of its fields, compared as it is.
    plugin_facts = [(f"{block} {name}", (block, name))
                    for block in dict.fromkeys([*plugin_blocks(base.environment),
                                                *plugin_blocks(new.environment)])
                    for name in dict.fromkeys([*fields(base.environment, block),
                                               *fields(new.environment, block)])]
    for label, path in [*ENV_FACTS, *plugin_facts]:
        a, b = _get(base.environment, path), _get(new.environment, path)
        if a is None or b is None or a == b:
            continue
        if isinstance(a, dict) and isinstance(b, dict):
            keys = sorted(set(a) | set(b))
            a = {k: a.get(k) for k in keys if a.get(k) != b.get(k)}
            b = {k: b.get(k) for k in keys if k in a}
        out.append(EnvChange(label, a, b))
    return out


def _metric_change(a: Metric | None, b: Metric | None, judge: Judge) -> MetricChange:
    ref = b or a
    assert ref is not None
    change = MetricChange(ref.name, ref.source, ref.layer, ref.unit, ref.better.value,
                          a.value if a else None, b.value if b else None, None, "", "",
                          n_base=len(a.samples or []) if a else 0,
                          n_new=len(b.samples or []) if b else 0)
    if a is None:
        change.verdict, change.reason = "appeared", "only in the new report"
        return change
    if b is None:
        change.verdict, change.reason = "vanished", "only in the base report"
        return change
    if a.value is None or b.value is None:
        change.verdict = "unknown"
        change.reason = "; ".join(r for r in (a.reason, b.reason) if r) or "a value is unknown"
        return change
    change.change = (b.value / a.value - 1) if a.value else None
    base_samples = a.samples or [a.value]
    new_samples = b.samples or [b.value]
    one_run = a.samples_of if a.samples_of != "runs" else b.samples_of
    if (judge.paired and one_run == "runs" and a.samples and b.samples
            and len(a.samples) == len(b.samples)):
        result = compare_paired(a.samples, b.samples)
        change.change = result.change
    else:
        result = compare(base_samples, new_samples)
    change.test = result.test
    change.statistic = result.statistic
    change.pvalue = result.pvalue
    change.reason = result.reason
    significant: bool | None = result.significant
    if one_run != "runs" and a.samples and b.samples:
        # The samples share one run's conditions: their spread is not the run-to-run noise,
        # and a t-test on them would call any shift between two runs significant.
        change.samples_of = one_run
        if judge.noise is None:
            significant = None
            change.reason = (f"{one_run} of one run per side, and no repeated baseline runs to "
                             f"tell the run-to-run noise (use --repeat 3+)")
        else:
            limit = one_run_threshold(judge.noise)
            outside = change.change is not None and abs(change.change) > limit
            significant = bool(result.significant) and outside
            change.reason = (f"{one_run} of one run per side: beyond noise only above "
                             f"{100 * limit:.1f}% (3x the wall time's run-to-run noise, at "
                             f"least {100 * MIN_EFFECT * 2.5:.0f}%) and by {result.test}; "
                             f"changed at most, never a regression: one profiled run a side "
                             f"(not gated)")
            if significant and ref.better != Better.NEITHER:
                # One run a side cannot tell a change from that run's conditions (a busy
                # machine made torch's step +617% where the baseline runs said -7%): it is
                # said, never counted as a regression or an improvement.
                change.verdict = "changed"
                return change
    elif not judge.paired and significant and change.change is not None:
        beyond, change.corrected_change, why = judge.beyond_sessions(
            change.change, drift_for(ref.layer, judge.machine), ref.unit)
        moved = abs(b.value - a.value)
        if beyond and ref.unit == "s" and judge.wall_s and moved < SMALL_TIME * judge.wall_s:
            # A CPU time that moved a few ms in a run of seconds: other programs on the machine
            # (the kernel's work for them, cache misses) move it that much between sessions.
            beyond, why = False, (f"{fmt_seconds(moved)} is less than {100 * SMALL_TIME:g}% of "
                                  f"the {fmt_seconds(judge.wall_s)} run (separate sessions)")
        if not beyond:
            significant = beyond
            change.reason = f"{result.test} says different, but {why}"
    if significant is None:
        change.verdict = "cannot judge"
    elif not significant:
        change.verdict = "within noise"
    elif ref.better == Better.NEITHER:
        change.verdict = "changed"
    else:
        worse = (b.value > a.value) == (ref.better == Better.LOWER)
        change.verdict = "regression" if worse else "improvement"
    return change


def _scaled(m: Metric, factor: float) -> Metric:
    from perfstack.records import replace

    return replace(m, value=m.value * factor if m.value is not None else None,
                   samples=[v * factor for v in m.samples] if m.samples else m.samples)


def metric_changes(base: Report, new: Report, judge: Judge,
                   scale: dict[str, tuple[float, float]] | None = None,
                   lead: str | None = None) -> list[MetricChange]:
    """Return every metric of either report, matched by (name, source), judged; a metric
    named in ``scale`` is judged with its values multiplied by the factors given for the base
    and the new side (a per-step figure put per sample). Where either is a big job's, each
    per-rank figure is compared by its median, p90 and most over the ranks
    (``perfstack.analysis.perrank.distributions``), not rank by rank."""
    big = is_big(base) or is_big(new)  # (a big job's ranks compare as distributions)

    def index(report: Report, side: int) -> dict[tuple[str, str], Metric]:
        metrics = ([m for m in report.metrics if not RANKED.match(m.name)]
                   + distributions(report)) if big else report.metrics
        return {(m.name, m.source): _scaled(m, scale[m.name][side])
                if scale and m.name in scale else m for m in metrics}

    a, b = index(base, 0), index(new, 1)
    keys = list(dict.fromkeys([*a, *b]))
    changes = [_metric_change(a.get(k), b.get(k), judge) for k in keys]
    family_wise(changes, lead=lead)
    order = {"regression": 0, "improvement": 1, "changed": 2, "within noise": 3,
             "cannot judge": 4, "unknown": 5, "appeared": 6, "vanished": 7}
    changes.sort(key=lambda c: (order.get(c.verdict, 9), -abs(c.change or 0.0)))
    return changes


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
        _different_work(metrics, lead_name)
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


def _different_work(metrics: list[MetricChange], lead: str | None) -> None:
    """Two runs of one script with other arguments did different work: a total of the run
    (its wall time, its CPU time, its page faults) is compared, not judged better or worse;
    only the workload's own figure is."""
    for m in metrics:
        if m.name != lead and m.verdict in ("regression", "improvement"):
            m.verdict = "changed"
            m.reason = (f"{m.reason}; the sides ran other arguments (different work): "
                        "compared, not judged better or worse")
