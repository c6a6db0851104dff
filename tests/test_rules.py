"""The finding rules: each on a recorded real run of the workload that does what it is for
(tests/workloads/rules_zoo.py and the split workloads, recorded alone on the test machine), and
the rules whose inputs this machine cannot produce (hardware counters, a GPU) on a recorded report
with those figures set. That findings are computed and written on a live run is tested by the
run tests (test_reliability.py, test_busy_machine.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from perfstack.analysis.views.budget import hardware_beside
from perfstack.plugin.load import load_plugins
from perfstack.report import Better, Layer, Metric, Quantity, Report, Row
from perfstack.report.files import load_report
from tests.conftest import ROOT, Result, backend

RECORDED = ROOT / "tests/fixtures/reports"


def _rules_of(name: str) -> dict[str, Any]:
    """The findings today's rules give on a recorded real run (tests/fixtures/reports/README.md
    has the command of each): the same inputs every time, so a verdict is the code's alone."""
    report = load_report(RECORDED / name)
    return {f.rule: f for f in load_plugins().findings(report)}


def test_python_bound() -> None:
    found = _rules_of("split_3_to_1.json.gz")
    assert "time.python-bound" in found, found
    assert found["time.python-bound"].layer == "python"
    assert any("budget.interpreter" in e for e in found["time.python-bound"].evidence)


def test_many_small_ops_are_dispatch_bound() -> None:
    found = _rules_of("rules/tiny_ops.json.gz")
    assert "torch.small-ops" in found, found
    assert "time.dispatch-bound" in found, found  # perf: libtorch outside kernels dominates
    assert found["time.dispatch-bound"].severity == "warning"


def test_waiting_main_thread() -> None:
    found = _rules_of("rules/sleepy.json.gz")
    assert "time.waiting" in found, found
    assert "time.python-bound" not in found


def test_oversubscribed_threads() -> None:
    found = _rules_of("rules/threads.json.gz")
    assert "threads.oversubscribed" in found, found
    assert "OMP_NUM_THREADS" in found["threads.oversubscribed"].action


def test_page_fault_rate() -> None:
    found = _rules_of("rules/faults.json.gz")
    assert "memory.page-faults" in found, found


def test_data_loading_in_the_main_process() -> None:
    found = _rules_of("rules/loader.json.gz")
    assert "python.data-loading" in found, found
    assert "num_workers" in found["python.data-loading"].action


def test_data_loading_is_a_share_of_the_work_not_of_the_imports() -> None:
    """The same run as if its loop were short beside its imports: 70% of its wall time in
    start-up, its DataLoader 14% of all samples. Of the samples outside start-up that is
    14 x (70 + 16) / 16 = 75%: a finding, where a share of all the samples said nothing."""
    import dataclasses

    report = load_report(RECORDED / "rules/loader.json.gz")
    budget = {"budget.startup": 70.0, "budget.interpreter": 12.0, "budget.native": 4.0}
    report.metrics = [dataclasses.replace(m, value=budget[m.name]) if m.name in budget else m
                      for m in report.metrics]
    loader = [r for r in report.layers[Layer.PYTHON]
              if "torch/utils/data/" in str(r.attrs.get("file", ""))]
    for row in loader:
        row.values["total_share"] = Quantity(14.0, "%")
    found = {f.rule: f for f in load_plugins().findings(report)}
    assert found["python.data-loading"].title == (
        "data loading: 75% of the main thread's running time is inside torch's DataLoader")
    assert "14.0% of the workload process's samples" in found["python.data-loading"].evidence[0]
    for m in report.metrics:  # all of it running: 14% of the work, no finding
        if m.name == "budget.startup":
            m.value = 0.0
    assert "python.data-loading" not in {f.rule for f in load_plugins().findings(report)}


