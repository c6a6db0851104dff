"""Cross-rank figures of a torchrun job: step time per rank, stragglers, communication share.

Step times come from every rank's ``perfstack.step()`` calls in the baseline runs (all ranks,
no profiler). The communication share comes from the torch backend's ops on each profiled
rank: collective ops (all_reduce, broadcast, all_gather, ...) against all ops' own time. A rank
that waits longest in collectives arrived first: the others are slower, and the rank with the
smallest share of waiting is the straggler.
"""

from __future__ import annotations

import re
import statistics
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from perfstack.analysis.job import straggler
from perfstack.analysis.job.perrank import PerRank
from perfstack.analysis.primary import Primary
from perfstack.report import Better, Finding, Layer, Metric, Report, Row
from perfstack.report.units import fmt_bytes, fmt_si

if TYPE_CHECKING:
    from perfstack.report.job.rankcolumns import RankColumns

#: Op names of collective communication in torch traces (c10d, gloo, nccl, DDP's markers).
COLLECTIVE = re.compile(r"all_?reduce|broadcast|all_?gather|reduce_?scatter|all_?to_?all|"
                        r"barrier|record_param_comms|c10d::|gloo:|nccl:", re.IGNORECASE)
#: Device figures of each rank (% of its profiled steps) that the job gets the mean of.
JOB_MEANS = (("gpu_busy", Better.HIGHER), ("gpu_time.compute", Better.NEITHER),
             ("gpu_time.communication", Better.NEITHER), ("gpu_time.memory", Better.NEITHER),
             ("gpu_time.idle", Better.NEITHER), ("gpu_idle.host_wait", Better.LOWER),
             ("gpu_comm_overlap", Better.HIGHER))
#: Shares of each rank's wall time (the time budget) that the job gets the mean of.
BUDGET_RANKED = re.compile(r"^(?P<name>(budget|split)\.[^\[\]]+)\[rank(?P<rank>\d+)\]$")
#: A slowest rank this much slower than the fastest (median step) is an imbalance.
IMBALANCE = 0.10
#: Ranks whose collective-wait shares differ by this many points are imbalanced.
WAIT_SPREAD_POINTS = 15.0


def _comm_shares(report: Report) -> tuple[str, dict[int, tuple[float, float]]]:
    """Return the backend whose framework rows carry ranks (the one with the most such rows),
    and its rank -> (seconds in collectives, seconds in all its ops), each op by its primary
    value (an op's own time)."""
    rank_of = Primary(report)
    per_source: dict[str, list[Row]] = defaultdict(list)
    for row in report.layers[Layer.FRAMEWORK]:
        if isinstance(row.attrs.get("rank"), int):
            per_source[row.source].append(row)
    if not per_source:
        return "", {}
    source = max(per_source, key=lambda s: len(per_source[s]))
    comm: dict[int, float] = defaultdict(float)
    total: dict[int, float] = defaultdict(float)
    for row in per_source[source]:
        rank = int(row.attrs["rank"])
        seconds = op_seconds(row, rank_of)
        if seconds is not None:
            comm[rank] += seconds[0]
            total[rank] += seconds[1]
    return source, {r: (comm[r], total[r]) for r in total if total[r] > 0}


def op_seconds(row: Row, primary: Primary) -> tuple[float, float] | None:
    """A framework row's (seconds in collectives, seconds) by its primary value (an op's own
    time), or None when that is not a time; what a rank's communication share sums."""
    name = primary.name(row)
    own = row.values.get(name) if name is not None else None
    if own is None or own.value is None or own.unit != "s":
        return None
    seconds = float(own.value)
    return (seconds if COLLECTIVE.search(str(row.attrs.get("op") or row.name)) else 0.0,
            seconds)


