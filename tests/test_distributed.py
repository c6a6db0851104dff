"""torchrun runs: 2 ranks on gloo, per-rank rows, cross-rank step times and stragglers."""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from perfstack.report.files import read_json, schema_errors
from tests.conftest import (
    ROOT,
    WORKLOADS,
    Result,
    assert_one_line_error,
    backend,
    perfstack_env,
    perfstack_in,
)


def _metric(report: dict[str, Any], name: str) -> dict[str, Any]:
    return next(m for m in report["metrics"] if m["name"] == name)


def test_cifar100_trains_on_two_ranks(perfstack: Callable[..., Result]) -> None:
    """The bundled CIFAR-100 DDP workload on 2 gloo ranks, unprofiled: it trains over both
    ranks and prints its throughput once (rank 0), which becomes the job's throughput; each
    rank has its folder and its step time. (What the profilers make of a job's ranks is read
    from the shared ddp_job.)"""
    result = perfstack("run", "--nproc-per-node", "2", "--ranks", "all", "--plugins",
                       "resources", "--repeat", "1", "--warmup", "0", "-q", "--timeout", "150",
                       str(ROOT / "workloads" / "cifar100.py"), "--", "--num-batches", "8",
                       timeout=300)
    assert result.code == 0, result.stderr
    report = result.report()
    assert report["environment"]["distributed"]["profiled_ranks"] == [0, 1]
    assert backend(report, "resources")["status"] == "ok"
    run_dir = result.cwd / ".perfstack" / "runs" / "latest"
    assert (run_dir / "baseline-1" / "rank-0").is_dir()
    assert (run_dir / "baseline-1" / "rank-1").is_dir()
    printed = (run_dir / "baseline-1" / "stdout.log").read_text()
    assert "x 2 rank(s)" in printed and printed.count("throughput:") == 1, printed
    assert _metric(report, "throughput")["value"] > 0
    for rank in (0, 1):
        assert _metric(report, f"step_time[rank{rank}]")["value"] > 0


def test_every_profiler_keeps_each_rank_apart(ddp_job: Result) -> None:
    """torch and py-spy profile both ranks of the shared job, each rank in its own folder;
    rows say their rank and their keys carry it; the collective is visible; each rank has its
    step time and communication share, and the slowest rank is named."""
    report = ddp_job.report()
    assert report["environment"]["distributed"]["profiled_ranks"] == [0, 1]
    for name in ("torch", "pyspy", "resources"):
        assert backend(report, name)["status"] == "ok", backend(report, name)
    run_dir = ddp_job.cwd / ".perfstack" / "runs" / "latest"
    for folder in ("torch", "pyspy", "baseline-1"):
        assert (run_dir / folder / "rank-0").is_dir() and (run_dir / folder / "rank-1").is_dir()
    torch_ranks = {r["attrs"]["rank"] for r in report["layers"]["framework"]
                   if r["source"] == "torch"}
    spy_ranks = {r["attrs"]["rank"] for r in report["layers"]["python"]
                 if r["source"] == "pyspy"}
    assert torch_ranks == {0, 1} and spy_ranks == {0, 1}
    assert all(r["key"].startswith(f"rank{r['attrs']['rank']}:")
               for r in report["layers"]["framework"] if r["source"] == "torch")
    assert any("allreduce" in r["name"] for r in report["layers"]["framework"])
    for rank in (0, 1):
        assert _metric(report, f"step_time[rank{rank}]")["value"] > 0
        assert 0 < _metric(report, f"communication_share[rank{rank}]")["value"] < 100
    slowest = _metric(report, "slowest_rank")  # a rank, or none beyond the noise, said why
    assert slowest["value"] in (0, 1) or "beyond the noise" in slowest["reason"], slowest
    # The job's time budget: each part the mean of the ranks' own, and the report shows it.
    for part in ("startup", "interpreter", "native", "idle"):
        ranks = [_metric(report, f"budget.{part}[rank{r}]")["value"] for r in (0, 1)]
        assert _metric(report, f"budget.{part}")["value"] == pytest.approx(sum(ranks) / 2)
    shown = perfstack_in(ddp_job.cwd, "show").stdout
    assert "Where the time goes" in shown and "No time budget was measured" not in shown


