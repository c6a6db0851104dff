"""The ``nvml`` backend: GPU power, energy, utilisation, memory, clocks and temperature.

A sampler thread in the driver polls NVML (the ``pynvml`` module of nvidia-ml-py) while the
workload runs, every ``--nvml-period`` seconds (default 0.1 s, never below 0.02 s: NVML's
power readings do not refresh faster). Each reading is guarded: a field this GPU or driver does
not offer is recorded as unsupported with NVML's own message, never as 0. Energy comes from the
total-energy counter where the GPU has one (Volta and later), else from integrating the power
samples, and the metric's name says which. The timeline is kept as ``nvml-timeline.jsonl``.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from perfstack import hookimpl
from perfstack.plugin.backend import (
    Attachment,
    Availability,
    Backend,
    Collected,
    Option,
    Outcome,
    RunContext,
)
from perfstack.report import Finding, Layer, Report
from perfstack.runfolder import rundir

from .figures import (
    SOURCE,
    StepSpan,
    summarize,
)

MIN_PERIOD = 0.02
TIMELINE = "nvml-timeline.jsonl"
FIELD_POWER_INSTANT = 186  # NVML_FI_DEV_POWER_INSTANT (recent drivers only)
#: What pynvml's nvmlInit says where the NVML library cannot be loaded.
NO_LIBRARY = "NVML Shared Library Not Found"
NOT_INSTALLED = "nvidia-ml-py is not installed"


def _started() -> tuple[Any, str | None]:
    """pynvml with NVML started (``nvmlInit``), or None and why not: nvidia-ml-py missing
    (``NOT_INSTALLED``), or 'NVML cannot start: ...' in pynvml's words. Where the driver's
    library that pynvml loads is missing (Linux), that is found without importing pynvml
    (16 ms, in every command that loads the plugins, on a machine with no NVIDIA driver)."""
    import importlib.util
    import sys

    if importlib.util.find_spec("pynvml") is None:
        return None, NOT_INSTALLED
    if sys.platform.startswith("linux"):
        import ctypes

        try:
            ctypes.CDLL("libnvidia-ml.so.1")  # (the name pynvml loads)
        except OSError:
            return None, f"NVML cannot start: {NO_LIBRARY}"
    import pynvml as nv

    try:
        nv.nvmlInit()
    except Exception as exc:
        return None, f"NVML cannot start: {exc}"
    return nv, None


def _guard(read: Callable[[], Any], field: str, unsupported: dict[str, str]) -> Any:
    try:
        return read()
    except Exception as exc:  # pynvml.NVMLError and friends: the field is not offered
        unsupported.setdefault(field, f"not supported here: {exc}")
        return None


class _Sampler(threading.Thread):
    """Polls every GPU until stopped; writes the timeline as it goes."""

    def __init__(self, path: Path, period: float, pid: int) -> None:
        super().__init__(name="perfstack-nvml", daemon=True)
        self.path, self.period, self.pid = path, period, pid
        self.halt = threading.Event()
        self.error: str | None = None

    def run(self) -> None:
        import pynvml as nv

        try:
            handles = [nv.nvmlDeviceGetHandleByIndex(i) for i in range(nv.nvmlDeviceGetCount())]
            gpus: list[dict[str, Any]] = []
            for i, h in enumerate(handles):
                gpus.append({"index": i, "name": str(nv.nvmlDeviceGetName(h)),
                             "driver": str(nv.nvmlSystemGetDriverVersion()), "unsupported": {}})
                with contextlib.suppress(Exception):  # not every board reports its limit
                    gpus[-1]["power_limit_w"] = nv.nvmlDeviceGetPowerManagementLimit(h) / 1e3
            start, epoch = time.monotonic(), time.time()
            head = {"period_s": self.period, "gpus": gpus, "start_epoch_s": epoch}
            with open(self.path, "w", encoding="utf-8") as out:
                out.write(json.dumps(head) + "\n")
                while not self.halt.is_set():
                    now = time.monotonic() - start
                    for gpu, h in zip(gpus, handles, strict=True):
                        out.write(json.dumps(self._read(nv, h, gpu, now)) + "\n")
                    out.flush()
                    self.halt.wait(self.period)
            # The header's list of unsupported fields is complete only now: rewrite it.
            lines = self.path.read_text("utf-8").splitlines()
            lines[0] = json.dumps(head)
            self.path.write_text("\n".join(lines) + "\n", "utf-8")
        except Exception as exc:
            self.error = f"{type(exc).__name__}: {exc}"

    def _read(self, nv: Any, h: Any, gpu: dict[str, Any], t: float) -> dict[str, Any]:
        u = gpu["unsupported"]

        def procs() -> int:
            running = nv.nvmlDeviceGetComputeRunningProcesses(h)
            return sum(p.usedGpuMemory or 0 for p in running if p.pid == self.pid)

        def instant() -> float:
            value = nv.nvmlDeviceGetFieldValues(h, [FIELD_POWER_INSTANT])[0]
            if value.nvmlReturn != 0:
                raise RuntimeError(f"field {FIELD_POWER_INSTANT} returned {value.nvmlReturn}")
            return float(value.value.uiVal) / 1e3

        util = _guard(lambda: nv.nvmlDeviceGetUtilizationRates(h), "util_gpu", u)
        mem = _guard(lambda: nv.nvmlDeviceGetMemoryInfo(h), "mem_used_b", u)
        energy_mj = _guard(lambda: nv.nvmlDeviceGetTotalEnergyConsumption(h), "energy_j", u)
        power_mw = _guard(lambda: nv.nvmlDeviceGetPowerUsage(h), "power_w", u)
        return {
            "t": t, "gpu": gpu["index"],
            "power_w": power_mw / 1e3 if power_mw is not None else None,
            "power_instant_w": _guard(instant, "power_instant_w", u),
            "energy_j": energy_mj / 1e3 if energy_mj is not None else None,
            "util_gpu": util.gpu if util is not None else None,
            "util_mem": util.memory if util is not None else None,
            "mem_used_b": mem.used if mem is not None else None,
            "proc_mem_b": _guard(procs, "proc_mem_b", u),
            "sm_clock_mhz": _guard(lambda: nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_SM),
                                   "sm_clock_mhz", u),
            "mem_clock_mhz": _guard(lambda: nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_MEM),
                                    "mem_clock_mhz", u),
            "temp_c": _guard(lambda: nv.nvmlDeviceGetTemperature(h, nv.NVML_TEMPERATURE_GPU),
                             "temp_c", u),
        }

    def stop(self) -> None:
        """Stop sampling and wait for the last write."""
        self.halt.set()
        self.join(timeout=10)


def read_timeline(path: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Return the sampler's header and samples (``t``: seconds from its start) from its
    ``nvml-timeline.jsonl``: the one reader of the format (collect, the HTML charts and the
    Perfetto trace use it). A line cut short when the sampler was stopped is skipped; a
    missing or torn header gives ``({}, [])``."""
    try:
        lines = path.read_text("utf-8", errors="replace").splitlines()
    except OSError:
        return {}, []
    try:
        header = json.loads(lines[0]) if lines else {}
    except ValueError:
        return {}, []
    samples = []
    for line in lines[1:]:
        try:
            samples.append(json.loads(line))
        except ValueError:
            continue
    return (header if isinstance(header, dict) else {}), [s for s in samples
                                                          if isinstance(s, dict)]


