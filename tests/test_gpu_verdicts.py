"""What bounds a GPU's steps, named with its evidence and fix: on real recorded traces (the
A100, V100 and MI250 ones others recorded, and ours from an H200) and, for copy-bound and
sync-bound rules' edges, on a report's figures as plain data (the H200's copy-bound and
sync-bound loops: tests/test_gpu_loops.py; docs/accuracy.md)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

from perfstack_plugins.torchprof.rows import summarize
from perfstack_plugins.torchprof.trace import TraceAggregate

from perfstack.analysis.gpubound import gpu_bound, profiler_idle
from perfstack.analysis.rules.gpu import gpu_findings
from perfstack.report import Better, Layer, Metric, Quantity, Report, Row, RunInfo

FIXTURES = Path(__file__).parent / "fixtures"
H200 = FIXTURES / "gpu-runs" / "recheck"


def _report(trace: Path, environment: dict[str, Any] | None = None,
            extra: list[Metric] | None = None) -> Report:
    """A report of one recorded trace, as ``perfstack analyze`` reads it (the torch backend's
    rows and metrics), with ``extra`` metrics (a baseline's) beside."""
    agg = TraceAggregate()
    agg.add_file(trace)
    rows, metrics, _ = summarize(agg)
    run = RunInfo(command=["x.py"], cwd="/", started="2026-11-28T00:00:00", duration_s=1.0,
                  perfstack_version="0", repeat=1, warmup=0, timeout_s=None, complete=True,
                  runs=[])
    report = Report(run=run, environment=environment or {}, backends=[],
                    metrics=[*metrics, *(extra or [])])
    for layer, found in rows.items():
        report.layers[layer].extend(found)
    return report


def _h200_resnet_trace() -> Path:
    return next((H200 / "resnet" / "torch").glob("*.pt.trace.json.gz"))


def _h200_resnet() -> Report:
    """The H200's resnet50 run (recheck), as analyze reads its trace, with the step time its
    baseline runs measured (the recorded report's) and its ceilings beside."""
    with gzip.open(H200 / "resnet" / "report.json.gz", "rt") as fh:
        recorded = json.load(fh)
    base = next(m for m in recorded["metrics"] if m["name"] == "step_time")
    baseline = Metric("step_time", base["value"], "s", "run", "baseline", Better.LOWER)
    return _report(_h200_resnet_trace(), {"ceilings": recorded["environment"]["ceilings"]},
                   [baseline])


def _one(report: Report) -> Any:
    found = gpu_findings(report)
    assert len(found) == 1, [f.title for f in found]
    return found[0]


def test_a_host_that_cannot_launch_fast_enough_is_launch_bound() -> None:
    """a100_nccl: the device idles 76% of its steps, 72 points of it before the host had made
    the next launch call."""
    f = _one(_report(FIXTURES / "gpu-traces/a100_nccl/rank-0.json.gz"))
    assert f.rule == "gpu.launch-bound" and f.severity == "warning"
    assert "72%" in f.title
    assert "CUDA graph" in f.action


def test_a_full_device_is_device_bound_with_its_kernels_and_the_advice_its_gpu_can_take() -> None:
    """v100_ns: kernels cover 98% of the steps; convolutions and GEMMs in fp32 off the tensor
    cores, on a V100 (no bf16): the advice is fp16 autocast."""
    sheet = {"ceilings": {"gpu": {"device": "gpu", "source": "datasheet",
                                  "peak_flops": {"fp32": 15.7e12, "fp16": 125e12},
                                  "bandwidth": 900e9}}}
    f = _one(_report(FIXTURES / "gpu-traces/v100_ns/rank-0.json.gz", sheet))
    assert f.rule == "gpu.device-bound" and f.severity == "info"
    assert f.title.startswith("device-bound: its kernels keep the GPU busy 98%")
    assert "convolution" in f.title
    assert any(e.startswith("tensor cores ran 0.0%") for e in f.evidence), f.evidence
    assert "float16" in f.action and "bfloat16" not in f.action


def test_a_host_blocked_on_a_waiting_device_is_not_sync_bound() -> None:
    """a100_negq: the host blocks 71% of each step in 30 copies to pageable memory, but the
    device it waits for is itself waiting with its work launched (other ranks, other streams):
    it never drains for the host. The finding says both, and names the copies."""
    report = _report(FIXTURES / "gpu-traces/a100_negq/rank-0.json.gz")
    b = gpu_bound(report)
    assert b is not None and b.kind == "waits"
    assert b.sync_calls == 30 and b.step_s is not None
    assert 0.65 < (b.sync_s or 0) / b.step_s < 0.75
    f = _one(report)
    assert f.rule == "time.device-idle"
    assert f.evidence[0].startswith("30 synchronisations a step; the host blocked")
    assert any(e.startswith("aten::copy_ [[88], [88], []] (.cpu()") for e in f.evidence)


def test_the_profilers_own_slowdown_is_not_read_as_an_idle_device() -> None:
    """The H200's resnet50 run (recheck): under torch.profiler a step took 40 ms of which the
    device worked 17 ms (busy 38%); the same steps unprofiled took 19.8 ms (the baseline's
    step_time, from the recorded report): the device is busy 86% of an unprofiled step, and
    the verdict is device-bound, not an idle device."""
    report = _h200_resnet()
    b = gpu_bound(report)
    assert b is not None and b.busy_unprofiled is not None
    assert 30 < b.busy_profiled < 45 and 80 < b.busy_unprofiled < 92
    assert profiler_idle(b) and b.kind == "device"
    f = _one(report)
    assert "of an unprofiled step" in f.title
    assert any("which slowed the host" in e for e in f.evidence)
    # without the baseline the same trace is an idle device waiting for its host
    alone = gpu_bound(_report(_h200_resnet_trace()))
    assert alone is not None and alone.kind == "launch"


def test_a_compiled_tiny_model_is_launch_bound_not_sync_bound() -> None:
    """The H200's compiled MLP (recheck): two .item() reads a step block the host 18 µs of
    a 3.4 ms step; the device waits for launches 89% of it."""
    trace = next((H200 / "compiled" / "torch").glob("*.pt.trace.json.gz"))
    b = gpu_bound(_report(trace))
    assert b is not None and b.sync_calls == 2 and b.kind == "launch"


def _plain(metrics: dict[str, float], rows: list[Row] | None = None,
           per_step: dict[str, list[float]] | None = None,
           environment: dict[str, Any] | None = None) -> Report:
    """A report of figures as plain data: five 4 ms steps by phase, and ``metrics``."""
    run = RunInfo(command=["x.py"], cwd="/", started="2026-11-28T00:00:00", duration_s=1.0,
                  perfstack_version="0", repeat=1, warmup=0, timeout_s=None, complete=True,
                  runs=[])
    found = [Metric(name, value, "%", "kernel", "torch", Better.NEITHER)
             for name, value in metrics.items()]
    step = 0.004
    idle = metrics.get("gpu_time.idle", 0.0) / 100
    phases = {"compute": [step * (1 - idle)] * 5, "communication": [0.0] * 5,
              "memory": [0.0] * 5, "idle": [step * idle] * 5,
              "host_wait": [step * metrics.get("gpu_idle.host_wait", 0.0) / 100] * 5}
    for name, samples in {**{f"gpu_step.{k}": v for k, v in phases.items()},
                          **(per_step or {})}.items():
        found.append(Metric(name, sorted(samples)[2], "s", "framework", "torch",
                            Better.NEITHER, samples=samples, samples_of="steps"))
    report = Report(run=run, environment=environment or {}, backends=[], metrics=found)
    report.layers[Layer.FRAMEWORK].extend(rows or [])
    return report


def test_synchronisations_that_drain_the_device_are_sync_bound() -> None:
    """300 float(v) reads a step (the issue's loop, by hand: cudaStreamSynchronize 2.0 of
    4.1 ms a step): the host blocks half its step, the device idles after each read."""
    op = Row("aten::_local_scalar_dense [[]]", "aten::_local_scalar_dense [[]]", "torch",
             {"sync_calls": Quantity(1500, "count"), "sync_time": Quantity(0.010, "s")},
             {"op": "aten::_local_scalar_dense"}, {"python": ["step (loop.py:12)"]})
    report = _plain({"gpu_busy": 12.0, "gpu_time.idle": 88.0, "gpu_idle.host_wait": 70.0,
                     "gpu_idle.after_sync": 60.0, "gpu_copy_share": 0.5}, [op],
                    {"gpu_sync_calls": [300.0] * 5, "gpu_sync_time": [0.002] * 5})
    f = _one(report)
    assert f.rule == "gpu.sync-bound"
    assert f.title.startswith("sync-bound: the host waits for the GPU 300 times a step")
    assert any(".item(), float(t)" in e and "at step (loop.py:12)" in e for e in f.evidence)
    assert "read them once a step" in f.action


def test_copies_that_fill_the_device_are_copy_bound_against_the_link() -> None:
    """A pageable 256 MiB host-to-device copy a step fills 99.9% of the device's time (the
    issue's loop, by hand): named with its bytes, direction, pageable memory and achieved
    rate against the link's, and the fix is pinned memory."""
    copy = Row("Memcpy HtoD (Pageable -> Device)", "Memcpy HtoD (Pageable -> Device)", "torch",
               {"device": Quantity(0.0545 * 5, "s"), "bytes": Quantity(5 * 256 * 2 ** 20, "B"),
                "calls": Quantity(5, "count")},
               {"kind": "gpu_memcpy", "copy": {"direction": "HtoD", "host": "pageable"}})
    link = {"ceilings": {"gpu": {"device": "gpu", "source": "measured", "peak_flops": {},
                                 "bandwidth": 4e12, "how": {"link": {
                                     "htod_pinned": 53e9, "htod_pageable": 5.4e9}}}}}
    report = _plain({"gpu_busy": 99.9, "gpu_time.idle": 0.1, "gpu_idle.host_wait": 0.05,
                     "gpu_copy_share": 99.9}, per_step={"gpu_copy_bytes": [2.0 ** 28] * 5},
                    environment=link)
    report.layers[Layer.KERNEL].append(copy)
    f = _one(report)
    assert f.rule == "gpu.copy-bound"
    assert "fill 100% of the GPU's steps" in f.title
    line = next(e for e in f.evidence if e.startswith("HtoD from pageable memory"))
    assert "4.93 GB/s" in line and "5.4 GB/s" in line and "pageable memory" in line
    assert "pin_memory=True" in f.action and "non_blocking=True" in f.action


def test_a_recorded_gpus_host_link_is_its_datasheets_one_direction() -> None:
    """A copy on a machine perfstack never saw is held to the published host link: an H200's
    PCIe Gen5 x16, 64 GB/s a direction (the sheet's 128 GB/s is both ways)."""
    from perfstack.analysis.gpubound import _link_rate
    from perfstack.machine.roofline.datasheets import ceilings_of

    found = ceilings_of({"name": "NVIDIA H200", "totalGlobalMem": 150109880320})
    assert found is not None
    link = found.how["link"]
    assert link["per_direction"] == 64e9 and "PCIe Gen5" in link["what"]
    assert _link_rate(link, "HtoD", "pageable") == (64e9, link["what"])
    # measured here, each direction and host memory has its own
    measured = {"htod_pinned": 53e9, "htod_pageable": 5.4e9, "source": "measured"}
    assert _link_rate(measured, "HtoD", "pageable")[0] == 5.4e9
    assert _link_rate(measured, "HtoD", None)[0] == 53e9


def test_the_budget_says_the_hosts_device_sync_from_the_trace() -> None:
    """A sampler sees a host blocked in cudaStreamSynchronize as native code running (the
    sync loop read "Native-bound: 60%", "device sync 0.0%"): the budget says the host's time
    blocked in synchronisations beside, from the trace's runtime calls."""
    from perfstack.analysis.views.budget import time_budget

    report = _plain({"gpu_busy": 12.0, "gpu_time.idle": 88.0, "gpu_idle.host_wait": 70.0},
                    per_step={"gpu_sync_time": [0.002] * 5})
    report.metrics += [Metric("budget.native", 60.0, "%", "framework", "pyspy", Better.NEITHER),
                       Metric("budget.idle", 10.0, "%", "run", "pyspy", Better.NEITHER)]
    line = next(ln for ln in time_budget(report).lines if ln.part == "device_sync")
    assert line.share == 50.0 and line.source == "torch"
    assert line.title.endswith("2 ms a step")


def test_the_gpu_sessions_check_holds_a_loops_report_against_its_truth(tmp_path: Path) -> None:
    """record.sh's "loops" ends with check.py: each loop's verdict and device work a step held
    against the truth measured by hand (test_gpu_loops holds it on the loops recorded). Here
    the H200's resnet50 trace (its baseline's step
    time beside it) stands in for the GEMM loop, with the device work its trace holds as the
    truth: the verdict and the work pass, its kernels (convolutions, not only GEMMs) fail, the
    loops not recorded fail, and the exit says so."""
    import subprocess
    import sys

    from perfstack.report.files import save_report

    report = _h200_resnet()
    (tmp_path / "gemm").mkdir()
    save_report(report, tmp_path / "gemm" / "report.json")
    work = gpu_bound(report).device_work_s  # type: ignore[union-attr]
    assert work is not None and 0.016 < work < 0.018  # 17.0 ms (docs/accuracy.md)
    (tmp_path / "truth.jsonl").write_text(json.dumps(
        {"loop": "gemm", "device_s_per_step": 0.0170}) + "\n")
    done = subprocess.run([sys.executable, str(FIXTURES / "gpu-runs" / "check.py"),
                           str(tmp_path), str(tmp_path / "truth.jsonl")],
                          capture_output=True, text=True, timeout=60)
    lines = done.stdout.splitlines()
    assert done.returncode == 1, done.stderr
    assert lines[0] == "PASS gemm verdict: perfstack gpu.device-bound; truth gpu.device-bound"
    assert lines[1].startswith(f"PASS gemm device work a step: perfstack {work * 1e3:.2f} ms; "
                               "truth 17.00 ms"), lines
    assert lines[2].startswith("FAIL gemm kernels: perfstack "), lines
    assert "FAIL copy: no report" in lines[3] and lines[-1] == "2 of 8 checks passed", lines
