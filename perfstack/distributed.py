"""Cross-rank figures of a torchrun job: step time per rank, stragglers, communication share.

Step times come from every rank's ``perfstack.step()`` calls in the baseline runs (all ranks,
no profiler). The communication share comes from the torch backend's ops on each profiled
rank: collective ops (all_reduce, broadcast, all_gather, ...) against all ops' own time. A rank
that waits longest in collectives arrived first: the others are slower, and the rank with the
smallest share of waiting is the straggler.
"""

from __future__ import annotations

import json
import re
import statistics
from collections import defaultdict

from perfstack import rundir
from perfstack.backend import Outcome
from perfstack.bootstrap import STEPS_FILE
from perfstack.report import Better, Finding, Layer, Metric, Report

#: Op names of collective communication in torch traces (c10d, gloo, nccl, DDP's markers).
COLLECTIVE = re.compile(r"all_?reduce|broadcast|all_?gather|reduce_?scatter|all_?to_?all|"
                        r"barrier|record_param_comms|c10d::|gloo:|nccl:", re.IGNORECASE)
#: A slowest rank this much slower than the fastest (median step) is an imbalance.
IMBALANCE = 0.10
#: Ranks whose collective-wait shares differ by this many points are imbalanced.
WAIT_SPREAD_POINTS = 15.0


def _step_times(outcome: Outcome, rank: int) -> list[float]:
    try:
        data = json.loads((rundir.rank_dir(outcome.artifact_dir, rank) / STEPS_FILE)
                          .read_text("utf-8"))
    except (OSError, ValueError):
        return []
    times = data.get("step_times_s") or []
    return [float(t) for t in times if isinstance(t, (int, float)) and t > 0]


def _comm_shares(report: Report) -> dict[int, tuple[float, float]]:
    """Return rank -> (seconds in collectives, seconds in all ops' own time)."""
    comm: dict[int, float] = defaultdict(float)
    total: dict[int, float] = defaultdict(float)
    for row in report.layers[Layer.FRAMEWORK]:
        rank = row.attrs.get("rank")
        if row.source != "torch" or not isinstance(rank, int):
            continue
        own = row.values.get("self")
        if own is None or own.value is None:
            continue
        total[rank] += float(own.value)
        if COLLECTIVE.search(str(row.attrs.get("op") or row.name)):
            comm[rank] += float(own.value)
    return {r: (comm[r], total[r]) for r in total if total[r] > 0}


def cross_rank(report: Report, baseline: list[Outcome], world: int) -> tuple[
        list[Metric], list[Finding]]:
    """Return per-rank step-time metrics, straggler metrics, communication shares, findings."""
    metrics: list[Metric] = []
    findings: list[Finding] = []
    medians: dict[int, float] = {}
    for rank in range(world):
        samples = [t for o in baseline if o.record.exit.clean for t in _step_times(o, rank)]
        if samples:
            medians[rank] = statistics.median(samples)
            metrics.append(Metric(f"step_time[rank{rank}]", medians[rank], "s", "run",
                                  "perfstack", Better.LOWER, samples=samples[:1000],
                                  samples_of="steps"))
        else:
            metrics.append(Metric(f"step_time[rank{rank}]", None, "s", "run", "perfstack",
                                  Better.LOWER, reason="this rank marked no steps "
                                  "(perfstack.step() or an optimizer step)"))
    if len(medians) >= 2:
        slowest = max(medians, key=lambda r: medians[r])
        fastest = min(medians, key=lambda r: medians[r])
        gap = medians[slowest] / medians[fastest] - 1
        metrics.append(Metric("slowest_rank", slowest, "rank", "run", "perfstack",
                              Better.NEITHER))
        metrics.append(Metric("straggler_gap", 100 * gap, "%", "run", "perfstack",
                              Better.LOWER))
        if gap > IMBALANCE:
            findings.append(Finding(
                "dist.straggler", f"rank {slowest} is {100 * gap:.0f}% slower per step than "
                f"rank {fastest}", "run", "warning",
                ["median step time: " + ", ".join(f"rank {r} {t * 1e3:.1f} ms"
                                                   for r, t in sorted(medians.items()))],
                "balance the work or the data per rank; check that rank's host and device",
                "perfstack"))
    shares = _comm_shares(report)
    for rank, (comm, total) in sorted(shares.items()):
        metrics.append(Metric(f"communication_share[rank{rank}]", 100 * comm / total, "%",
                              "framework", "torch", Better.LOWER))
    if len(shares) >= 2:
        pct = {r: 100 * c / t for r, (c, t) in shares.items()}
        low, high = min(pct, key=lambda r: pct[r]), max(pct, key=lambda r: pct[r])
        if pct[high] - pct[low] > WAIT_SPREAD_POINTS:
            findings.append(Finding(
                "dist.imbalance", f"rank {high} waits in collectives {pct[high]:.0f}% of its op "
                f"time, rank {low} only {pct[low]:.0f}%: rank {low} is the straggler",
                "framework", "warning",
                [f"rank {r}: {c * 1e3:.1f} ms of {t * 1e3:.1f} ms in collective ops (torch)"
                 for r, (c, t) in sorted(shares.items())],
                f"the other ranks wait for rank {low} at every collective: give it less work "
                "or find what slows it (data loading, a slower device, host contention)",
                "perfstack"))
    return metrics, findings
