"""Rows of two reports matched and judged: which moved, beyond the noise or not.

Rows are matched by their source and by what they are in the workload, not by where its file
was: a Python function of the workload's own script is the function of the script on either
side, whatever the two files are called (``perfstack ab base.py new.py``) and wherever its line
moved; a function anywhere else is its function in its file. Where that would make two rows of
one side the same (two lambdas of one file), those rows keep their full key.
"""

from __future__ import annotations

import functools
import math
import os
from collections import Counter

from perfstack.analysis.diff.drift import corrected, speed_ratio_of_runs
from perfstack.analysis.diff.judge import Judge, one_run_threshold
from perfstack.analysis.origin import workload_dir
from perfstack.analysis.primary import Primary
from perfstack.analysis.views.layers import display_name
from perfstack.records import datarecord, field
from perfstack.report import Layer, Report, Row

#: The placeholder for the workload's own script in a row's match key.
SCRIPT = "<the workload's script>"
#: A Python function with at least this share of its samples inside imports is start-up.
STARTUP_IMPORT_SHARE = 50.0


def script_of(report: Report) -> str | None:
    """Return the real path of the report's script (``python script.py ...``), or None for a
    module or a report of traces."""
    command = report.run.command
    if len(command) >= 2 and command[1] != "-m" and command[1].endswith(".py"):
        path = command[1]
        if not os.path.isabs(path) and report.run.cwd:
            path = os.path.join(report.run.cwd, path)
        return os.path.realpath(path)
    return None


@functools.lru_cache(maxsize=4096)
def _real(path: str) -> str:
    """A path resolved once: a report names a few hundred files over thousands of rows."""
    return os.path.realpath(path)


def match_key(row: Row, scripts: set[str]) -> tuple[str, ...]:
    """Return what a row is, to match it with the other side's: a function by its name and
    file (either side's script as one placeholder: a B side that runs the A side's file is
    still the workload), anything else by its key."""
    function, file = row.attrs.get("function"), row.attrs.get("file")
    if not isinstance(function, str) or not isinstance(file, str):
        return (row.source, row.key)
    if not file.startswith("<") and _real(file) in scripts:
        file = SCRIPT
    kind = row.attrs.get("kind")
    return (row.source, str(kind or ""), function, file)


def matched(rows: list[Row], scripts: set[str]) -> dict[tuple[str, ...], Row]:
    """Return one side's rows by match key; rows that would share one keep their full key."""
    keys = [match_key(r, scripts) for r in rows]
    seen = Counter(keys)
    return {(k if seen[k] == 1 else (r.source, r.key)): r for k, r in zip(keys, rows, strict=True)}


def is_startup(row: Row) -> bool:
    """Whether a row is start-up work: the import system's own frames, a module's top level,
    or a function sampled mostly inside an import."""
    file, function = str(row.attrs.get("file") or ""), row.attrs.get("function")
    share = row.attrs.get("import_share")
    return (file.startswith("<frozen importlib") or function == "<module>"
            or (isinstance(share, (int, float)) and share >= STARTUP_IMPORT_SHARE))


#: Rows that total other rows (a thread's samples): listed after the rows they sum.
AGGREGATE_KINDS = ("thread", "thread-sweep")


@datarecord
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
    #: start-up work (a function that ran mostly inside imports, the import system's own):
    #: it moves between any two processes and is folded away from what explains a change
    startup: bool = False
    #: the row's kind (``attrs["kind"]``: a thread, a graph break, ...), "" for none
    kind: str = ""


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
            if qa.value <= 0 or qb.value <= 0:  # none on one side: as a row found there only
                big = max(qa.value, qb.value) >= APPEARED_MIN_SAMPLES
                return 0.0 if big else float("inf")
            return float(2 * (1 / qa.value + 1 / qb.value) ** 0.5)
    return None


#: A sampled row on one side only is beyond noise from this many samples: were the function
#: as frequent on both sides, all of them landing on one side has a chance of 2**-8 (0.4%).
APPEARED_MIN_SAMPLES = 8


