"""The NVML sampler's figures, from its timeline: each GPU's rows (mean, max, p95 of every
field), its metrics, and its energy, from the total-energy counter where the GPU has one
(over the whole run, and a step's across the measured steps' span), else integrated from the
power samples.

The figures are of the measured steps: the samples taken inside their span (on the timeline's
own clock), never a mean over the process's start-up and teardown, when the GPU idles (a GPU
99% busy in its steps read 14% over the whole run). A span that holds fewer than
``MIN_SAMPLES`` samples is too short for NVML to say, and one shorter than the period the
driver averages a field over (``AVERAGED_OVER_S``) too short for that field: its figures are
unknown, with the fix.
Without steps (the workload marked none), the whole run, said so. The whole run's mean and
maximum stay in each row beside (``run_mean``, ``run_max``)."""

from __future__ import annotations

import itertools
import math
import statistics
from typing import Any

from perfstack.report import Better, Metric, Quantity, Row

SOURCE = "nvml"
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


#: The fewest samples inside the measured steps that NVML's figures of them are read from.
MIN_SAMPLES = 3
#: The fields the driver averages over a period of its own before NVML reads them, and that
#: period's longest (seconds): utilisation "over the past sample period, between 1 second and
#: 1/6 second depending on the product", power averaged over a second. Over measured steps
#: shorter than that a sample still reads the time before them: on an H200, 8 bf16 GEMMs a
#: step (the device 96% busy by hand) read 3% utilisation and 101 W averaged, against 709 W
#: instantaneous, over 10 steps of 127 ms sampled every 0.02 s.
AVERAGED_OVER_S = {"util_gpu": 1.0, "util_mem": 1.0, "power_w": 1.0}


def _window(steps: StepSpan | None) -> str:
    """What the rows are over."""
    if steps is None:
        return "the whole run (the workload marked no step)"
    start, end, count = steps
    return f"the {count} measured steps ({(end - start) * 1e3:.0f} ms)"


def _over(samples: list[dict[str, Any]], steps: StepSpan | None) -> list[dict[str, Any]]:
    return samples if steps is None else [s for s in samples
                                          if steps[0] <= float(s["t"]) <= steps[1]]


def _too_few(steps: StepSpan, period: float, found: int) -> str:
    span = (steps[1] - steps[0]) * 1e3
    return (f"the {steps[2]} measured steps lasted {span:.0f} ms: {found} NVML sample(s) "
            f"inside them (every {period:g} s), under {MIN_SAMPLES}: measure more steps "
            "(--steps N) or sample more often (--nvml-period)")


def _unknown_over(steps: StepSpan | None, field: str, period: float,
                  found: int) -> str | None:
    """Why NVML cannot say a field over the measured steps (None: it can)."""
    if steps is None:
        return None
    if steps[1] - steps[0] < AVERAGED_OVER_S.get(field, 0.0):
        return (f"the {steps[2]} measured steps lasted {(steps[1] - steps[0]) * 1e3:.0f} ms, "
                f"under the {AVERAGED_OVER_S[field]:g} s NVML averages this over: its samples "
                "still read the time before them; measure more steps (--steps N)")
    return _too_few(steps, period, found) if found < MIN_SAMPLES else None


def summarize(header: dict[str, Any], samples: list[dict[str, Any]],
              steps: StepSpan | None) -> tuple[list[Row], list[Metric], list[str]]:
    """Return hardware rows (mean, max, p95 per GPU and field, over the measured steps),
    metrics, and notes; the energy per step from the counter across ``steps``, the steps'
    span on the timeline (the sampler ran on into the teardown: its whole energy over the
    steps counted the exit)."""
    rows: list[Row] = []
    metrics: list[Metric] = []
    notes: list[str] = []
    period = float(header.get("period_s", 0) or 0)
    window = _window(steps)
    for gpu in header.get("gpus", []):
        idx = gpu["index"]
        mine = [s for s in samples if s.get("gpu") == idx]
        inside = _over(mine, steps)
        unsupported = gpu.get("unsupported", {})
        for field, (title, unit, better) in FIELDS.items():
            every = [float(s[field]) for s in mine if s.get(field) is not None]
            values = [float(s[field]) for s in inside if s.get(field) is not None]
            key = f"gpu{idx}.{field}"
            if not every:
                reason = unsupported.get(field, "no sample was taken")
                rows.append(Row(key, f"GPU {idx} {title}", SOURCE,
                                {"mean": Quantity.unsupported(unit, reason)}, {"gpu": gpu}))
                continue
            run = {"run_mean": Quantity(statistics.fmean(every), unit),
                   "run_max": Quantity(max(every), unit)}
            attrs = {"gpu": gpu, "samples": len(values), "window": window}
            why = _unknown_over(steps, field, period, len(values))
            if why is not None:
                rows.append(Row(key, f"GPU {idx} {title}", SOURCE,
                                {"mean": Quantity.unsupported(unit, why), **run}, attrs))
                if field in ("power_w", "util_gpu", "proc_mem_b", "util_mem"):
                    metrics.append(Metric(f"gpu{idx}_{field}_mean", None, unit, "hardware",
                                          SOURCE, better, reason=why))
                continue
            rows.append(Row(key, f"GPU {idx} {title}", SOURCE, {
                "mean": Quantity(statistics.fmean(values), unit),
                "max": Quantity(max(values), unit), "p95": Quantity(_p95(values), unit),
                **run}, attrs))
            if field in ("power_w", "util_gpu", "proc_mem_b", "util_mem"):
                metrics.append(Metric(f"gpu{idx}_{field}_mean", statistics.fmean(values), unit,
                                      "hardware", SOURCE, better, samples=values,
                                      samples_of="intervals",
                                      description=f"NVML's {title}, mean over {window}"))
        joules, how = energy(mine)
        if joules is not None:
            name = f"gpu{idx}_energy" + ("" if how == "counter" else "_integrated")
            metrics.append(Metric(
                name, joules, "J", "hardware", SOURCE, Better.LOWER,
                description=f"GPU {idx}'s energy over the whole run, start-up included "
                f"({how}); joules_per_step is the measured steps'"))
            rows.append(Row(f"gpu{idx}.energy", f"GPU {idx} energy ({how})", SOURCE,
                            {"total": Quantity(joules, "J")}, {"gpu": gpu, "method": how}))
            if steps:
                per_step, short = per_step_energy(mine, steps, period)
                metrics.append(Metric(
                    f"gpu{idx}_joules_per_step", per_step, "J/step", "hardware", SOURCE,
                    Better.LOWER, reason=short,
                    description=f"the energy counter across the {steps[2]} steps' span "
                    f"({(steps[1] - steps[0]) * 1e3:.0f} ms), read between samples "
                    f"{header.get('period_s', 0):g} s apart, over the steps"))
            if how == "integrated":
                notes.append(f"GPU {idx}: no energy counter; energy integrated from power samples")
    if samples:
        notes.append(f"{len(samples)} samples every {header.get('period_s', 0):g} s")
    return rows, metrics, notes
