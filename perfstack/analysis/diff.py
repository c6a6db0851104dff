"""What changed between two reports, in which layer, and whether it is more than noise.

Order of the answer: environment differences first (a different torch, CPU or thread setting
explains most differences), then how the machine itself moved (``perfstack.analysis.drift``: the
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

from dataclasses import asdict, dataclass, field
from typing import Any

from perfstack.analysis.drift import (
    SESSION_NOISE,
    MachineDrift,
    corrected,
    drift_for,
    machine_drift,
    speed_ratio_of_runs,
)
from perfstack.analysis.origin import workload_dir
from perfstack.analysis.primary import Primary
from perfstack.analysis.stats import MIN_EFFECT, compare, compare_paired, summarize
from perfstack.analysis.view import display_name
from perfstack.report import Better, Layer, Metric, Report, Row
from perfstack.units import fmt_seconds

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

#: Rows that total other rows (a thread's samples): listed after the rows they sum.
AGGREGATE_KINDS = ("thread", "thread-sweep")

#: Row values that are times, in the order a row's "time" is chosen.


@dataclass
class EnvChange:
    """One environment fact that differs."""

    what: str
    base: Any
    new: Any


@dataclass
class MetricChange:
    """A metric on either side, and the verdict."""

    name: str
    source: str
    layer: str
    unit: str
    better: str
    base: float | None
    new: float | None
    change: float | None  # relative: new / base - 1
    verdict: str  # regression | improvement | changed | within noise | cannot judge |
    #               appeared | vanished | unknown
    reason: str
    test: str | None = None
    statistic: float | None = None  # the test's statistic (t, or z for Mann-Whitney)
    n_base: int = 0
    n_new: int = 0
    #: "runs" when both sides' samples are independent runs; else the samples are the steps or
    #: intervals of one run per side, judged against the run-to-run noise and never gated
    samples_of: str = "runs"
    #: the change with the machine's own drift (the probes) taken out, for times and rates
    corrected_change: float | None = None


@dataclass
class RowChange:
    """A row on either side: the value it is compared by, and how it moved."""

    layer: str
    source: str
    key: str
    name: str
    by: str  # the row value compared: "self", "time", "median"...
    unit: str
    base: float | None
    new: float | None
    delta: float | None
    change: float | None
    status: str  # changed | appeared | vanished
    beyond_noise: bool | None
    aggregate: bool  # a total of other rows (a thread), ranked after them
    corrected_change: float | None  # with the drift between the two measuring runs taken out
    links: dict[str, list[str]] = field(default_factory=dict)
    #: counted values (calls, samples) on both sides: exact where times are noisy
    counts: dict[str, list[float | None]] = field(default_factory=dict)
    #: the name to show: a function with its line and a short path (origin's), else the name
    display: str = ""
    #: a row that restates a metric (``attrs.metric``) shares that metric's verdict
    by_metric: str | None = None


@dataclass
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
            "environment": [asdict(e) for e in self.environment],
            "metrics": [asdict(m) for m in self.metrics],
            "rows": {layer: [asdict(r) for r in rows] for layer, rows in self.rows.items()},
            "row_noise": self.row_noise, "row_noise_reason": self.row_noise_reason,
            "machine": {**asdict(self.machine), "summary": self.machine.describe()},
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
    from perfstack.environment import plugin_blocks

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


#: Between separate sessions, a time that moved by less than this share of the run's wall time
#: is not called a change, whatever its relative size.
SMALL_TIME = 0.01


def _one_run_threshold(noise: float) -> float:
    return max(MIN_EFFECT * 2.5, 3 * noise)


@dataclass
class _Judge:
    """What every comparison in one diff shares: pairing, noise and the machine's drift."""

    noise: float | None  # relative run-to-run noise of the wall time
    machine: MachineDrift
    wall_s: float | None = None  # the base's median wall time: the scale of the run

    @property
    def paired(self) -> bool:
        return self.machine.paired

    def beyond_sessions(self, change: float, drift: float | None,
                        unit: str) -> tuple[bool | None, float | None, str | None]:
        """Between separate sessions: whether ``change`` exceeds the session noise both as
        measured and with the machine's ``drift`` taken out, in the same direction (True);
        is explained by them (False); or cannot be told from a machine that moved more than
        the noise (None). Also the corrected change and, unless True, why (one line)."""
        limit = self.machine.session_noise
        fixed = corrected(change, drift, unit) if drift is not None else None
        raw_out = abs(change) > limit
        if fixed is None:
            if raw_out:
                return True, None, None
            return False, None, self._within(change, limit)
        if raw_out and abs(fixed) > limit and (fixed > 0) == (change > 0):
            return True, fixed, None
        assert drift is not None
        way = "slower" if drift > 0 else "faster"
        if abs(fixed) <= limit:
            if raw_out:
                return False, fixed, (f"the machine ran {abs(drift):.0%} {way} during NEW; "
                                      f"the {abs(change):.0%} change is within what the machine "
                                      f"moved (±{limit:.0%} between sessions)")
            return False, fixed, self._within(change, limit)
        if abs(drift) > limit:
            return None, fixed, (f"the machine ran {abs(drift):.0%} {way} during NEW, as much "
                                 f"as the change ({100 * change:+.0f}% as measured, "
                                 f"{100 * fixed:+.0f}% corrected): cannot tell; compare in one "
                                 "session with perfstack ab")
        return False, fixed, self._within(change, limit)

    @staticmethod
    def _within(change: float, limit: float) -> str:
        return (f"{abs(change):.1%} is within the ±{limit:.0%} between-session noise "
                "(separate sessions; perfstack ab sees smaller changes)")