def test_a_straggler_is_named(ddp_job: Result) -> None:
    """Rank 1 does 5x the work: rank 0 waits in all_reduce, and the finding names rank 1 and
    why."""
    report = ddp_job.report()
    wait0 = _metric(report, "communication_share[rank0]")["value"]
    wait1 = _metric(report, "communication_share[rank1]")["value"]
    assert wait0 > wait1 + 15, (wait0, wait1)
    found = [f for f in report["findings"] if f["rule"] == "dist.imbalance"]
    # Why: its CPU ops outside the all_reduce take about 5x rank 0's (the step times are
    # alike: rank 0 waits in all_reduce for rank 1 at every step).
    assert found and found[0]["title"].endswith("rank 1 is the straggler (more compute)"), found
    assert found[0]["evidence"][0].startswith("rank 1's CPU op time outside collectives: ")


def test_distributed_flags_are_checked(perfstack: Callable[..., Result]) -> None:
    """--ranks without --nproc-per-node, or outside the job: one line, exit 2."""
    script = str(WORKLOADS / "busy.py")
    assert_one_line_error(perfstack("run", "--ranks", "all", script), 2)
    assert_one_line_error(perfstack("run", "--nproc-per-node", "2", "--ranks", "3", script), 2)
    assert_one_line_error(perfstack("run", "--nproc-per-node", "2", "--ranks", "x", script), 2)