class NvmlBackend(Backend):
    """NVML sampling of every GPU while the workload runs (hardware layer)."""

    name = "nvml"
    per_rank = False  # sees the whole torchrun job at once
    layers = (Layer.HARDWARE,)
    description = "NVML: GPU power, energy, utilisation, memory, clocks, temperature over time"
    packages = ("nvidia-ml-py",)
    options = (Option("period", "seconds between samples (at least 0.02)", 0.1, float,
                      minimum=0.02, maximum=60),)

    def check(self) -> Availability:
        """Available when nvidia-ml-py imports and NVML initializes (a driver and a GPU)."""
        nv, why = _started()
        if why == NOT_INSTALLED:
            return Availability.no(why, "pip install nvidia-ml-py")
        fix = ("install the NVIDIA driver; without an NVIDIA GPU there is nothing for this "
               "backend to measure")
        if why is not None:
            return Availability.no(f"{why} (no NVIDIA driver here)", fix)
        try:
            count = nv.nvmlDeviceGetCount()
        except Exception as exc:
            return Availability.no(f"NVML cannot start: {exc} (no NVIDIA driver here)", fix)
        if count == 0:
            return Availability.no("NVML sees no GPU", "check the driver and CUDA_VISIBLE_DEVICES")
        return Availability.yes()

    def attach(self, ctx: RunContext, pid: int) -> Attachment:
        """Start the sampler thread for this run."""
        period = max(MIN_PERIOD, float(ctx.options.get("period") or 0.1))
        sampler = _Sampler(ctx.artifact_dir / TIMELINE, period, pid)
        sampler.start()
        return sampler

    def collect(self, ctx: RunContext, outcome: Outcome | None) -> Collected:
        """Summarize the timeline; joules per step when the workload marked steps."""
        path = ctx.artifact_dir / TIMELINE
        if not path.is_file():
            return Collected(notes=["the sampler wrote nothing"])
        header, samples = read_timeline(path)
        if not header:
            return Collected(notes=["the sampler's timeline has no readable header: it was "
                                    "stopped before it wrote one"])
        rows, metrics, notes = summarize(header, samples, _steps_on_timeline(ctx, header))
        return Collected(rows={Layer.HARDWARE: rows}, metrics=metrics, notes=notes,
                         artifacts={"timeline": path})


