"""A read capture (``capture.Capture``) as the report's memory rows, metrics and findings."""

from __future__ import annotations

import itertools
import json
import math
import statistics
from pathlib import Path
from typing import Any

from perfstack.analysis.origin import origin, short_key
from perfstack.plugin.backend import Collected
from perfstack.report import Better, Finding, Layer, Metric, Quantity, Row
from perfstack.report.units import fmt_value

from .capture import Capture, Site

SOURCE = "memray"
#: Rows kept: the functions that held the most at the peak, allocated the most, grew the
#: most or made the most temporaries (a capture names thousands of library functions).
KEEP = 100
#: Memory that grows step over step is named when a function's share grows by at least
#: this much a step, and by at least GROWTH_TOTAL (or 1% of the peak) over the steps.
GROWTH_STEP = 1024
GROWTH_TOTAL = 1 << 20
#: ... and when it grew (or held) from step to step this often: a steady climb, not one jump.
STEADY = 0.8
#: Temporaries are named when the workload's own functions made at least this many a step
#: (or over the run, without steps) and they are this share of those functions' allocations.
TEMPORARIES_PER_STEP = 100
TEMPORARY_SHARE = 0.3


def step_ends(sidecar: Path) -> tuple[list[int], bool]:
    """The wall-clock times (ns) at which the workload's steps ended, and whether the workload
    marked them itself (``perfstack.step()``), from the in-process hook's sidecar."""
    try:
        data = json.loads(sidecar.read_text("utf-8"))
        ends = [int(t) for t in data.get("step_ends_ns", [])]
        return ends, bool(data.get("explicit_steps"))
    except (OSError, ValueError, TypeError, AttributeError):
        return [], False


def module_hooks(sidecar: Path) -> list[dict[str, Any]]:
    """The torch module hooks the workload had registered when it ended (the in-process
    hook's sidecar), or []."""
    try:
        hooks = json.loads(sidecar.read_text("utf-8")).get("hooks")
    except (OSError, ValueError, TypeError, AttributeError):
        return []
    return [h for h in hooks if isinstance(h, dict)] if isinstance(hooks, list) else []


def _hook_words(hook: dict[str, Any], home: str | None) -> str:
    file, line = hook.get("file"), hook.get("line")
    where = (short_key(str(hook.get("function")), str(file), line if isinstance(line, int)
                       else None, home) if isinstance(file, str) else str(hook.get("function")))
    classes = ", ".join(str(c) for c in (hook.get("classes") or [])[:3])
    n = hook.get("modules") or 0
    return f"{hook.get('kind')} hook {where} on {n} module{'' if n == 1 else 's'} ({classes})"


def growth(site: Site, window: int = 2) -> float | None:
    """Bytes a function's share grew a step, from what it held just after each step (from
    the second step to the one before the last; None with fewer than two): the median of its
    growth over every ``window`` steps in a row, over ``window``. A step whose end was read
    just before its own allocation and the next just after (0, then twice the growth), and a
    one-off allocation that stays (a buffer made once, mid-run: one real run held 1.5 MiB
    more from its ninth step on), move a few windows, not the median; a least-squares line
    through the same points read 24% over the leak."""
    return _windowed_slope(site.at_steps, window)


def window_of(capture: Capture) -> int:
    """The steps a growth window spans: two, or enough for two of memray's snapshots where
    several steps passed between two of them."""
    per_step = capture.snapshots_per_step
    return 2 if per_step <= 0 or per_step >= 1 else math.ceil(2 / per_step)


