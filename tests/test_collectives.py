"""Time in collectives split into waiting for the last rank and moving data, and the slowest
rank's cause, checked on the recorded A100 trace with NCCL collectives (ranks made from it
with a known change) where the answer is exact, and on given figures."""

from __future__ import annotations

import functools
import gzip
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from perfstack.analysis.job import straggler
from perfstack.report import Better, Metric
from tests.conftest import ROOT, perfstack_in, slow_host

TRACE = ROOT / "tests" / "fixtures" / "gpu-traces" / "a100_nccl" / "rank-0.json.gz"
DELAY_US = 100.0
#: What the device figures read: the device's events, the launches, the steps, the metadata
#: (the ops and their flows, two thirds of the trace, are left out: 3x faster to read).
KEPT = {"kernel", "gpu_memcpy", "gpu_memset", "cuda_runtime", "user_annotation", "Trace", None}


@functools.cache
def _recorded() -> str:
    with gzip.open(TRACE, "rt", encoding="utf-8") as fh:
        data = json.load(fh)
    data["traceEvents"] = [e for e in data["traceEvents"] if e.get("cat") in KEPT]
    return json.dumps(data)


def _job(folder: Path, world: int, edit: Callable[[int, dict[str, Any]], None]) -> Path:
    """A job folder of ``world`` ranks, each the recorded A100 trace's device side with its
    rank set and ``edit(rank, trace)`` applied."""
    folder.mkdir(parents=True)
    for rank in range(world):
        data = json.loads(_recorded())
        data["distributedInfo"].update(rank=rank, world_size=world)
        edit(rank, data)
        (folder / f"rank-{rank}.json").write_text(json.dumps(data))
    return folder


def _collectives_in_steps() -> list[float]:
    """A plain count: the trace's NCCL kernels that start within its profiled steps, their
    durations (µs) in start order."""
    events = json.loads(_recorded())["traceEvents"]
    steps = [e for e in events if str(e.get("name", "")).startswith("ProfilerStep#")]
    start = min(e["ts"] for e in steps)
    end = max(e["ts"] + e["dur"] for e in steps)
    nccl = sorted((e for e in events if e.get("cat") == "kernel"
                   and "nccl" in e["name"].lower() and start <= e["ts"] <= end),
                  key=lambda e: e["ts"])
    return [float(e["dur"]) for e in nccl]


def _bus_bytes_in_steps() -> list[float]:
    """A plain count: the same kernels' bytes over a rank's links, as nccl-tests counts them
    (the message in bytes times 2(n-1)/n for an all-reduce, 1 for a broadcast)."""
    events = json.loads(_recorded())["traceEvents"]
    steps = [e for e in events if str(e.get("name", "")).startswith("ProfilerStep#")]
    start = min(e["ts"] for e in steps)
    end = max(e["ts"] + e["dur"] for e in steps)
    out = []
    for e in sorted((e for e in events if e.get("cat") == "kernel"
                     and "nccl" in e["name"].lower() and start <= e["ts"] <= end),
                    key=lambda e: e["ts"]):
        args = e["args"]
        n = args["Group size"]
        factor = {"allreduce": 2 * (n - 1) / n, "broadcast": 1.0}[args["Collective name"]]
        item = {"Float": 4, "Long": 8}[args["dtype"]]  # the types this trace's collectives use
        out.append(max(args["In msg nelems"], args["Out msg nelems"]) * item * factor)
    return out


def _delayed(rank: int, data: dict[str, Any]) -> None:  # rank 0 arrives last at each one
    if rank == 1:
        for e in data["traceEvents"]:
            if e.get("cat") == "kernel" and "nccl" in e["name"].lower():
                e["dur"] += DELAY_US


def _analyze(tmp_path: Path, *inputs: Path) -> dict[str, dict[str, Any]]:
    out = tmp_path / "job.json"
    proc = perfstack_in(tmp_path, "analyze", *map(str, inputs), "-o", str(out), "-q")
    assert proc.code == 0, proc.stderr
    return {m["name"]: m for m in json.loads(out.read_text())["metrics"]}