def _steps_on_timeline(ctx: RunContext, header: dict[str, Any]) -> StepSpan | None:
    """The run's steps (under --steps the measured ones) on the timeline's clock, or None.
    The timeline's start is in its header; a timeline of an older perfstack has none, and
    its sampler started when the measured window opened (--steps), which stands for it."""
    folder = rundir.RunFolder(ctx.artifact_dir)
    span = folder.steps_window(ctx.steps.warmup if ctx.steps else None,
                               ctx.steps.measured if ctx.steps else None)
    start = header.get("start_epoch_s")
    if not isinstance(start, (int, float)):
        start = folder.window_opened() if ctx.steps is not None else None
    if span is None or start is None:
        return None
    return span[0] - start, span[1] - start, span[2]


#: Mean GPU utilisation (%) below which the device is starved.
LOW_UTIL = 50.0
#: Mean power draw as a share of the power limit below which the device is lightly loaded.
LOW_POWER_SHARE = 0.3


@hookimpl
def perfstack_findings(report: Report) -> list[Finding]:
    """Flag a GPU whose mean utilisation or power draw is low over the measured steps (over
    the whole run only where the workload marked no step, and said so). Where a trace
    measured the device's busy share over the steps (``gpu_busy``), that finer figure is the
    verdict's and NVML's utilisation stands beside it, never against it."""
    found = []
    traced = report.metric("gpu_busy") is not None
    for row in report.layers.get(Layer.HARDWARE, []):
        if row.source != SOURCE or not row.key.endswith((".util_gpu", ".power_w")):
            continue
        mean = row.values.get("mean")
        if mean is None or mean.value is None:
            continue
        gpu = row.attrs.get("gpu") or {}
        label = f"GPU {gpu.get('index', '?')} ({gpu.get('name', 'unknown')})"
        window = str(row.attrs.get("window") or "the whole run")
        steps = "measured steps" in window
        if row.key.endswith(".util_gpu") and mean.value < LOW_UTIL and not traced:
            found.append(Finding(
                rule="gpu.low-utilisation",
                title=(f"{label} was busy {mean.value:.0f}% of "
                       + ("its measured steps" if steps else "the whole run, start-up "
                          "included")),
                layer="hardware", severity="warning" if steps else "info",
                evidence=[f"NVML utilisation mean {mean.value:.1f}%, p95 "
                          f"{row.values['p95'].value:.1f}% over {row.attrs.get('samples')} "
                          f"samples of {window}"],
                action=("the host does not keep the GPU fed: data loading, Python overhead "
                        "between kernels, synchronisation (.item(), .cpu()); larger batches or "
                        "CUDA graphs help"),
                source=SOURCE))
        limit = gpu.get("power_limit_w")
        if row.key.endswith(".power_w") and isinstance(limit, (int, float)) and limit > 0 \
                and mean.value < LOW_POWER_SHARE * limit and not traced:
            found.append(Finding(
                rule="gpu.low-power",
                title=f"{label} drew {mean.value:.0f} W of its {limit:.0f} W limit over "
                      + ("its measured steps" if steps else "the whole run"),
                layer="hardware", severity="info",
                evidence=[f"NVML power mean {mean.value:.1f} W, max "
                          f"{row.values['max'].value:.1f} W, limit {limit:.0f} W"],
                action=("the device is lightly loaded: kernels too small or too few to use "
                        "its SMs; batch more work per kernel"),
                source=SOURCE))
    return found


@hookimpl
def perfstack_backends() -> list[Backend]:
    """Provide the nvml backend."""
    return [NvmlBackend()]


@hookimpl
def perfstack_environment() -> dict[str, Any]:
    """Add the NVIDIA driver and GPUs (or why NVML is not usable) to the environment block."""
    nv, why = _started()
    if why is not None:
        return {"nvml": {"available": False, "reason": why}}
    info: dict[str, Any] = {"available": True, "gpus": []}
    readers = {"driver": nv.nvmlSystemGetDriverVersion,
               "cuda_driver": nv.nvmlSystemGetCudaDriverVersion_v2}
    for key, read in readers.items():
        try:
            info[key] = str(read())
        except Exception:
            continue
    try:
        for i in range(nv.nvmlDeviceGetCount()):
            handle = nv.nvmlDeviceGetHandleByIndex(i)
            gpu: dict[str, Any] = {"index": i}
            fields: dict[str, Callable[[Any], Any]] = {
                "name": lambda h: str(nv.nvmlDeviceGetName(h)),
                      "memory_total_mib": lambda h: nv.nvmlDeviceGetMemoryInfo(h).total >> 20,
                      "power_limit_w": lambda h: nv.nvmlDeviceGetPowerManagementLimit(h) / 1e3}
            for key, field in fields.items():
                try:
                    gpu[key] = field(handle)
                except Exception:
                    continue
            info["gpus"].append(gpu)
    finally:
        with contextlib.suppress(Exception):
            nv.nvmlShutdown()
    return {"nvml": info}