def _metric_change(a: Metric | None, b: Metric | None, judge: _Judge) -> MetricChange:
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
            limit = _one_run_threshold(judge.noise)
            outside = change.change is not None and abs(change.change) > limit
            significant = bool(result.significant) and outside
            change.reason = (f"{one_run} of one run per side: beyond noise only above "
                             f"{100 * limit:.1f}% (3x the wall time's run-to-run noise, at "
                             f"least {100 * MIN_EFFECT * 2.5:.0f}%) and by {result.test}; "
                             f"not gated")
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


def metric_changes(base: Report, new: Report, judge: _Judge) -> list[MetricChange]:
    """Return every metric of either report, matched by (name, source), judged."""
    def index(report: Report) -> dict[tuple[str, str], Metric]:
        return {(m.name, m.source): m for m in report.metrics}

    a, b = index(base), index(new)
    keys = list(dict.fromkeys([*a, *b]))
    changes = [_metric_change(a.get(k), b.get(k), judge) for k in keys]
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
    limit = _one_run_threshold(noise)
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


#: Row values that count a sampler's samples: their Poisson noise bounds what a change means.
SAMPLE_COUNTS = ("samples", "self")


def _sampling_noise(a: Row | None, b: Row | None) -> float | None:
    """Return two standard deviations of the relative change of a sampled row, counted as
    Poisson counts (sqrt(1/n_a + 1/n_b)), or None for a row that is not counted by sampling.
    A sampler at a fixed rate counts a steady function more evenly than that, so this bounds
    the noise from above; with 150 samples a side it asks for a 23% move."""
    if a is None or b is None:
        return None
    for name in SAMPLE_COUNTS:
        qa, qb = a.values.get(name), b.values.get(name)
        if qa is not None and qb is not None and qa.unit == "count" and qb.unit == "count" \
                and isinstance(qa.value, (int, float)) and isinstance(qb.value, (int, float)):
            if qa.value <= 0 or qb.value <= 0:
                return None
            return float(2 * (1 / qa.value + 1 / qb.value) ** 0.5)
    return None


def _run_drifts(base: Report, new: Report, fallback: float | None) -> dict[str, float | None]:
    """Return, per source, the machine's change between the two runs that measured its rows."""
    out: dict[str, float | None] = {}
    for b in {*(x.name for x in base.backends), *(x.name for x in new.backends)}:
        ra, rb = base.backend(b), new.backend(b)
        if (ra and ra.run) or (rb and rb.run):
            out[b] = speed_ratio_of_runs(base.run_record(ra.run) if ra and ra.run else None,
                                         new.run_record(rb.run) if rb and rb.run else None)
        else:  # rows read from the baseline runs (no run of its own): the session's drift
            out[b] = fallback
    return out


