"""torchrun runs: 2 ranks on gloo, per-rank rows, cross-rank step times and stragglers."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tests.conftest import ROOT, WORKLOADS, Result, assert_one_line_error, backend


def _metric(report: dict[str, Any], name: str) -> dict[str, Any]:
    return next(m for m in report["metrics"] if m["name"] == name)


def test_cifar100_on_two_ranks_gives_per_rank_rows(perfstack: Callable[..., Result]) -> None:
    """The CIFAR-100 DDP workload on 2 gloo ranks: torch and py-spy profile both ranks in
    their own folders; rows say their rank; collectives are visible; throughput from rank 0."""
    result = perfstack("run", "--nproc-per-node", "2", "--ranks", "all", "--plugins",
                       "torch,pyspy,resources", "--repeat", "1", "--warmup", "0", "-q",
                       "--timeout", "150",
                       str(ROOT / "workloads" / "cifar100.py"), "--", "--num-batches", "8",
                       timeout=300)
    assert result.code == 0, result.stderr
    report = result.report()
    assert report["environment"]["distributed"]["profiled_ranks"] == [0, 1]
    for name in ("torch", "pyspy", "resources"):
        assert backend(report, name)["status"] == "ok", backend(report, name)
    run_dir = result.cwd / ".perfstack" / "runs" / "latest"
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
    assert _metric(report, "throughput")["value"] > 0
    assert _metric(report, "slowest_rank")["value"] in (0, 1)


def test_a_straggler_is_named(perfstack: Callable[..., Result]) -> None:
    """Rank 1 does 5x the work: rank 0 waits in all_reduce, and the finding names rank 1."""
    result = perfstack("run", "--nproc-per-node", "2", "--ranks", "all", "--plugins", "torch",
                       "--repeat", "1", "--warmup", "0", "-q", "--timeout", "150",
                       str(WORKLOADS / "ddp_straggler.py"), timeout=300)
    assert result.code == 0, result.stderr
    report = result.report()
    wait0 = _metric(report, "communication_share[rank0]")["value"]
    wait1 = _metric(report, "communication_share[rank1]")["value"]
    assert wait0 > wait1 + 15, (wait0, wait1)
    found = [f for f in report["findings"] if f["rule"] == "dist.imbalance"]
    assert found and "rank 1 is the straggler" in found[0]["title"], report["findings"]


def test_distributed_flags_are_checked(perfstack: Callable[..., Result]) -> None:
    """--ranks without --nproc-per-node, or outside the job: one line, exit 2."""
    script = str(WORKLOADS / "busy.py")
    assert_one_line_error(perfstack("run", "--ranks", "all", script), 2)
    assert_one_line_error(perfstack("run", "--nproc-per-node", "2", "--ranks", "3", script), 2)
    assert_one_line_error(perfstack("run", "--nproc-per-node", "2", "--ranks", "x", script), 2)
