"""The perf backends: perf stat's counters and perf record's hot code, on real perf runs."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from perfstack_plugins.linuxperf.backend import derived, parse_stat
from perfstack_plugins.linuxperf.symbols import group_of, parse_report

from tests.conftest import WORKLOADS, backend

FIXTURES = Path(__file__).parent / "fixtures" / "perf"


def test_unsupported_counters_are_unknown_not_zero():
    counters = {c.event: c for c in parse_stat((FIXTURES / "stat_vm_without_pmu.csv").read_text(),
                                               "no PMU in this VM")}
    assert counters["cycles"].value is None and counters["cycles"].reason == "no PMU in this VM"
    assert counters["task-clock"].value == pytest.approx(108.14)
    assert counters["page-faults"].value == 1309
    names = [m.name for m in derived(counters, wall_s=0.2)]
    assert names == ["cpus_utilized"]  # no IPC or miss rate from counters that were not read


def test_counted_and_multiplexed_counters():
    counters = {c.event: c for c in parse_stat(
        (FIXTURES / "stat_counted_multiplexed.csv").read_text())}
    assert counters["branches"].running == 80.0
    assert counters["L1-dcache-load-misses"].value is None
    assert "not counted" in (counters["L1-dcache-load-misses"].reason or "")
    metrics = {m.name: m for m in derived(counters, wall_s=1.8)}
    assert metrics["ipc"].value == pytest.approx(16934571004 / 8693016215)
    assert metrics["branch_miss_rate"].value == pytest.approx(100 * 3102448 / 421118870)
    assert "cache_miss_rate" not in metrics  # cache-references were not measured


def test_library_groups():
    assert group_of("libpython3.11.so.1.0") == "interpreter (libpython)"
    assert group_of("libtorch_cpu.so") == "framework (libtorch, libc10)"
    assert group_of("libgomp.so.1") == "OpenMP runtime (spin/wait)"
    assert group_of("[JIT] tid 12485") == "JIT code (oneDNN kernels)"
    assert group_of("[kernel.kallsyms]") == "OS kernel"
    assert group_of("libfoo.so") == "other"
    rows = parse_report("# comment\n 54.37%\t 927\tlibpython3.11.so.1.0\t[.] _PyEval_Eval\n")
    assert rows == [(54.37, 927, ["libpython3.11.so.1.0", "[.] _PyEval_Eval"])]


needs_perf = pytest.mark.skipif(shutil.which("perf") is None, reason="perf is not installed")


@needs_perf
def test_perf_stat_and_record_on_a_real_run(perfstack):
    result = perfstack("run", "-q", "--repeat", "0", "--warmup", "0", "--plugins",
                       "perf,perftop", str(WORKLOADS / "busy.py"))
    assert result.code == 0, result.stderr
    report = result.report()
    hardware = {r["key"]: r for r in report["layers"]["hardware"]}
    clock = hardware["perf.task-clock"]["values"]["value"]
    assert clock["unit"] == "s" and clock["value"] > 0.05
    cycles = hardware["perf.cycles"]["values"]["value"]
    perf = backend(report, "perf")
    if cycles["value"] is None:  # this machine: a VM without a PMU
        assert "not supported" in cycles["reason"]
        assert not any(m["name"] == "ipc" for m in report["metrics"])
        # Not "ok": some counters could not be read, and the reason says which.
        assert perf["status"] == "partial" and "cycles" in perf["reason"], perf
    else:
        assert perf["status"] == "ok", perf
    assert any(m["name"] == "cpus_utilized" for m in report["metrics"])
    assert backend(report, "perftop")["status"] == "ok"
    groups = {r["name"]: r for r in report["layers"]["kernel"]
              if r["attrs"].get("kind") == "library-group"}
    # A pure-Python loop: the interpreter dominates the native profile.
    assert groups["interpreter (libpython)"]["values"]["share"]["value"] > 40
    symbols = [r for r in report["layers"]["kernel"] if r["attrs"].get("kind") == "symbol"]
    assert symbols and symbols[0]["values"]["cpu_time"]["value"] > 0
    # The collector's time by phase, timed inside the workload of perf record's run.
    gc_times = {m["name"]: m for m in report["metrics"] if m["name"].startswith("gc_time_")}
    assert set(gc_times) == {"gc_time_run", "gc_time_imports"}, gc_times
    assert all(m["value"] >= 0 and m["source"] == "perftop" for m in gc_times.values())
    assert any("garbage collections timed" in n for n in backend(report, "perftop")["notes"])


def test_no_perf_binary_is_unavailable_with_the_fix(monkeypatch):
    from perfstack_plugins.linuxperf.backend import PerfStatBackend

    monkeypatch.setenv("PATH", "/nonexistent")
    available = PerfStatBackend().check()
    assert not available.ok and "no perf binary" in (available.reason or "")
    assert "linux-perf" in (available.fix or "")