def test_importing_the_dataloader_or_having_workers_is_not_loading_in_the_main_process(
        ) -> None:
    """The loader run's DataLoader rows as if they were the import of torch.utils.data
    (<module> frames: start-up; a run beside DataLoader workers once read 32% 'inside the
    DataLoader' that way), then beside a DataLoader whose workers do the loading (advising
    workers to it is wrong): no data-loading finding either way."""
    import dataclasses

    def loading(report: Report) -> bool:
        return "python.data-loading" in {f.rule for f in load_plugins().findings(report)}

    report = load_report(RECORDED / "rules/loader.json.gz")
    assert loading(report)
    rows = report.layers[Layer.PYTHON]
    data = [r for r in rows if "torch/utils/data/" in str(r.attrs.get("file", ""))]
    importing = load_report(RECORDED / "rules/loader.json.gz")
    importing.layers[Layer.PYTHON] = [
        dataclasses.replace(r, attrs={**r.attrs, "function": "<module>"}) if r in data else r
        for r in rows]
    assert not loading(importing)
    workers = load_report(RECORDED / "rules/loader.json.gz")
    step = next(r for r in data if r.attrs.get("function") == "_BaseDataLoaderIter.__next__")
    workers.layers[Layer.PYTHON].append(dataclasses.replace(
        step, key="_MultiProcessingDataLoaderIter._next_data (x.py:1)",
        attrs={**step.attrs, "function": "_MultiProcessingDataLoaderIter._next_data"}))
    assert not loading(workers)


def test_quiet_runs_raise_none_of_them() -> None:
    """The 60/40 workload is none of these things."""
    found = _rules_of("rules/quiet.json.gz")
    for rule in ("time.waiting", "threads.oversubscribed", "memory.page-faults",
                 "python.data-loading", "torch.small-ops", "time.dispatch-bound",
                 "time.python-bound"):
        assert rule not in found, found[rule]


def _recorded(metrics: list[Metric], hardware: list[Row] | None = None) -> Report:
    """The recorded real report (tests/fixtures) with the figures a rule reads set."""
    report = load_report(ROOT / "tests/fixtures/reports/v1-busy.json")
    report.metrics = metrics
    report.layers[Layer.HARDWARE] = hardware or []
    return report


def _findings(report: Report) -> dict[str, Any]:
    plugins = load_plugins()
    return {f.rule: f for answer in plugins.call_each("perfstack_findings", report=report)
            for f in (answer.result or [])}


def test_low_ipc_where_counted():
    low = _recorded([Metric("ipc", 0.45, "instructions per cycle", "hardware", "perf",
                            Better.HIGHER),
                     Metric("cache_miss_rate", 31.0, "%", "hardware", "perf", Better.LOWER)])
    found = _findings(low)
    assert "hardware.low-ipc" in found
    assert any("cache_miss_rate" in e for e in found["hardware.low-ipc"].evidence)
    assert "hardware.low-ipc" not in _findings(_recorded([Metric(
        "ipc", 2.1, "instructions per cycle", "hardware", "perf", Better.HIGHER)]))
    uncounted = _recorded([], [Row("perf.instructions", "instructions", "perf", {
        "value": Quantity.unsupported("count", "<not supported>: a virtual machine")})])
    assert "hardware.low-ipc" not in _findings(uncounted)  # not counted: no finding...
    ipc = next(m for m in hardware_beside(uncounted) if m.name == "ipc")  # ...and says why
    assert ipc.value is None and ipc.reason is not None
    assert ipc.reason.startswith("<not supported>")