def _sampled_totals(rows: list[Row]) -> dict[str, float]:
    """Each sampler's samples in a layer: the sum of its rows' own counts (``self``: each
    sample has one innermost frame), threads and other aggregates left out."""
    out: dict[str, float] = {}
    for row in rows:
        q = row.values.get("self")
        if (q is not None and q.unit == "count" and isinstance(q.value, (int, float))
                and row.attrs.get("kind") not in AGGREGATE_KINDS):
            out[row.source] = out.get(row.source, 0.0) + float(q.value)
    # counts so large their sum overflows say nothing of shares: unknown, not infinite
    return {source: total for source, total in out.items() if math.isfinite(total)}


def _share_change(a: Row, b: Row, totals_a: dict[str, float],
                  totals_b: dict[str, float]) -> float | None:
    """The relative change of a sampled row's share of its sampler's samples: a machine that
    ran slower for one side (a busy machine, a drifting load) stretches every row alike and
    leaves the shares where they were; a real change moves the row's share."""
    ta, tb = totals_a.get(a.source), totals_b.get(b.source)
    qa, qb = a.values.get("self"), b.values.get("self")
    if not ta or not tb or qa is None or qb is None or not isinstance(qa.value, (int, float)) \
            or not isinstance(qb.value, (int, float)) or qa.value <= 0:
        return None
    before, after = qa.value / ta, qb.value / tb
    if not before > 0 or not math.isfinite(after):  # a share too small to tell
        return None
    return float(after / before - 1)


def _appeared_beyond_noise(row: Row) -> bool:
    """Whether a row found on one side only is more than sampling noise: a row counted by a
    sampler needs ``APPEARED_MIN_SAMPLES``; a row measured exactly (an op's calls, a
    kernel's launches) is real however small."""
    for name in SAMPLE_COUNTS:
        q = row.values.get(name)
        if q is not None and q.unit == "count" and isinstance(q.value, (int, float)):
            return q.value >= APPEARED_MIN_SAMPLES
    return True


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


# long: one pass that matches both reports' rows, judges each and orders them
def row_changes(base: Report, new: Report, judge: Judge,
                verdicts: dict[tuple[str, str], str] | None = None) -> dict[str, list[RowChange]]:
    """Return, per layer, every row of either report matched (``match_key``), largest move
    first (seconds moved for time rows, then the rest by relative change; start-up work and
    then totals such as a thread's come after the rest). A row that restates a metric
    (``attrs.metric``, e.g. the resources backend's medians of the baseline runs) takes that
    metric's verdict from ``verdicts`` ((name, source) -> verdict), so two tables never
    disagree."""
    out: dict[str, list[RowChange]] = {}
    home = workload_dir(new)
    threshold = one_run_threshold(judge.noise) if judge.noise is not None else None
    if threshold is not None and not judge.paired:
        threshold = max(threshold, judge.machine.session_noise)
    drifts = _run_drifts(base, new, judge.machine.change)
    primary = Primary(new)
    primary.declared = {**Primary(base).declared, **primary.declared}
    scripts = {s for s in (script_of(base), script_of(new)) if s is not None}
    for layer in Layer:
        a = matched(base.layers.get(layer, []), scripts)
        b = matched(new.layers.get(layer, []), scripts)
        totals_a = _sampled_totals(base.layers.get(layer, []))
        totals_b = _sampled_totals(new.layers.get(layer, []))
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
            sampled = None
            if limit is not None and ra is not None and rb is not None:
                sampled = _sampling_noise(ra, rb)
                if sampled is not None:
                    limit = max(limit, sampled)
            beyond = None if limit is None or rel is None or fixed is None else (
                abs(rel) > limit and abs(fixed) > limit and (rel > 0) == (fixed > 0))
            if beyond and sampled is not None and ra is not None and rb is not None:
                share = _share_change(ra, rb, totals_a, totals_b)
                if share is not None and rel is not None and limit is not None and (
                        abs(share) <= limit or (share > 0) != (rel > 0)):
                    beyond = False  # it moved with the whole run, not against it
            if status != "changed":
                beyond = _appeared_beyond_noise(ref)
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
                                     display_name(ref, home), by_metric, is_startup(ref),
                                     str(ref.attrs.get("kind") or "")))
        changes.sort(key=lambda c: (
            c.aggregate, c.startup, c.unit != "s",
            -abs(c.delta if c.delta is not None else (c.new or c.base or 0.0))
            if c.unit == "s" else -abs(c.change or 0.0)))
        out[layer.value] = changes
    return out