def rank_figures(report: Report, samples: Mapping[int, Sequence[float]], publish_steps: bool,
                 steps_from: str = "the baseline runs",
                 shares: tuple[str, dict[int, tuple[float, float]]] | None = None,
                 columns: RankColumns | None = None,
                 ) -> tuple[list[Metric], list[Finding]]:
    """Return the cross-rank figures from each rank's step times (seconds per step).

    ``publish_steps`` adds ``step_time[rankN]`` metrics; without it (the step times are
    already in the report, e.g. from traces) only the straggler figures are added. Device
    figures come from the ranks' ``gpu_busy[rankN]`` and ``gpu_comm_time[rankN]`` metrics when
    a backend published them: the job's ``gpu_busy`` (mean over ranks) and each rank's
    ``collective_wait[rankN]``, its collectives' device time over its step time.

    ``shares``: each rank's time in collective ops and in all ops, and their source, where
    the ranks' rows were folded as they were read (``perfstack.run.recorded.fold``); by
    default they come from the report's per-rank framework rows.

    ``columns``: a big job's per-rank figures (``perfstack.report.job.rankcolumns``), read in
    place of the report's ``name[rankN]`` metrics; the per-rank figures computed here join
    them, and are published only for the ranks they keep whole."""
    comm = shares if shares is not None else _comm_shares(report)
    ranked = PerRank(report, columns)
    metrics: list[Metric] = []
    findings: list[Finding] = []
    medians: dict[int, float] = {}
    for rank, times in sorted(samples.items()):
        if times:
            medians[rank] = statistics.median(times)
            if publish_steps:
                metrics.append(Metric(f"step_time[rank{rank}]", medians[rank], "s", "run",
                                      "perfstack", Better.LOWER, samples=list(times[:1000]),
                                      samples_of="steps"))
        elif publish_steps:
            metrics.append(Metric(f"step_time[rank{rank}]", None, "s", "run", "perfstack",
                                  Better.LOWER, reason="this rank marked no steps "
                                  "(perfstack.step() or an optimizer step)"))
    metrics += _budget_means(report, ranked)
    device_metrics, device_findings, last = _device_figures(report, ranked, samples)
    extra_metrics: list[Metric] = []
    extra_findings: list[Finding] = []
    if "collective_wait" not in ranked.published:
        # (where the device's collective wait is known, it says it better than CPU time)
        extra_metrics, extra_findings, last = _cpu_comm_figures(comm, ranked)
    for finding in (*device_findings, *extra_findings):
        if finding.rule == "dist.imbalance" and last is not None:
            why, lines = _why(comm, ranked, last, medians)
            finding.title += f" ({why})" if why else ""
            finding.evidence[:0] = lines[:1] if why else []
            finding.evidence += lines[1:] if why else lines
    if len(medians) >= 2:
        found, named = _straggler(comm, ranked, samples, medians, steps_from)
        metrics += found
        findings += named
    return (metrics + device_metrics + extra_metrics,
            findings + device_findings + extra_findings)


def _straggler(comm: tuple[str, dict[int, tuple[float, float]]], ranked: PerRank,
               samples: Mapping[int, Sequence[float]], medians: dict[int, float],
               steps_from: str) -> tuple[list[Metric], list[Finding]]:
    """The slowest rank, named where it is slower beyond the noise (its steps against the
    fastest rank's, or from many ranks its median against the spread of every rank's):
    ``slowest_rank``, ``straggler_gap`` and the straggler finding."""
    metrics: list[Metric] = []
    findings: list[Finding] = []
    slowest = max(medians, key=lambda r: medians[r])
    fastest = min(medians, key=lambda r: medians[r])
    gap = medians[slowest] / medians[fastest] - 1
    beyond, why_not = _slower_beyond_noise(samples[fastest], samples[slowest], gap)
    than, size = f"rank {fastest}", gap
    if len(medians) >= straggler.MANY_RANKS:  # the other ranks' spread says it too
        out, excess, said = straggler.outlier_among(medians, slowest, IMBALANCE)
        if out:
            beyond, than, size = True, f"the median rank of {len(medians)}", excess
        elif not beyond:
            why_not += f"; {said}"
    # Equal ranks have a slowest by chance: it is named only where the noise allows.
    metrics.append(Metric("slowest_rank", slowest if beyond else None, "rank", "run",
                          "perfstack", Better.NEITHER,
                          reason=None if beyond else f"no rank is slower beyond the "
                          f"noise: rank {slowest}'s median step is {100 * gap:.1f}% over "
                          f"rank {fastest}'s ({why_not})"))
    metrics.append(Metric("straggler_gap", 100 * gap, "%", "run", "perfstack",
                          Better.LOWER, description="the slowest rank's median step time "
                          f"over the fastest's ({steps_from})"))
    if size > IMBALANCE and beyond:
        why, lines = _why(comm, ranked, slowest, medians)
        steps = f"median step time ({steps_from}): " + _steps_line(medians, slowest)
        lines.insert(1 if why else 0, steps)
        slower = (f"is {100 * size:.0f}% slower per step than {than}" if size < 1
                  else f"takes {1 + size:.0f}x as long a step as {than}")
        findings.append(Finding(
            "dist.straggler", f"rank {slowest} {slower}" + (f": {why}" if why else ""),
            "run", "warning", lines,
            _STRAGGLER_ADVICE.get(why or "", "balance the work or the data per rank; "
                                  "check that rank's host and device"), "perfstack"))
    return metrics, findings