def test_two_nodes_then_merge(tmp_path: Path) -> None:
    """A job of two "nodes" of two ranks each (two perfstack sessions on this machine,
    torchrun's static rendezvous on one port), each writing into the job folder (--job-dir):
    node 0 given its rendezvous in --torchrun-args, node 1 finding the same one in SLURM's
    variables. Each node's report holds its own global ranks (0-1, 2-3), and ``perfstack
    merge`` joins them: every rank's rows, the cross-rank figures over all four, the
    straggler (rank 1 does 5x the work) named across nodes."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    job_dir = tmp_path / "job"
    common = ["run", "--nproc-per-node", "2", "--ranks", "all", "--plugins", "torch",
              "--repeat", "1", "--warmup", "0", "-q", "--timeout", "150", "--job-dir",
              str(job_dir)]
    given = ["--torchrun-args", f"--nnodes 2 --node-rank 0 --master-addr 127.0.0.1 "
             f"--master-port {port}"]
    slurm = {"SLURM_JOB_ID": "4242", "SLURM_NNODES": "2", "SLURM_NODEID": "1",
             "SLURM_JOB_NODELIST": "127.0.0.[1-2]", "MASTER_PORT": str(port)}
    procs = [subprocess.Popen(
        [sys.executable, "-m", "perfstack", *common, *(given if node == 0 else []),
         str(WORKLOADS / "ddp_straggler.py")], cwd=tmp_path,
        env=perfstack_env(slurm if node == 1 else None), stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True) for node in (0, 1)]
    errs = []
    for proc in procs:
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
        errs.append(err)
    assert (f"torchrun --nnodes 2 --node-rank 1 --master-addr 127.0.0.1 --master-port {port}"
            in errs[1]), errs[1]
    nodes = [read_json(job_dir / f"node{n}" / "report.json") for n in (0, 1)]
    assert all((job_dir / f"node{n}" / "run" / "baseline-1").is_dir() for n in (0, 1))
    for node, report in enumerate(nodes):
        ranks = [2 * node, 2 * node + 1]
        assert report["environment"]["distributed"]["profiled_ranks"] == ranks
        assert {r["attrs"]["rank"] for r in report["layers"]["framework"]} == set(ranks)
        assert all(_metric(report, f"step_time[rank{r}]")["value"] > 0 for r in ranks)
    merged = tmp_path / "job.json"
    joined = perfstack_in(tmp_path, "merge", str(job_dir / "node0" / "report.json"),
                          str(job_dir / "node1" / "report.json"), "-o", str(merged), "-q")
    assert joined.code == 0, joined.stderr
    job = read_json(merged)
    assert schema_errors(job) == []
    assert {r["attrs"]["rank"] for r in job["layers"]["framework"]} == {0, 1, 2, 3}
    assert all(r["key"].startswith(f"rank{r['attrs']['rank']}:")
               for r in job["layers"]["framework"])
    names = {m["name"] for m in job["metrics"]}
    assert {*(f"step_time[rank{r}]" for r in range(4)), "slowest_rank", "straggler_gap",
            "wall_time", "wall_time[node1]"} <= names
    found = [f for f in job["findings"] if f["rule"] == "dist.imbalance"]
    assert found and "rank 1 is the straggler" in found[0]["title"], job["findings"]
    assert [n["ranks"] for n in job["environment"]["merged_from"]] == [[0, 1], [2, 3]]
    assert {r["id"] for r in job["run"]["runs"]} >= {"baseline-1", "node1:baseline-1"}
    # No figure twice; every node's raw outputs kept, found from the job report's folder.
    counted = [m["name"] for m in job["metrics"]]
    assert len(counted) == len(set(counted)), sorted(n for n in counted if counted.count(n) > 1)
    [torch] = [b for b in job["backends"] if b["name"] == "torch"]
    assert any(label.startswith("node1:") for label in torch["artifacts"]), torch["artifacts"]
    for path in torch["artifacts"].values():
        assert (merged.parent / path).exists(), path
    # The merged timeline holds both nodes' torch traces, one process each.
    timeline = tmp_path / "job.trace.json"
    shown = perfstack_in(tmp_path, "show", str(merged), "--format", "perfetto", "-o",
                         str(timeline))
    assert shown.code == 0, shown.stderr
    names = [e["args"]["name"] for e in read_json(timeline)["traceEvents"]
             if e.get("ph") == "M" and e.get("name") == "process_name"]
    assert len([n for n in names if n.startswith("torch")]) == 4, names
    # The job folder itself: its nodes' reports found below it (their run histories not).
    folder = perfstack_in(tmp_path, "merge", str(job_dir), "-o", str(tmp_path / "job2.json"),
                          "-q")
    assert folder.code == 0, folder.stderr
    assert sorted(m["name"] for m in read_json(tmp_path / "job2.json")["metrics"]) == sorted(
        counted)


def test_equal_ranks_have_no_slowest_and_a_straggler_is_named() -> None:
    """Simulated step times (fixed seed): two ranks of one speed have no slowest rank (it was
    whichever the noise put first); a rank 25% slower is named, with the straggler finding."""
    import random

    from perfstack.analysis.job.distributed import rank_figures
    from perfstack.report.files import load_report

    rng = random.Random(7)
    report = load_report(ROOT / "tests/fixtures/reports/v1-busy.json")  # no device figures

    def steps(mean: float) -> list[float]:
        return [rng.gauss(mean, 0.02 * mean) for _ in range(30)]

    metrics, findings = rank_figures(report, {0: steps(0.100), 1: steps(0.100)}, True)
    slowest = next(m for m in metrics if m.name == "slowest_rank")
    assert slowest.value is None and "no rank is slower beyond the noise" in str(slowest.reason)
    assert not [f for f in findings if f.rule == "dist.straggler"]
    metrics, findings = rank_figures(report, {0: steps(0.100), 1: steps(0.125)}, True)
    assert next(m for m in metrics if m.name == "slowest_rank").value == 1
    titles = [f.title for f in findings if f.rule == "dist.straggler"]
    assert len(titles) == 1 and titles[0].endswith("% slower per step than rank 0"), titles
    assert 20 <= int(titles[0].split()[3].rstrip("%")) <= 30
    one = rank_figures(report, {0: [0.1], 1: [0.104]}, True)[0]
    assert next(m for m in one if m.name == "slowest_rank").value is None  # 4% < 10%
