"""A big job's per-rank figures folded into columns (``perfstack.report.job.rankcolumns``): the
distributions are exact, the ranks that stand out are kept whole, the rest of each rank
(notes, files, facts) is listed as a small job's is, and none of it depends on the order the
ranks came in or on where they were folded."""

from __future__ import annotations

import copy
import math
import random
from pathlib import Path
from typing import Any

from perfstack.plugin.backend import Collected, Recorded
from perfstack.plugin.load import load_plugins
from perfstack.report import Better, Metric, Report, RunInfo
from perfstack.report.job.rankcolumns import BIG_JOB
from perfstack.report.job.rankrows import said_ranks
from perfstack.run.recorded.fold import Folded, JobFold, declared_primary
from perfstack.run.recorded.reduce import Unit, UnitResult

RANKS = BIG_JOB + 72


def _busy(rank: int) -> float:
    return 50.0 + (rank * 37 % 101) / 10  # in no order of rank, with ties


def _results(ranks: int = RANKS) -> list[UnitResult]:
    """Each rank's records as a reader gives them: a busy share, a step time with its steps,
    a figure unknown on every tenth rank, a description that names the rank's own figure."""
    out = []
    for rank in range(ranks):
        steps = [0.010 + rank * 1e-6, 0.012 + rank * 1e-6]
        metrics = [
            Metric("gpu_busy", _busy(rank), "%", "kernel", "torch", Better.HIGHER),
            Metric("torch_step_time", 0.011 + rank * 1e-6, "s", "framework", "torch",
                   Better.LOWER, samples=steps, samples_of="steps"),
            Metric("gpu_launch_delay", None if rank % 10 == 3 else 1e-5 * (1 + rank % 7), "s",
                   "kernel", "torch", Better.NEITHER, detail=True,
                   reason="no launch" if rank % 10 == 3 else None,
                   description=f"median (95th percentile {rank % 5} ms)")]
        record = Recorded(Collected(metrics=metrics, notes=["2 profiled steps",
                                                            f"{rank % 2} odd steps"],
                                    artifacts={"trace": Path(f"/job/rank-{rank}.json")}),
                          [Path(f"/job/rank-{rank}.json")], rank=rank, world=ranks,
                          environment={"devices": ["A100"]})
        out.append(UnitResult(Unit("torch", (Path(f"/job/rank-{rank}.json"),)),
                              records=[record]))
    return out


def _declared() -> dict[str, dict[str, str]]:
    return declared_primary(load_plugins().backends()[0])


def _seen(job: Folded) -> tuple[Any, ...]:
    """All that the job gives of its ranks' figures, notes, files and facts."""
    assert job.columns is not None
    out = job.collected["torch"]
    return (job.columns.summary(), [m.to_dict() for m in out.metrics], out.notes,
            out.artifacts, job.recorded, {r: list(t) for r, t in job.samples.items()})


