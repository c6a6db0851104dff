"""perfstack env (the platform check), and the environment block every report carries."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import WORKLOADS, Result


def test_env_json_describes_this_machine(perfstack: Callable[..., Result],
                                         free_threaded_python: str) -> None:
    """CPU, ISA words, torch's own capability and build, profilers, free-threaded Pythons."""
    result = perfstack("env", "--json", timeout=300)
    assert result.code == 0, result.stderr
    env = json.loads(result.stdout)
    cpu = env["cpu"]
    assert cpu["logical_cpus"] >= 1 and cpu["physical_cores"] >= 1 and cpu["sockets"] >= 1
    flags = Path("/proc/cpuinfo").read_text()
    if " avx2 " in flags:
        assert "AVX2" in cpu["isa"]
    torch = env["torch"]
    assert torch["available"] and torch["version"].startswith("2.")
    assert torch["cpu_capability"] in ("DEFAULT", "AVX2", "AVX512", "ZVECTOR", "VSX", "NEON")
    assert torch["build_settings"]["USE_MKLDNN"] in ("ON", "OFF", "1", "0")
    assert torch["intra_op_threads"] >= 1
    # This machine: perf without hardware counters, py-spy allowed, no NVIDIA driver.
    assert env["perf"]["available"] is True
    assert env["perf"]["hardware_counters"] is False and env["perf"]["hardware_reason"]
    assert env["nvml"]["available"] is False and "NVML" in env["nvml"]["reason"]
    assert env["backends"]["pyspy"]["available"] is True
    assert env["backends"]["nvml"]["fix"]
    assert free_threaded_python in [i["path"] for i in env["free_threaded_interpreters"]]
    assert env["system"]["available"] and env["system"]["state"]
    assert env["noise_advice"]


def test_env_text_reads_like_a_platform_check(perfstack: Callable[..., Result]) -> None:
    """The text form names the sections and the ISA in plain words; -o writes a file."""
    result = perfstack("env", "--no-system", "-o", "env.txt", timeout=300)
    assert result.code == 0, result.stderr
    text = (result.cwd / "env.txt").read_text()
    for heading in ("Python", "CPU", "torch", "Thread settings", "Profilers"):
        assert f"\n{heading}\n" in f"\n{text}"
    assert "uses ISA" in text and "backend pyspy" in text


def test_every_report_carries_the_workload_torch_and_thread_settings(
        perfstack: Callable[..., Result]) -> None:
    """The torch the workload imported, and the thread variables it ran with, are recorded."""
    result = perfstack("run", "--plugins", "resources", "--repeat", "1", "--warmup", "0", "-q",
                       str(WORKLOADS / "torch_matmul_loop.py"),
                       env={"OMP_NUM_THREADS": "1"})
    assert result.code == 0, result.stderr
    env = result.report()["environment"]
    assert env["torch"]["version"].startswith("2.")
    assert env["torch"]["intra_op_threads"] == 1
    assert env["threads"]["OMP_NUM_THREADS"] == "1"
    assert env["packages"]["torch"] == env["torch"]["version"].split("+")[0] or \
        env["packages"]["torch"] == env["torch"]["version"]
    assert "physical_cores" in env["cpu"] and "perf" in env and "nvml" in env


def test_env_bad_output_path_is_one_line(perfstack: Callable[..., Result]) -> None:
    """An output path under a plain file: exit 7, one line."""
    result = perfstack("env", "--no-torch", "--no-system", "-o", "/dev/null/env.txt")
    assert result.code == 7, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_env_text_fits_80_columns_between_words() -> None:
    """Long values (perf's reason, NVML's fix, MKL's build string) ran past 80 columns."""
    from perfstack.machine.envinfo import render_text

    reason = ("<not supported>: this is a virtual machine whose hypervisor does not expose "
              "the CPU's performance counters")
    env = {"python": {"implementation": "CPython", "version": "3.11.7",
                      "executable": "/usr/bin/python3"},
           "cpu": {"model": "Intel(R) Xeon(R) Processor", "isa": ["SSE4.2", "AVX", "AVX2",
                   "FMA", "AVX-512F", "AVX-512BW", "AVX-512VL", "AVX-512DQ", "AVX-512 VNNI"]},
           "torch": {"available": False, "reason": "not checked"},
           "backends": {"nvml": {"available": False, "reason": "NVML cannot start: NVML "
                                 "Shared Library Not Found (no NVIDIA driver here)",
                                 "fix": "install the NVIDIA driver; without an NVIDIA GPU "
                                 "there is nothing for this backend to measure"}},
           "perf": {"version": "perf version 6.1.187", "hardware_reason": reason},
           "noise_advice": ["no isolated CPUs: other processes share the cores; pin the "
                            "workload (taskset) and repeat runs (perfstack run --repeat 5), "
                            "compare medians"]}
    text = render_text(env, 80)
    lines = text.splitlines()
    assert all(len(line) <= 80 for line in lines), [ln for ln in lines if len(ln) > 80]
    nvml = next(i for i, ln in enumerate(lines) if ln.startswith("  backend nvml"))
    assert lines[nvml + 1].startswith(" " * 25) and lines[nvml + 1][25] != " "  # under its value
    words = " ".join(ln.strip() for ln in lines[nvml:nvml + 4]).split()
    assert "nothing for this backend to measure)" in " ".join(words)  # no word cut
    advice = next(i for i, ln in enumerate(lines) if ln.startswith("  - no isolated"))
    assert lines[advice + 1].startswith("    ") and lines[advice + 1][4] != " "


def test_ceilings_named_by_a_fifo_or_a_device_are_not_read(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 57: PERFSTACK_CEILINGS naming a FIFO blocked `perfstack env` for ever, and
    /dev/zero was read until MemoryError (exit 70). Neither is a ceilings file: not read, and
    `env` says what the variable names."""
    import os
    import subprocess
    import sys

    from tests.conftest import perfstack_env

    fifo = tmp_path / "ceilings.fifo"
    os.mkfifo(fifo)
    huge = tmp_path / "huge.json"
    huge.write_bytes(b"[" * 2_000_000)
    check = ("from perfstack.machine import envinfo; "
             "from perfstack.machine.roofline import ceilings; "
             "assert ceilings.cached(None) is None; "
             "print(envinfo.ceilings.cached(None))")
    for named in (fifo, Path("/dev/zero"), huge):
        proc = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True,
                              timeout=60, env=perfstack_env({"PERFSTACK_CEILINGS": str(named)}))
        assert proc.returncode == 0 and proc.stdout.strip() == "None", (named, proc.stderr)
    from perfstack.machine import envinfo
    from perfstack.plugin.load import load_plugins

    monkeypatch.setenv("PERFSTACK_CEILINGS", "/dev/zero")
    said = envinfo.gather(load_plugins(), with_torch=False, with_system=False)["ceilings"]
    assert "PERFSTACK_CEILINGS=/dev/zero is not a ceilings file" in said["unknown"]