def _why(comm: tuple[str, dict[int, tuple[float, float]]], ranked: PerRank, rank: int,
         medians: dict[int, float]) -> tuple[str | None, list[str]]:
    """Why ``rank`` is slow: the cause its figures point at (or None), and each figure beside
    the other ranks' median, the one that says why first."""
    _, shares = comm
    cpu = {r: total - comm for r, (comm, total) in shares.items()}
    found = straggler.evidence(ranked.values, rank, cpu, medians)
    pointed = straggler.cause(found)
    if pointed:
        found.remove(pointed)
        found.insert(0, pointed)
    lines = [f"rank {rank}'s {e.line}" for e in found]
    if not found:
        lines.append("no per-rank figure says why: profile every rank (--ranks all) with "
                     "the backends of the framework and Python layers")
    return (pointed.cause if pointed else None), lines


#: What to do about a straggler, by the cause its evidence points at.
_STRAGGLER_ADVICE = {
    "more compute": "it computes more than the others: balance the work or the data per "
    "rank (uneven batches, sequence lengths, a model split unevenly)",
    "a host stall": "its host cannot keep its device fed: look at its data loading, Python "
    "overhead and CPU contention on that node",
    "waiting in collectives": "its collectives take longer than the others': check its "
    "network link and the collectives' placement",
}


def _steps_line(medians: dict[int, float], slowest: int) -> str:
    """Each rank's median step time; from 8 ranks the median rank's and the slowest's only."""
    if len(medians) < 8:
        return ", ".join(f"rank {r} {t * 1e3:.1f} ms" for r, t in sorted(medians.items()))
    typical = statistics.median(medians.values())
    return (f"{typical * 1e3:.1f} ms on the median rank of {len(medians)}, rank {slowest} "
            f"{medians[slowest] * 1e3:.1f} ms")


def _budget_means(report: Report, ranked: PerRank) -> list[Metric]:
    """The job's time budget: each ``budget.*`` and ``split.*`` share the ranks measured
    (``budget.idle[rank3]``), as the mean over the ranks that have it."""
    out = []
    for name, m in ranked.bases():
        if BUDGET_RANKED.match(f"{name}[rank0]") and m.unit == "%" \
                and report.metric(name) is None and (values := ranked.values(name)):
            out.append(Metric(name, statistics.fmean(values.values()), "%", m.layer, m.source,
                              m.better, detail=m.detail, group=m.group,
                              description=f"the mean over {len(values)} ranks of "
                              f"{name}[rankN], each a share of that rank's wall time"))
    return out


def _slower_beyond_noise(fastest: Sequence[float], slowest: Sequence[float],
                         gap: float) -> tuple[bool, str]:
    """Whether the slowest rank's steps are slower than the fastest's beyond their noise (the
    comparison ``diff`` uses); with one step a rank, whether the gap passes IMBALANCE."""
    from perfstack.analysis.stats import compare

    if len(fastest) < 2 or len(slowest) < 2:
        return gap > IMBALANCE, (f"one step a rank: {100 * gap:.1f}% is "
                                 f"{'over' if gap > IMBALANCE else 'within'} the "
                                 f"{100 * IMBALANCE:.0f}% a straggler needs")
    found = compare(fastest, slowest)
    return bool(found.significant), found.reason