def test_collective_time_splits_into_waiting_and_moving(tmp_path: Path) -> None:
    """Rank 1's every collective lasts 100 µs longer (it launched them earlier and waited):
    its waiting is exactly 100 µs times the collectives, rank 0 waits for none, and moving
    data is the recorded collectives' time."""
    durations = _collectives_in_steps()
    assert len(durations) == 21  # 15 all_reduce, 6 broadcast in the three profiled steps
    metrics = _analyze(tmp_path, _job(tmp_path / "job", 2, _delayed))
    for rank, extra in ((0, 0.0), (1, DELAY_US)):
        each = metrics[f"gpu_collectives[pg0][rank{rank}]"]
        assert each["samples_of"] == "collectives"
        assert each["samples"] == pytest.approx([(d + extra) * 1e-6 for d in durations])
    steps = {r: sum(metrics[f"torch_step_time[rank{r}]"]["samples"]) for r in (0, 1)}
    # The bytes each moved, in the same order, and the links' bandwidth while moving data.
    moved = _bus_bytes_in_steps()
    assert metrics["gpu_collective_bytes[pg0][rank0]"]["samples"] == pytest.approx(moved)
    assert metrics["collective_busbw"]["unit"] == "B/s"
    assert metrics["collective_busbw"]["value"] == pytest.approx(
        sum(moved) / (sum(durations) * 1e-6), rel=1e-9)
    assert metrics["collective_stall[rank0]"]["value"] == 0
    assert metrics["collective_stall[rank1]"]["value"] == pytest.approx(
        100 * len(durations) * DELAY_US * 1e-6 / steps[1], rel=1e-9)
    assert metrics["collective_stall"]["value"] == pytest.approx(
        metrics["collective_stall[rank1]"]["value"] / 2, rel=1e-9)
    median_steps = (steps[0] + steps[1]) / 2
    assert metrics["collective_transfer"]["value"] == pytest.approx(
        100 * sum(durations) * 1e-6 / median_steps, rel=1e-9)


def test_ranks_that_ran_other_collectives_are_not_split(tmp_path: Path) -> None:
    """A rank missing a collective cannot be matched one to one: unknown, said why."""
    def one_fewer(rank: int, data: dict[str, Any]) -> None:
        if rank == 0:
            return
        first = min((e for e in data["traceEvents"] if e.get("cat") == "kernel"
                     and "nccl" in e["name"].lower()), key=lambda e: e["ts"])
        data["traceEvents"].remove(first)

    metrics = _analyze(tmp_path, _job(tmp_path / "job", 2, one_fewer))
    stall = metrics["collective_stall"]
    assert stall["value"] is None and "cannot be matched one to one" in stall["reason"]
    assert not [name for name in metrics if name.startswith("collective_stall[")]


def test_merge_of_two_nodes_splits_the_job(tmp_path: Path) -> None:
    """Each node's report holds one rank; the merged job report has the split over both."""
    job = _job(tmp_path / "job", 2, _delayed)
    for rank in (0, 1):
        node = tmp_path / f"node{rank}"
        node.mkdir()
        proc = perfstack_in(node, "analyze", str(job / f"rank-{rank}.json"), "-o",
                            "report.json", "-q")
        assert proc.code == 0, proc.stderr
    proc = perfstack_in(tmp_path, "merge", "node0/report.json", "node1/report.json", "-o",
                        "merged.json", "-q")
    assert proc.code == 0, proc.stderr
    merged = {m["name"]: m for m in json.loads((tmp_path / "merged.json").read_text())[
        "metrics"]}
    direct = _analyze(tmp_path, job)
    for name in ("collective_stall[rank0]", "collective_stall[rank1]", "collective_transfer"):
        assert merged[name]["value"] == pytest.approx(direct[name]["value"], rel=1e-9), name