def test_low_gpu_utilisation_and_power_and_idle_device():
    gpu = {"index": 0, "name": "NVIDIA H100 80GB HBM3", "power_limit_w": 700.0}
    rows = [Row("gpu0.util_gpu", "GPU 0 utilisation", "nvml",
                {"mean": Quantity(23.0, "%"), "max": Quantity(60.0, "%"),
                 "p95": Quantity(55.0, "%")}, {"gpu": gpu, "samples": 40}),
            Row("gpu0.power_w", "GPU 0 power", "nvml",
                {"mean": Quantity(120.0, "W"), "max": Quantity(180.0, "W"),
                 "p95": Quantity(170.0, "W")}, {"gpu": gpu, "samples": 40})]
    found = _findings(_recorded([], rows))
    assert {"gpu.low-utilisation", "gpu.low-power"} <= set(found), found
    assert "700 W" in found["gpu.low-power"].title
    # rows of no window are of the whole run: said so, and only as information
    assert found["gpu.low-utilisation"].title.endswith("of the whole run, start-up included")
    assert found["gpu.low-utilisation"].severity == "info"
    # a trace's busy share over the steps is the verdict: NVML's never contradicts it
    traced = _findings(_recorded(
        [Metric("gpu_busy", 31.0, "%", "kernel", "torch", Better.HIGHER)], rows))
    assert "gpu.low-utilisation" not in traced and "time.device-idle" in traced
    # nor does its power name a cause of its own (a copy-bound loop was told to batch more
    # work per kernel): the verdict names it, and the power stands in its evidence
    assert "gpu.low-power" not in traced
    traced_with_power = _recorded(
        [Metric("gpu_busy", 31.0, "%", "kernel", "torch", Better.HIGHER),
         Metric("gpu0_power_w_mean", 120.0, "W", "hardware", "nvml", Better.NEITHER,
                description="NVML's power, mean over the 10 measured steps (2.1 s)")], rows)
    idle = _findings(traced_with_power)["time.device-idle"]
    assert ("gpu0_power_w_mean 120 W (from nvml, in its own run, over the 10 measured steps "
            "(2.1 s))") in idle.evidence, idle.evidence


def _ops_report(rows: list[tuple[str, int, float]], busy: float | None = None) -> Any:
    """A recorded report whose torch figures are replaced: 3 profiled steps of 2 ms and
    the given ops (name, calls, self seconds over the 3 steps)."""
    from perfstack.report import Better, Layer, Metric, Quantity, Row
    from perfstack.report.files import load_report
    from tests.conftest import ROOT

    report = load_report(ROOT / "tests/fixtures/reports/ab_work/base.json.gz")
    report.layers[Layer.FRAMEWORK] = [
        Row(name, name, "torch", {"calls": Quantity(calls, "count"), "self": Quantity(t, "s")},
            {"op": name}) for name, calls, t in rows]
    calls = sum(c for _, c, _ in rows)
    spent = sum(t for _, _, t in rows)
    report.metrics = [
        Metric("torch_step_time", 2e-3, "s", "framework", "torch", Better.LOWER,
               samples=[2e-3] * 3, samples_of="steps"),
        Metric("torch_op_calls", calls, "count", "framework", "torch", Better.NEITHER),
        Metric("torch_ops_self_time", spent, "s", "framework", "torch", Better.LOWER)]
    if busy is not None:
        report.metrics.append(Metric("gpu_busy", busy, "%", "hardware", "torch",
                                     Better.HIGHER))
    return report


def test_small_ops_is_said_only_where_fusing_them_could_help() -> None:
    """197 ops a step averaging 8 µs: small ops, said with the op mix. The same count where
    68% of the op time is 24 matmuls of ~130 µs: the mean hid them, and fusing the small ones
    cannot help much: not said. A GPU busy 84% of the step bounds it, not the dispatch."""
    from perfstack_plugins.torchprof import perfstack_findings

    small = [(f"aten::op{i}", 3, 24e-6) for i in range(197)]
    [found] = perfstack_findings(_ops_report(small))
    assert found.rule == "torch.small-ops" and "197 per step" in found.title, found
    assert "take 0% of the op time" in found.evidence[-1], found.evidence
    mixed = [(f"aten::op{i}", 3, 3.4e-6) for i in range(189)] + [
        ("aten::mm [[64, 512], [512, 512]]", 24, 24 * 130e-6)]
    assert perfstack_findings(_ops_report(mixed)) == []
    assert perfstack_findings(_ops_report(small, busy=84.0)) == []