def _device_figures(report: Report, ranked: PerRank,
                    samples: Mapping[int, Sequence[float]]) -> tuple[
        list[Metric], list[Finding], int | None]:
    """The job's device figures, each rank's collective wait and stall, and the imbalance
    finding with the rank the others wait for (or None)."""
    metrics: list[Metric] = []
    findings: list[Finding] = []
    last: int | None = None
    for name, better in JOB_MEANS:
        values = ranked.values(name)
        if values and report.metric(name) is None:
            metrics.append(Metric(
                name, statistics.fmean(values.values()), "%", "kernel", "perfstack", better,
                detail=name != "gpu_busy",
                description=f"the mean over {len(values)} ranks of {name}[rankN], each a share "
                "of that rank's profiled steps"))
    comm = ranked.values("gpu_comm_time")
    waits = {r: w for r, c in comm.items()
             if (w := collective_wait(c, samples.get(r, ()))) is not None}
    if waits:
        metrics += ranked.publish(Metric(
            "collective_wait", None, "%", "kernel", "perfstack", Better.LOWER,
            description="the rank's collective kernels' time on its device over its step "
            "time: waiting for the others included"), waits)
    stall, stall_lines = _stall_figures(ranked, samples)
    metrics += stall
    if len(waits) >= 2:
        high = max(waits, key=lambda r: waits[r])
        low = min(waits, key=lambda r: waits[r])
        if waits[high] - waits[low] > WAIT_SPREAD_POINTS:
            findings.append(Finding(
                "dist.imbalance", f"rank {high}'s device waits in collectives "
                f"{waits[high]:.0f}% of its steps, rank {low}'s only {waits[low]:.0f}%: the "
                f"others wait for rank {low}", "kernel", "warning",
                [f"rank {r}: collective kernels {comm[r] * 1e3:.1f} ms in "
                 f"{sum(samples[r]) * 1e3:.1f} ms of steps" for r in _few(waits, high, low)]
                + _more(waits, high, low) + stall_lines,
                f"rank {low} arrives last at every collective: give it less work or find what "
                "slows it (data loading, a slower device, host contention)", "perfstack"))
            last = low
    return metrics, findings, last


def communication_share(comm_s: float, total_s: float) -> float:
    """A rank's communication share (%): its collective ops' time over all its ops' time."""
    return 100 * comm_s / total_s


def collective_wait(comm_s: float, steps: Sequence[float]) -> float | None:
    """A rank's collective wait (%): its collective kernels' device time (``gpu_comm_time``)
    over its step time; None without steps."""
    total = sum(steps)
    return 100 * comm_s / total if total else None


