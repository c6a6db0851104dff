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
import itertools
import json
import math
import statistics
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from perfstack import hookimpl
from perfstack.backend import (
    Attachment,
    Availability,
    Backend,
    Collected,
    Option,
    Outcome,
    RunContext,
)
from perfstack.report import Better, Finding, Layer, Metric, Quantity, Report, Row
from perfstack.run import rundir

SOURCE = "nvml"
MIN_PERIOD = 0.02
TIMELINE = "nvml-timeline.jsonl"
#: Sample field -> (title, unit, better) for rows and metrics.
FIELDS: dict[str, tuple[str, str, Better]] = {
    "power_w": ("power (averaged by the driver)", "W", Better.LOWER),
    "power_instant_w": ("power (instantaneous)", "W", Better.LOWER),
    "util_gpu": ("GPU utilisation", "%", Better.HIGHER),
    "util_mem": ("memory bandwidth utilisation", "%", Better.NEITHER),
    "mem_used_b": ("memory used (all processes)", "B", Better.LOWER),
    "proc_mem_b": ("memory used by the workload", "B", Better.LOWER),
    "sm_clock_mhz": ("SM clock", "MHz", Better.NEITHER),
    "mem_clock_mhz": ("memory clock", "MHz", Better.NEITHER),
    "temp_c": ("temperature", "C", Better.LOWER),
}
FIELD_POWER_INSTANT = 186  # NVML_FI_DEV_POWER_INSTANT (recent drivers only)


def _p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, math.ceil(0.95 * len(ordered)) - 1)]


def energy(samples: list[dict[str, Any]]) -> tuple[float | None, str]:
    """Return (joules, how): the energy counter's difference, else the integral of power."""
    counter = [(s["t"], s["energy_j"]) for s in samples if s.get("energy_j") is not None]
    if len(counter) >= 2:
        return counter[-1][1] - counter[0][1], "counter"
    power = [(s["t"], s["power_w"]) for s in samples if s.get("power_w") is not None]
    if len(power) >= 2:
        return sum((t2 - t1) * (p1 + p2) / 2 for (t1, p1), (t2, p2)
                   in itertools.pairwise(power)), "integrated"
    return None, "too few samples"


def energy_between(samples: list[dict[str, Any]], t0: float, t1: float) -> float | None:
    """The energy counter's joules between two moments of the timeline (seconds from its
    start), each read between the samples around it; None where the counter does not cover
    them."""
    counter = [(float(s["t"]), float(s["energy_j"])) for s in samples
               if s.get("energy_j") is not None]
    if len(counter) < 2 or t0 < counter[0][0] or t1 > counter[-1][0] or t1 <= t0:
        return None

    def at(t: float) -> float:
        for (ta, ea), (tb, eb) in itertools.pairwise(counter):
            if ta <= t <= tb:
                return ea + (eb - ea) * (t - ta) / (tb - ta) if tb > ta else ea
        return counter[-1][1]

    return at(t1) - at(t0)


#: The steps on the timeline's clock: (start s, end s, how many steps).
StepSpan = tuple[float, float, int]
#: The shortest span of steps whose energy the counter can tell. It moves in steps of its own
#: (NVML updates it about as often as it is read at our period), so over a span of one or two
#: sample periods one of its steps is most of the figure: an H200 run of five 20 ms steps
#: (103 ms) read 6 J a step in one session and 12 J in the next.
MIN_SPAN_S = 0.5


def per_step_energy(samples: list[dict[str, Any]], steps: StepSpan,
                    period: float) -> tuple[float | None, str | None]:
    """(joules a step, None) from the counter across the steps' span, or (None, why)."""
    start, end, count = steps
    span = end - start
    if span < max(MIN_SPAN_S, 5 * period):
        return None, (f"the {count} measured steps lasted {span * 1e3:.0f} ms, too short for "
                      f"the energy counter (at least {max(MIN_SPAN_S, 5 * period):g} s): "
                      "measure more steps (--steps N)")
    spent = energy_between(samples, start, end)
    if spent is None:
        return None, "the energy counter does not cover the steps' span"
    return spent / count, None