def test_a_big_job_s_figures_are_its_ranks_distributions() -> None:
    """RANKS ranks read one after another: each figure's distribution is the one computed
    from every rank's value (exact: mean, median, p90, least and most with their ranks); no
    record is held; the ranks at either end are kept whole, their own descriptions with
    them, and their files (every rank's are the report's ``analyzed``); a note every rank has
    is said once with its ranks."""
    fold = JobFold(_declared())
    for i, result in enumerate(_results()):
        fold.add(i, result)
    assert fold.big and all(r.recorded is None for s in fold.backends.values()
                            for r in s.records)
    job = fold.finish()
    assert job.columns is not None
    figures = {f["name"]: f for f in job.columns.summary()["figures"]}
    busy = sorted(_busy(r) for r in range(RANKS))
    low = min(range(RANKS), key=lambda r: (_busy(r), r))  # (a tie: the lowest rank)
    high = max(range(RANKS), key=lambda r: (_busy(r), r))  # (a tie: the highest)
    assert figures["gpu_busy"] == {
        "name": "gpu_busy", "unit": "%", "layer": "kernel", "source": "torch",
        "better": "higher", "ranks": RANKS, "known": RANKS,
        "mean": math.fsum(busy) / RANKS, "median": (busy[99] + busy[100]) / 2,
        "p90": busy[math.ceil(0.9 * RANKS) - 1], "min": busy[0], "min_rank": low,
        "max": busy[-1], "max_rank": high}
    delay = figures["gpu_launch_delay"]
    assert (delay["known"], delay["reason"]) == (RANKS - RANKS // 10, "rank 3: no launch")
    assert delay["detail"] and delay["min"] == 1e-5 and delay["max_rank"] == 195  # ties: high
    kept = set(job.columns.summary()["kept"])
    assert {low, high, 0, RANKS - 1} <= kept and len(kept) <= 6
    listed = {m.name: m for m in job.collected["torch"].metrics}
    assert {n.split("[")[1] for n in listed} == {f"rank{r}]" for r in kept}
    assert listed["gpu_launch_delay[rank195]"].description == "median (95th percentile 0 ms)"
    assert listed[f"gpu_busy[rank{high}]"].value == busy[-1]
    out = job.collected["torch"]
    assert out.notes == [f"ranks 0-{RANKS - 1}: 2 profiled steps", "100 ranks in 0-198: 0 odd "
                         "steps", "100 ranks in 1-199: 1 odd steps"]
    assert out.artifacts == {f"trace.rank{r}": Path(f"/job/rank-{r}.json") for r in kept}
    assert set(job.recorded) == {f"rank{r}" for r in range(RANKS)}
    assert list(job.samples) == list(range(RANKS)) and list(job.samples[5]) == [
        0.010 + 5e-6, 0.012 + 5e-6]


def test_a_big_job_is_the_same_wherever_and_in_whatever_order_its_ranks_are_folded() -> None:
    """The same ranks folded by one reader, by four workers whose folds are each too small
    to be big (merged in two orders), and by workers told the job is big: the same
    distributions, kept ranks, notes, files, facts and step times."""
    declared = _declared()
    one = JobFold(declared)
    for i, result in enumerate(copy.deepcopy(_results())):
        one.add(i, result)
    want = _seen(one.finish())
    for order, big in (([0, 1, 2, 3], False), ([3, 1, 0, 2], False), ([2, 0, 3, 1], True)):
        parts = [JobFold(declared, big) for _ in range(4)]
        results = copy.deepcopy(_results())
        for i in random.Random(len(order)).sample(range(RANKS), RANKS):
            parts[i % 4].add(i, results[i])
        job = JobFold(declared, big)
        for n in order:
            job.merge(copy.deepcopy(parts[n]))  # (as a worker's, unpickled)
        assert _seen(job.finish()) == want, (order, big)


def test_a_small_job_keeps_every_rank_s_figures() -> None:
    """Below BIG_JOB ranks nothing is folded into columns: every rank's figures are listed,
    named by rank, as they always were."""
    fold = JobFold(_declared())
    for i, result in enumerate(_results(BIG_JOB - 1)):
        fold.add(i, result)
    job = fold.finish()
    assert job.columns is None
    assert len(job.collected["torch"].metrics) == 3 * (BIG_JOB - 1)
    assert "rank 0: 2 profiled steps" in job.collected["torch"].notes


def test_ranks_in_words() -> None:
    """Runs of ranks said as spans; past four runs, a count and the span."""
    assert said_ranks([3]) == "rank 3"
    assert said_ranks([0, 1, 2, 3]) == "ranks 0-3"
    assert said_ranks([0, 2]) == "ranks 0, 2"
    assert said_ranks([4, 0, 1, 5]) == "ranks 0, 1, 4, 5"
    assert said_ranks([*range(7), *range(8, 4096)]) == "ranks 0-6, 8-4095"
    assert said_ranks(range(0, 20, 2)) == "10 ranks in 0-18"


def _job_report(metrics: list[Metric], environment: dict[str, Any]) -> Report:
    return Report(run=RunInfo([], "/job", "2026-01-01T00:00:00Z", 1.0, "0.1.0", 1, 0, None,
                              True, [], analyzed=[{"path": "/job/rank-0.json",
                                                   "backend": "torch"}]),
                  environment=environment, backends=[], metrics=metrics)


def test_a_big_job_is_diffed_by_its_ranks_distributions() -> None:
    """``diff`` of a job that lists its ten ranks against a big job: each per-rank figure is
    compared by its median, p90 and most over the ranks (the small job's computed from its
    ranks as the big job's were), not rank by rank (which ranks a big job keeps whole is not
    a change); the big job's distributions are not an environment change."""
    from perfstack.analysis.diff import diff
    from perfstack.analysis.job.perrank import distributions

    small = _job_report([Metric(f"gpu_busy[rank{r}]", 50.0 + r, "%", "kernel", "torch",
                                Better.HIGHER) for r in range(10)], {})
    figures = [{"name": "gpu_busy", "unit": "%", "layer": "kernel", "source": "torch",
                "better": "higher", "ranks": 4096, "known": 4096, "mean": 60.0,
                "median": 60.0, "p90": 70.0, "min": 40.0, "min_rank": 3, "max": 80.0,
                "max_rank": 9}]
    big = _job_report([Metric("gpu_busy[rank3]", 40.0, "%", "kernel", "torch", Better.HIGHER),
                       Metric("gpu_busy[rank9]", 80.0, "%", "kernel", "torch", Better.HIGHER)],
                      {"across_ranks": {"ranks": 4096, "kept": [3, 9], "figures": figures,
                                        "steps": {"ranks": [], "times": []}}})
    assert {m.name: m.value for m in distributions(small)} == {
        "gpu_busy[median]": 54.5, "gpu_busy[p90]": 58.0, "gpu_busy[max]": 59.0}
    found = diff(small, big)
    changes = {m.name: (m.base, m.new) for m in found.metrics}
    assert changes == {"gpu_busy[median]": (54.5, 60.0), "gpu_busy[p90]": (58.0, 70.0),
                       "gpu_busy[max]": (59.0, 80.0)}
    assert not found.environment


def test_a_big_job_s_backend_with_a_malformed_rank_is_left_out_of_the_distributions() -> None:
    """One rank's records do not fit the schema: its backend is left out of the report (as
    in a small job), its figures out of the distributions and of the ranks kept whole."""
    results = _results()
    results[5].records[0].collected.metrics.append(
        Metric("bad", 1.0, "%", "nolayer", "torch", Better.HIGHER))
    fold = JobFold(_declared())
    for i, result in enumerate(results):
        fold.add(i, result)
    job = fold.finish()
    assert job.problems["torch"] and job.columns is not None
    summary = job.columns.summary()
    assert summary["figures"] == [] and summary["kept"] == []