def _stall_figures(ranked: PerRank, samples: Mapping[int, Sequence[float]]) -> tuple[
        list[Metric], list[str]]:
    """Each rank's time in collectives waiting for the last rank (``collective_stall``,
    a share of its step time), the job's mean of it and its time moving data
    (``collective_transfer``), from the ranks' aligned collectives; with the evidence lines
    of the imbalance finding."""
    from perfstack.analysis.job import collectivesplit

    found = collectivesplit.split(ranked.samples())
    if found is None:
        return [], []
    metrics: list[Metric] = []
    steps = {r: sum(samples.get(r, [])) for r in found.waiting}
    shares = {r: 100 * w / steps[r] for r, w in found.waiting.items() if steps[r] > 0}
    if shares:
        metrics += ranked.publish(Metric(
            "collective_stall", None, "%", "kernel", "perfstack", Better.LOWER,
            description="the rank's time in collectives waiting for the last rank to arrive "
            "(each collective's device time over the least any rank took for it), over its "
            "step time"), shares)
    known = [steps[r] for r in found.moving if steps[r] > 0]
    moving = next(iter(found.moving.values()), 0.0)
    metrics.append(Metric(
        "collective_stall", statistics.fmean(shares.values()) if shares else None, "%",
        "kernel", "perfstack", Better.LOWER,
        reason=None if shares else "; ".join(found.left_out) or "no rank's steps are known",
        description=f"the mean over {len(shares)} ranks of collective_stall[rankN]"))
    metrics.append(Metric(
        "collective_transfer", 100 * moving / statistics.median(known) if known else None,
        "%", "kernel", "perfstack", Better.LOWER,
        reason=None if known else "; ".join(found.left_out) or "no rank's steps are known",
        description="time moving data in collectives (each collective's least device time "
        "over the ranks: the last rank to arrive waits for none), over the median rank's "
        "step time"))
    busbw = found.moved_bytes / found.sized_time if found.sized_time > 0 else None
    metrics.append(Metric(
        "collective_busbw", busbw, "B/s", "kernel", "perfstack", Better.HIGHER,
        reason=None if busbw is not None else "the traces do not give the collectives' sizes "
        "(Kineto writes them on NCCL/RCCL kernels from 2023)",
        description="the bandwidth each rank's links delivered while collectives moved data: "
        "the bytes moved over a rank's links (nccl-tests' bus bytes: a message times 2(n-1)/n "
        "for an all-reduce of n ranks) over the collectives' time moving data; hold it against "
        "the link's (NVLink, InfiniBand)"))
    most = max(found.waiting, key=lambda r: found.waiting[r], default=0)
    least = min(found.waiting, key=lambda r: found.waiting[r], default=0)
    lines = [f"rank {r}: {(found.waiting[r] + found.moving[r]) * 1e3:.1f} ms in "
             f"{found.collectives} collectives, {found.waiting[r] * 1e3:.1f} ms of it waiting "
             f"for the last rank, {found.moving[r] * 1e3:.1f} ms moving data"
             for r in _few(found.waiting, most, least)]
    if busbw is not None:
        lines.append(f"the links moved {fmt_bytes(found.moved_bytes)} a rank in "
                     f"{found.sized_time * 1e3:.1f} ms of moving data: "
                     f"{fmt_si(busbw, 'B/s')} (bus bandwidth, as nccl-tests counts it)")
    lines += [f"not split: {why}" for why in found.left_out]
    return metrics, lines


#: From this many ranks a finding lists the ranks at the extremes, not every rank.
LISTED = 8


def _few(by_rank: Mapping[int, object], *extremes: int) -> list[int]:
    """Every rank in order, or from LISTED ranks only the given extremes."""
    return sorted(by_rank) if len(by_rank) < LISTED else sorted(set(extremes))


def _more(by_rank: Mapping[int, object], *extremes: int) -> list[str]:
    """The line that says how many ranks ``_few`` left out (none below LISTED)."""
    if len(by_rank) < LISTED:
        return []
    return [f"... and {len(by_rank) - len(set(extremes))} more ranks: the ranks table gives "
            "each figure's median, p90 and max"]


def _cpu_comm_figures(by_rank: tuple[str, dict[int, tuple[float, float]]],
                      ranked: PerRank) -> tuple[list[Metric], list[Finding], int | None]:
    """Each rank's share of its CPU op time in collectives, and the imbalance finding with the
    rank the others wait for (or None)."""
    metrics: list[Metric] = []
    findings: list[Finding] = []
    last: int | None = None
    source, shares = by_rank
    if shares:
        metrics += ranked.publish(Metric("communication_share", None, "%", "framework", source,
                                         Better.LOWER),
                                  {r: communication_share(c, t) for r, (c, t) in shares.items()})
    if len(shares) >= 2:
        pct = {r: communication_share(c, t) for r, (c, t) in shares.items()}
        low, high = min(pct, key=lambda r: pct[r]), max(pct, key=lambda r: pct[r])
        if pct[high] - pct[low] > WAIT_SPREAD_POINTS:
            findings.append(Finding(
                "dist.imbalance", f"rank {high} waits in collectives {pct[high]:.0f}% of its op "
                f"time, rank {low} only {pct[low]:.0f}%: rank {low} is the straggler",
                "framework", "warning",
                [f"rank {r}: {shares[r][0] * 1e3:.1f} ms of {shares[r][1] * 1e3:.1f} ms in "
                 f"collective ops ({source})" for r in _few(shares, high, low)]
                + _more(shares, high, low),
                f"the other ranks wait for rank {low} at every collective: give it less work "
                "or find what slows it (data loading, a slower device, host contention)",
                "perfstack"))
            last = low
    return metrics, findings, last