def _ranked(base: str, values: dict[int, float], unit: str = "%") -> list[Metric]:
    return [Metric(f"{base}[rank{r}]", v, unit, "kernel", "t", Better.NEITHER)
            for r, v in values.items()]


def _of(metrics: list[Metric]) -> Callable[[str], dict[int, float]]:
    """Each rank's value of a figure, from its ``base[rankN]`` metrics."""
    return lambda base: straggler.per_rank(metrics, base)


def test_the_slowest_ranks_cause_is_the_figure_it_exceeds_most() -> None:
    """Given figures of four ranks, rank 3 the slowest (120 ms steps, others 100 ms)."""
    steps = {0: 0.100, 1: 0.100, 2: 0.100, 3: 0.120}
    # More device compute: 60% of 120 ms = 72 ms a step against 50% of 100 ms = 50 ms.
    compute = _ranked("gpu_time.compute", {0: 50.0, 1: 50.0, 2: 50.0, 3: 60.0})
    host = _ranked("gpu_idle.host_wait", {0: 20.0, 1: 21.0, 2: 20.0, 3: 17.0})
    found = straggler.evidence(_of([*compute, *host]), 3, {}, steps)
    pointed = straggler.cause(found)
    assert pointed is not None and pointed.cause == "more compute"
    assert pointed.line == ("device compute: 72.0 ms a step against 50.0 ms on the other "
                            "ranks' median")
    # A host stall: the device idle waiting for the host 40 ms a step against 20 ms.
    host = _ranked("gpu_idle.host_wait", {0: 20.0, 1: 20.0, 2: 20.0, 3: 33.3})
    compute = _ranked("gpu_time.compute", {0: 50.0, 1: 50.0, 2: 50.0, 3: 42.0})
    pointed = straggler.cause(straggler.evidence(_of([*compute, *host]), 3, {}, steps))
    assert pointed is not None and pointed.cause == "a host stall"
    # A share tripled but small (1% of the wall time to 3%) explains nothing; CPU op time
    # outside collectives (seconds) does.
    python = _ranked("budget.interpreter", {0: 1.0, 1: 1.0, 2: 1.0, 3: 3.0})
    cpu = {0: 1.0, 1: 1.0, 2: 1.1, 3: 1.5}
    found = straggler.evidence(_of(python), 3, cpu, steps)
    assert [e.cause for e in found] == ["a host stall", "more compute"]  # by relative excess
    pointed = straggler.cause(found)
    assert pointed is not None and pointed.cause == "more compute"
    assert straggler.cause(straggler.evidence(_of(python), 3, {}, steps)) is None


def test_the_straggler_finding_says_why_first(tmp_path: Path) -> None:
    """Recorded ranks where rank 1's steps are longer with the same kernels: its device
    waits for its host; the finding's title says so and its first line shows it."""
    def slower(rank: int, data: dict[str, Any]) -> None:
        if rank == 1:
            slow_host(data, 1.25)

    out = tmp_path / "job.json"
    proc = perfstack_in(tmp_path, "analyze", str(_job(tmp_path / "job", 2, slower)),
                        "-o", str(out), "-q")
    assert proc.code == 0, proc.stderr
    [found] = [f for f in json.loads(out.read_text())["findings"]
               if f["rule"] == "dist.straggler"]
    assert found["title"] == "rank 1 is 25% slower per step than rank 0: a host stall"
    assert found["evidence"][0].startswith("rank 1's device idle waiting for the host: ")
    assert found["evidence"][1].startswith("median step time (the traces' profiled steps)")