def summarize(header: dict[str, Any], samples: list[dict[str, Any]],
              steps: StepSpan | None) -> tuple[list[Row], list[Metric], list[str]]:
    """Return hardware rows (mean, max, p95 per GPU and field), metrics, and notes; the
    energy per step from the counter across ``steps``, the steps' span on the timeline (the
    sampler ran on into the teardown: its whole energy over the steps counted the exit)."""
    rows: list[Row] = []
    metrics: list[Metric] = []
    notes: list[str] = []
    for gpu in header.get("gpus", []):
        idx = gpu["index"]
        mine = [s for s in samples if s.get("gpu") == idx]
        unsupported = gpu.get("unsupported", {})
        for field, (title, unit, better) in FIELDS.items():
            values = [float(s[field]) for s in mine if s.get(field) is not None]
            key = f"gpu{idx}.{field}"
            if not values:
                reason = unsupported.get(field, "no sample was taken")
                rows.append(Row(key, f"GPU {idx} {title}", SOURCE,
                                {"mean": Quantity.unsupported(unit, reason)}, {"gpu": gpu}))
                continue
            rows.append(Row(key, f"GPU {idx} {title}", SOURCE, {
                "mean": Quantity(statistics.fmean(values), unit),
                "max": Quantity(max(values), unit), "p95": Quantity(_p95(values), unit)},
                {"gpu": gpu, "samples": len(values)}))
            if field in ("power_w", "util_gpu", "proc_mem_b", "util_mem"):
                metrics.append(Metric(f"gpu{idx}_{field}_mean", statistics.fmean(values), unit,
                                      "hardware", SOURCE, better, samples=values,
                                      samples_of="intervals"))
        joules, how = energy(mine)
        if joules is not None:
            name = f"gpu{idx}_energy" + ("" if how == "counter" else "_integrated")
            metrics.append(Metric(name, joules, "J", "hardware", SOURCE, Better.LOWER))
            rows.append(Row(f"gpu{idx}.energy", f"GPU {idx} energy ({how})", SOURCE,
                            {"total": Quantity(joules, "J")}, {"gpu": gpu, "method": how}))
            if steps:
                per_step, why = per_step_energy(mine, steps, float(header.get("period_s", 0)))
                metrics.append(Metric(
                    f"gpu{idx}_joules_per_step", per_step, "J/step", "hardware", SOURCE,
                    Better.LOWER, reason=why,
                    description=f"the energy counter across the {steps[2]} steps' span "
                    f"({(steps[1] - steps[0]) * 1e3:.0f} ms), read between samples "
                    f"{header.get('period_s', 0):g} s apart, over the steps"))
            if how == "integrated":
                notes.append(f"GPU {idx}: no energy counter; energy integrated from power samples")
    if samples:
        notes.append(f"{len(samples)} samples every {header.get('period_s', 0):g} s")
    return rows, metrics, notes


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
        try:
            import pynvml as nv
        except ImportError:
            return Availability.no("nvidia-ml-py is not installed", "pip install nvidia-ml-py")
        try:
            nv.nvmlInit()
            count = nv.nvmlDeviceGetCount()
        except Exception as exc:
            return Availability.no(f"NVML cannot start: {exc} (no NVIDIA driver here)",
                                   "install the NVIDIA driver; without an NVIDIA GPU there is "
                                   "nothing for this backend to measure")
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
    """Flag a GPU whose mean utilisation or power draw is low while the workload ran."""
    found = []
    for row in report.layers.get(Layer.HARDWARE, []):
        if row.source != SOURCE or not row.key.endswith((".util_gpu", ".power_w")):
            continue
        mean = row.values.get("mean")
        if mean is None or mean.value is None:
            continue
        gpu = row.attrs.get("gpu") or {}
        label = f"GPU {gpu.get('index', '?')} ({gpu.get('name', 'unknown')})"
        if row.key.endswith(".util_gpu") and mean.value < LOW_UTIL:
            found.append(Finding(
                rule="gpu.low-utilisation",
                title=f"{label} was busy {mean.value:.0f}% of the time on average",
                layer="hardware", severity="warning",
                evidence=[f"NVML utilisation mean {mean.value:.1f}%, p95 "
                          f"{row.values['p95'].value:.1f}% over {row.attrs.get('samples')} "
                          "samples"],
                action=("the host does not keep the GPU fed: data loading, Python overhead "
                        "between kernels, synchronisation (.item(), .cpu()); larger batches or "
                        "CUDA graphs help"),
                source=SOURCE))
        limit = gpu.get("power_limit_w")
        if row.key.endswith(".power_w") and isinstance(limit, (int, float)) and limit > 0 \
                and mean.value < LOW_POWER_SHARE * limit:
            found.append(Finding(
                rule="gpu.low-power",
                title=f"{label} drew {mean.value:.0f} W of its {limit:.0f} W limit on average",
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
    try:
        import pynvml as nv
    except ImportError:
        return {"nvml": {"available": False, "reason": "nvidia-ml-py is not installed"}}
    try:
        nv.nvmlInit()
    except Exception as exc:
        return {"nvml": {"available": False, "reason": f"NVML cannot start: {exc}"}}
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