def test_threads_that_take_turns_on_the_gil_are_the_answer_not_waiting() -> None:
    """Four pure-Python threads, the main thread joining them: py-spy's main-thread budget
    says it waits 89%, and the report once answered 'Waiting-bound' with DataLoader advice.
    Its threads ran all along holding the GIL, the process used one CPU: GIL-bound."""
    from perfstack.analysis.view import build

    report = load_report(RECORDED / "rules/threads_gil.json.gz")
    found = {f.rule: f for f in load_plugins().findings(report)}
    assert "time.threads-contend" in found and "time.waiting" not in found
    gil = found["time.threads-contend"]
    assert gil.title.startswith("GIL-bound: 4 threads run Python")
    assert "ProcessPoolExecutor" in gil.action
    report.findings = list(found.values())
    headline = build(report).headline
    assert headline.bound == "contended"
    assert headline.hottest is not None and headline.hottest.threads == 4


def test_a_thread_that_never_held_the_gil_does_not_hide_the_pool_that_takes_turns() -> None:
    """Issue 72: a 4-thread pool read "Waiting-bound: the main thread waits 89%" where 2
    threads read GIL-bound: in its data one more thread, nameless, held the GIL in none of
    its samples and pulled the threads' mean GIL share under the rule's. A thread that ran no
    Python takes no turn on the GIL: the pool is GIL-bound at any count."""

    report = load_report(RECORDED / "rules/threads_gil.json.gz")
    python = report.layers[Layer.PYTHON]
    for row in python:  # four workers contending harder: each holds it 55-60% of samples
        if row.attrs.get("kind") == "thread" and "(work)" in row.name:
            row.values["gil_share"] = Quantity(57.0, "%")
    python.append(Row("thread Thread 32495", "thread Thread 32495", "pyspy",
                      {"samples": Quantity(300, "count"), "time": Quantity(1.2, "s"),
                       "gil_share": Quantity(0.0, "%")}, {"kind": "thread"}))
    found = {f.rule: f for f in load_plugins().findings(report)}
    assert "time.threads-contend" in found and "time.waiting" not in found
    assert found["time.threads-contend"].title.startswith("GIL-bound: 4 threads run Python")


def test_a_backend_for_a_library_the_workload_never_imports_is_not_run(
        perfstack: Callable[..., Result]) -> None:
    """torch's backend on a script without torch: its run would import torch only to see
    nothing (5.9x 'slower' on a short script); the baseline said torch was never imported."""
    result = perfstack("run", "--plugins", "torch,resources", "--repeat", "1", "--warmup", "0",
                       "-q", str(ROOT / "tests" / "workloads" / "fixed_pool.py"), "--",
                       "--items", "8")
    assert result.code == 0, result.stderr
    report = result.report()
    torch = backend(report, "torch")
    assert torch["status"] == "skipped" and "never imported torch" in torch["reason"], torch
    assert [r["id"] for r in report["run"]["runs"]] == ["baseline-1"]


def test_an_optimizer_that_updates_one_parameter_at_a_time_is_told_to_fuse() -> None:
    """Adam over 96 small parameters, foreach off: its per-parameter loop is 53% of the main
    thread's running time (by hand: 5.44 ms a step, 3.01 ms with fused=True)."""
    report = load_report(RECORDED / "rules/optimizer_loop.json.gz")
    found = {f.rule: f for f in load_plugins().findings(report)}
    loop = found["python.optimizer-loop"]
    assert loop.title.startswith("Adam updates its parameters one at a time: 53%")
    assert "fused=True" in loop.action
    assert any("_single_tensor_adam" in e for e in loop.evidence)
    report.metrics = [m for m in report.metrics if m.name != "optimizer_loop_share"]
    assert "python.optimizer-loop" not in {f.rule for f in load_plugins().findings(report)}