def row_changes(base: Report, new: Report, judge: _Judge,
                verdicts: dict[tuple[str, str], str] | None = None) -> dict[str, list[RowChange]]:
    """Return, per layer, every row of either report matched by (source, key), largest move
    first (seconds moved for time rows, then the rest by relative change; totals such as a
    thread's come after the rows they sum). A row that restates a metric (``attrs.metric``,
    e.g. the resources backend's medians of the baseline runs) takes that metric's verdict
    from ``verdicts`` ((name, source) -> verdict), so two tables never disagree."""
    out: dict[str, list[RowChange]] = {}
    home = workload_dir(new)
    threshold = _one_run_threshold(judge.noise) if judge.noise is not None else None
    if threshold is not None and not judge.paired:
        threshold = max(threshold, judge.machine.session_noise)
    drifts = _run_drifts(base, new, judge.machine.change)
    primary = Primary(new)
    primary.declared = {**Primary(base).declared, **primary.declared}
    for layer in Layer:
        a = {(r.source, r.key): r for r in base.layers.get(layer, [])}
        b = {(r.source, r.key): r for r in new.layers.get(layer, [])}
        where = layer.value
        changes = []
        for key in dict.fromkeys([*a, *b]):
            ra, rb = a.get(key), b.get(key)
            ref = rb or ra
            assert ref is not None
            field_name = primary.name(ref) or ""
            q = ref.values.get(field_name)
            unit = q.unit if q is not None else ""
            qa = ra.values.get(field_name) if ra is not None else None
            qb = rb.values.get(field_name) if rb is not None else None
            va = qa.value if qa is not None else None
            vb = qb.value if qb is not None else None
            status = "appeared" if ra is None else "vanished" if rb is None else "changed"
            delta = (vb - va) if va is not None and vb is not None else None
            rel = (vb / va - 1) if va and vb is not None else None
            drift = drifts.get(ref.source)
            fixed = corrected(rel, drift, unit) if rel is not None else None
            limit = threshold
            if limit is not None and ra is not None and rb is not None:
                sampled = _sampling_noise(ra, rb)
                if sampled is not None:
                    limit = max(limit, sampled)
            beyond = None if limit is None or rel is None or fixed is None else (
                abs(rel) > limit and abs(fixed) > limit and (rel > 0) == (fixed > 0))
            counts = {}
            for name, q in ref.values.items():
                if q.unit == "count":
                    ca = ra.values.get(name) if ra is not None else None
                    cb = rb.values.get(name) if rb is not None else None
                    counts[name] = [ca.value if ca is not None else None,
                                    cb.value if cb is not None else None]
            restated = ref.attrs.get("metric")
            by_metric = None
            if isinstance(restated, str) and verdicts and (restated, ref.source) in verdicts:
                by_metric = restated
                verdict = verdicts[(restated, ref.source)]
                beyond = (None if verdict in ("cannot judge", "unknown")
                          else verdict in ("regression", "improvement", "changed"))
            changes.append(RowChange(where, ref.source, ref.key, ref.name, field_name,
                                     unit, va, vb, delta, rel, status, beyond,
                                     ref.attrs.get("kind") in AGGREGATE_KINDS,
                                     fixed if drift is not None else None, ref.links, counts,
                                     display_name(ref, home), by_metric))
        changes.sort(key=lambda c: (
            c.aggregate, c.unit != "s",
            -abs(c.delta if c.delta is not None else (c.new or c.base or 0.0))
            if c.unit == "s" else -abs(c.change or 0.0)))
        out[layer.value] = changes
    return out


def workload_identity(report: Report) -> tuple[str, tuple[str, ...]]:
    """Return what makes two reports comparable: the script's file name (or the module) and
    the workload's arguments. The folder may differ (two checkouts of one project)."""
    import os

    command = report.run.command
    if len(command) >= 3 and command[1] == "-m":
        return f"-m {command[2]}", tuple(command[3:])
    if len(command) >= 2:
        return os.path.basename(command[1]), tuple(command[2:])
    return " ".join(command), ()


def comparable(base: Report, new: Report) -> str | None:
    """Return why two reports should not be compared (different workloads), or None."""
    if is_paired(base, new):
        return None  # perfstack ab compared them on purpose
    a, b = workload_identity(base), workload_identity(new)
    if a == b:
        return None
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
    judge = _Judge(noise, machine, float(wall.value) if wall and wall.value else None)
    metrics = metric_changes(base, new, judge)
    verdicts = {(m.name, m.source): m.verdict for m in metrics}
    return Diff(base_name, new_name, environment_changes(base, new), metrics,
                row_changes(base, new, judge, verdicts), noise, why, machine)