def test_eight_ranks_waiting_for_one(tmp_path: Path) -> None:
    """Eight ranks; every rank but 5 spends 10 ms longer in each collective (they arrive
    first and wait for rank 5): each one's waiting is exactly that, rank 5 waits for none,
    and the imbalance finding names rank 5, listing the extremes, not every rank."""
    def early(rank: int, data: dict[str, Any]) -> None:
        for e in data["traceEvents"]:
            if rank != 5 and e.get("cat") == "kernel" and "nccl" in e["name"].lower():
                e["dur"] += 10_000.0

    job = _job(tmp_path / "job", 8, early)
    out = tmp_path / "job.json"
    proc = perfstack_in(tmp_path, "analyze", str(job), "-o", str(out), "-q", "--jobs", "1")
    assert proc.code == 0, proc.stderr
    report = json.loads(out.read_text())
    metrics = {m["name"]: m for m in report["metrics"]}
    count = len(_collectives_in_steps())
    for rank in range(8):
        steps = sum(metrics[f"torch_step_time[rank{rank}]"]["samples"])
        expected = 0.0 if rank == 5 else 100 * count * 10e-3 / steps
        assert metrics[f"collective_stall[rank{rank}]"]["value"] == pytest.approx(
            expected, rel=1e-9, abs=1e-12), rank
    [found] = [f for f in report["findings"] if f["rule"] == "dist.imbalance"]
    assert "the others wait for rank 5" in found["title"], found
    assert any(e.startswith("... and 6 more ranks") for e in found["evidence"]), found
    assert len(found["evidence"]) <= 10, found["evidence"]


def test_the_bytes_a_collective_moves_are_nccl_tests_bus_bytes() -> None:
    """A message of S bytes among n ranks: all-reduce 2(n-1)/n x S, all-gather,
    reduce-scatter and all-to-all (n-1)/n x S of the larger side, broadcast S; a barrier, an
    unknown type or a missing size is not counted (None, never 0)."""
    from plugins.torchprof.busbytes import bus_bytes

    assert bus_bytes("allreduce", 1000, 1000, "Float", 8) == 1000 * 4 * 2 * 7 / 8
    assert bus_bytes("all_reduce", 1000, 1000, "BFloat16", 2) == 1000 * 2 * 1.0
    assert bus_bytes("_allgather_base", 1000, 8000, "Half", 8) == 8000 * 2 * 7 / 8
    assert bus_bytes("reduce_scatter_tensor_coalesced", 8000, 1000, "Float", 8) == \
        8000 * 4 * 7 / 8
    assert bus_bytes("all_to_all", 4096, 4096, "Long", 4) == 4096 * 8 * 3 / 4
    assert bus_bytes("broadcast", 53120, 53120, "Float", 2) == 53120 * 4
    assert bus_bytes("barrier", 1, 1, "Float", 2) is None
    assert bus_bytes("allreduce", 1000, 1000, "SomeNewType", 2) is None
    assert bus_bytes("allreduce", None, None, "Float", 2) is None
    assert bus_bytes("allreduce", 1000, 1000, "Float", "?") is None


def test_a_collective_of_unknown_size_is_left_out_of_the_bandwidth(tmp_path: Path) -> None:
    """The first collective of the profiled steps made a barrier (no size a bus factor
    applies to): its bytes sample is -1 on each rank, and the links' bandwidth is the other
    collectives' bytes over their own time moving data."""
    durations = _collectives_in_steps()
    moved = _bus_bytes_in_steps()

    def barrier_first(rank: int, data: dict[str, Any]) -> None:
        _delayed(rank, data)
        events = data["traceEvents"]
        steps = [e for e in events if str(e.get("name", "")).startswith("ProfilerStep#")]
        start = min(e["ts"] for e in steps)
        first = min((e for e in events if e.get("cat") == "kernel"
                     and "nccl" in e["name"].lower() and e["ts"] >= start),
                    key=lambda e: e["ts"])
        first["args"]["Collective name"] = "barrier"

    metrics = _analyze(tmp_path, _job(tmp_path / "job", 2, barrier_first))
    for rank in (0, 1):
        samples = metrics[f"gpu_collective_bytes[pg0][rank{rank}]"]["samples"]
        assert samples[0] == -1 and samples[1:] == pytest.approx(moved[1:])
    assert metrics["collective_busbw"]["value"] == pytest.approx(
        sum(moved[1:]) / (sum(durations[1:]) * 1e-6), rel=1e-9)