def steady(values: list[int]) -> bool:
    """Whether a series climbs step after step (or holds), not in one jump. A step that lost
    a few kilobytes holds: a function that also allocates the step's temporaries (the model
    call whose output a hook keeps) ends each step a little above or below the line (up to
    a twentieth of its typical climb)."""
    deltas = [b - a for a, b in itertools.pairwise(values)]
    climbs = sorted(d for d in deltas if d > 0)
    slack = 0.05 * climbs[len(climbs) // 2] if climbs else 0.0
    return bool(deltas) and sum(d >= -slack for d in deltas) >= STEADY * len(deltas)


def _kept(capture: Capture) -> list[Site]:
    sites = list(capture.sites.values())
    window = window_of(capture)
    keep: dict[str, Site] = {}
    for measure in (lambda s: s.at_peak, lambda s: s.allocated, lambda s: s.temporary,
                    lambda s: abs(growth(s, window) or 0.0)):
        for site in sorted(sites, key=measure, reverse=True)[:KEEP]:
            if measure(site):
                keep.setdefault(site.key, site)
    return sorted(keep.values(), key=lambda s: s.at_peak, reverse=True)


def _row(site: Site, steps: bool, points: int, window: int) -> Row:
    # A function that held nothing just after any step (its memory came and went within
    # steps) did not grow.
    grew = growth(site, window) if site.at_steps else (0.0 if points >= 2 else None)
    values = {
        "at_peak": Quantity(site.at_peak, "B"),
        "allocated": Quantity(site.allocated, "B"),
        "allocations": Quantity(site.allocations, "count"),
        "at_exit": Quantity(site.at_exit, "B"),
        "temporary": Quantity(site.temporary, "count"),
        "growth_per_step": Quantity(round(grew, 1), "B") if grew is not None else
        Quantity.unsupported("B", "the run made fewer than four steps" if steps or
                             site.at_steps else "the run marked no steps"),
    }
    kind = ("import" if site.function.startswith("import ") else
            "native" if not site.file else "function")
    attrs: dict[str, object] = {"kind": kind, "ours": site.ours}
    if kind == "function":  # shown as the Python layer shows a function
        attrs.update(function=site.function, file=site.file, line=site.line)
    return Row(site.key, site.function, SOURCE, values, attrs)


#: What heap_growth_per_step counts.
GROWTH_WORDS = ("how much more the heap held in each step than in the one before: the median "
                "of the slopes between every two steps' low points (step_heap; a few steps "
                "that held more or less do not move it)")


def _metrics(capture: Capture, steps: int, interval_ms: int) -> list[Metric]:
    heap = capture.heap_at_steps
    slope = _robust_slope(heap)
    out = [
        Metric("peak_heap", capture.peak_heap, "B", Layer.MEMORY, SOURCE, Better.LOWER,
               description="the most memory the workload's allocations held at once, as "
               "memray counts it: malloc, mmap and all that goes through them (torch's CPU "
               "tensors, Python's object arenas); the process's resident memory also holds "
               "its code and what the allocators keep after a free"),
        Metric("peak_heap_at", capture.peak_at_s, "s", Layer.MEMORY, SOURCE, Better.NEITHER,
               detail=True, reason=None if capture.peak_at_s is not None else
               "memray took no memory snapshot",
               description="seconds from the start of the script to the heap's peak"),
        Metric("heap_at_exit", capture.at_exit, "B", Layer.MEMORY, SOURCE, Better.LOWER,
               detail=True, description="bytes the workload still held when the script "
               "ended (what it never freed, as memray's --leaks counts)"),
        Metric("allocations", capture.allocations, "count", Layer.MEMORY, SOURCE, Better.LOWER,
               detail=True, description="allocations the script made (malloc, mmap and the "
               "like; frees not counted)"),
        Metric("allocated_bytes", capture.allocated, "B", Layer.MEMORY, SOURCE, Better.LOWER,
               detail=True, description="bytes those allocations asked for, over the run"),
        Metric("temporary_allocations", capture.temporary, "count", Layer.MEMORY, SOURCE,
               Better.LOWER, detail=True,
               description="allocations freed before the next allocation was made (memray's "
               "temporary allocations)"),
    ]
    if len(heap) >= 2 and capture.snapshots_per_step < 2:
        out.append(Metric(
            "heap_growth_per_step", None, "B", Layer.MEMORY, SOURCE, Better.LOWER,
            reason=f"the steps are shorter than two of memray's memory snapshots, "
            f"{interval_ms} ms apart, --memray-interval-ms: a step's low point cannot be "
            "read; each function's growth can",
            description=GROWTH_WORDS))
    elif len(heap) >= 2:
        out.append(Metric(
            "heap_growth_per_step", round(slope, 1) if slope is not None else None, "B",
            Layer.MEMORY, SOURCE, Better.LOWER, description=GROWTH_WORDS))
        out.append(Metric(
            "step_heap", max(heap), "B", Layer.MEMORY, SOURCE, Better.LOWER,
            samples=[float(h) for h in heap], samples_of="steps", detail=True,
            description="each step's low point: the least the heap held from the end of the "
            "step before to just after its own end (a step's passing tensors do not count), "
            "from the second step to the one before the last; the value is their most"))
    if capture.peak_step is not None:
        out.append(Metric("peak_heap_step", capture.peak_step, "count", Layer.MEMORY, SOURCE,
                          Better.NEITHER, detail=True,
                          description="the step during which the heap peaked (the first "
                          "step holds the set-up)"))
    return out


def _windowed_slope(values: list[int], window: int) -> float | None:
    """The median of ``(values[i + w] - values[i]) / w`` over every i, ``w`` the window cut
    to leave at least two windows (None with fewer than two values)."""
    n = len(values)
    if n < 2:
        return None
    w = max(1, min(window, (n - 1) // 2))
    return statistics.median((values[i + w] - values[i]) / w for i in range(n - w))


def _robust_slope(values: list[int], most: int = 200) -> float | None:
    """The Theil-Sen slope: the median of the slopes between every two points (at most
    ``most`` points, evenly spread, so that a long run costs no more)."""
    n = len(values)
    if n < 2:
        return None
    index = sorted({round(i * (n - 1) / (most - 1)) for i in range(most)}) if n > most \
        else list(range(n))
    slopes = sorted((values[j] - values[i]) / (j - i)
                    for a, i in enumerate(index) for j in index[a + 1:])
    mid = len(slopes) // 2
    return slopes[mid] if len(slopes) % 2 else (slopes[mid - 1] + slopes[mid]) / 2


def _where(site: Site, home: str | None) -> str:
    return short_key(site.function, site.file, site.line, home) if site.file else site.function


def _findings(capture: Capture, home: str | None, steps: int,
              hooks: list[dict[str, Any]] | None = None) -> list[Finding]:
    out: list[Finding] = []
    floor = max(GROWTH_TOTAL, capture.peak_heap // 100)
    growing = [(g, s) for s in capture.sites.values()
               if (g := growth(s, window_of(capture))) is not None and g >= GROWTH_STEP
               and g * (len(s.at_steps) - 1) >= floor and steady(s.at_steps)]
    if growing:
        growing.sort(key=lambda gs: gs[0], reverse=True)
        g, site = growing[0]
        n = len(site.at_steps)
        evidence = [f"{_where(s, home)}: {fmt_value(gs, 'B')} more after each step, "
                    f"{fmt_value(s.at_steps[0], 'B')} after step 2, "
                    f"{fmt_value(s.at_steps[-1], 'B')} after step {n + 1}; "
                    f"{fmt_value(s.at_exit, 'B')} still held at exit"
                    for gs, s in growing[:3]]
        ours = [h for h in hooks or [] if isinstance(h.get("file"), str)
                and origin(str(h["file"]), home).ours]
        if ours:
            # memray charges memory to the code that allocated it; a hook that keeps a
            # module's output (appends it to a list) is what holds it, and allocates nothing
            evidence.append("the workload's module hooks, which may be what keeps it: "
                            + "; ".join(_hook_words(h, home) for h in ours[:3]))
        kept_by = (f"{_where(site, home)} allocates it" if ours else
                   f"{_where(site, home)} keeps it")
        out.append(Finding(
            "memory.grows", f"memory grows {fmt_value(g, 'B')} a step: {kept_by}",
            Layer.MEMORY, "warning", evidence,
            (f"look at the hooks above first (a forward hook that stores its output keeps "
             f"every step's); else find what {site.function} keeps" if ours else
             f"find what {site.function} keeps")
            + " from each step (a list, a cache, tensors that hold their graph) and keep less, "
            "or drop it once used: at this rate every "
            f"1,000 steps hold {fmt_value(g * 1000, 'B')} more", SOURCE))
    own = [s for s in capture.sites.values() if s.ours]
    temporary = sum(s.temporary for s in own)
    allocations = sum(s.allocations for s in own)
    per = temporary / steps if steps else temporary
    if allocations and per >= TEMPORARIES_PER_STEP and temporary >= TEMPORARY_SHARE * allocations:
        top = sorted(own, key=lambda s: s.temporary, reverse=True)[:3]
        unit = "a step" if steps else "over the run"
        out.append(Finding(
            "memory.temporaries", f"{per:,.0f} temporary allocations {unit} in the "
            f"workload's code, most in {_where(top[0], home)}", Layer.MEMORY, "info",
            [f"{_where(s, home)}: {s.temporary:,} temporary of {s.allocations:,} "
             "allocations" for s in top if s.temporary]
            + [f"{temporary:,} of the workload's {allocations:,} allocations were freed "
               "before the next was made"],
            "allocate once outside the loop and reuse (preallocated buffers, in-place ops "
            "with out=, numpy or torch on whole batches instead of per-item lists)", SOURCE))
    return out


def summarize(capture: Capture, steps: int, explicit: bool, home: str | None = None,
              interval_ms: int = 2, hooks: list[dict[str, Any]] | None = None) -> Collected:
    """Return the memory layer's rows, the metrics and the findings of one capture."""
    rows = [_row(s, steps > 0, len(capture.heap_at_steps), window_of(capture))
            for s in _kept(capture)]
    notes = [f"{len(rows)} of {len(capture.sites)} functions kept (the most held at the "
             "peak, allocated, grown or temporary)",
             "each allocation is charged to the innermost function of the workload's own "
             "code on its stack (a library's allocations to the line that called it)"]
    if not capture.native:
        notes.append("no native frames (--memray-no-native)")
    if steps:
        notes.append(f"{steps} steps ({'perfstack.step()' if explicit else 'optimizer steps'});"
                     " growth is read just after each step, from the second to the one before"
                     " the last")
    return Collected(rows={Layer.MEMORY: rows}, metrics=_metrics(capture, steps, interval_ms),
                     findings=_findings(capture, home, steps, hooks), notes=notes)
