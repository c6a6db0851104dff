"""The steps by phase in words, defined once for every renderer: the heading, each phase,
the host's and the device's side of a step, the outlier steps."""

from __future__ import annotations

from perfstack.analysis.panes.steps import Outlier, Phase, StepView
from perfstack.analysis.stats import median
from perfstack.render.words.device import DEVICE_WORDS
from perfstack.report.units import fmt_seconds, pct

#: The CPU's step phases in words (the GPU's are DEVICE_WORDS).
STEP_WORDS = {"data": "data loading (DataLoader)", "compile": "torch.compile compiling",
              "eval": "evaluation (validation)", "ops": "torch ops",
              "other": "Python between ops, waiting"}


def phase_words(name: str) -> str:
    """A step phase as people read it."""
    return STEP_WORDS.get(name) or DEVICE_WORDS.get(name, name)


def steps_title(v: StepView) -> str:
    """'Steps: 5 profiled steps, median 216 ms, by phase on the device (torch)'."""
    where = "on the device" if v.device == "gpu" else "on the main thread"
    count = len(v.totals)
    return (f"Steps: {count} profiled step{'s' if count != 1 else ''}, median "
            f"{fmt_seconds(v.median)}, by phase {where} ({v.source})")


def step_sides_line(v: StepView) -> str | None:
    """'the host's step 2.68 ms (to queue its work), the device's work 38.4 ms: the device
    bounds the step' (None without both figures)."""
    if not v.host or not v.device_work or v.bound is None:
        return None
    host, device = median(v.host), median(v.device_work)
    phase = next((p for p in v.phases if p.name == "idle"), None)
    idle = (v.share(phase) or 0.0) if phase is not None else 0.0
    why = {"device": "the device bounds the step",
           "host": f"the host bounds the step (the device idles {pct(max(idle, 0.0))} of it, "
                   "waiting for launches)",
           "waits": f"the device idles {pct(max(idle, 0.0))} of the step with its work "
                    "launched (synchronisations, other streams or ranks)"}[v.bound]
    ahead = (", the host queued it ahead" if host < 0.5 * v.median else "")
    return (f"the host's step {fmt_seconds(host)} (its ProfilerStep range), the device's "
            f"own work {fmt_seconds(device)} a step: {why}{ahead}")


def step_cells(v: StepView) -> list[list[str]]:
    """One row per phase: name, its median over the steps, its share of all the steps' time
    (the phases add up to 100%), the fastest and slowest step's."""
    def share(p: Phase) -> str:
        value = v.share(p)
        return pct(value) if value is not None else "n/a"

    return [[("└ " if p.within else "") + phase_words(p.name), fmt_seconds(p.median),
             share(p), fmt_seconds(min(p.seconds)), fmt_seconds(max(p.seconds))]
            for p in v.phases]


def outlier_line(o: Outlier) -> str:
    """'step 3 took 1.9x the median step (412 ms): idle +196 ms'."""
    return (f"step {o.step} took {o.ratio:.1f}x the median step ({fmt_seconds(o.seconds)}): "
            f"{phase_words(o.phase)} +{fmt_seconds(o.extra)}")
