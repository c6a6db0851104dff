"""The ``gil`` backend itself: the probe's run, py-spy's GIL shares, the sweep's rows and the
verdict they make."""

from __future__ import annotations

import json
import statistics
import sys
from typing import Any

from perfstack.machine import interpreters
from perfstack.plugin.backend import (
    Attachment,
    Availability,
    Backend,
    Collected,
    InProcessHook,
    Launch,
    Option,
    Outcome,
    RunContext,
)
from perfstack.report import Better, Layer, Metric, Quantity, Row

from ..pyspy.sampler import GIL_PROFILE_FILE, PROFILE_FILE, availability
from ..pyspy.sampler import attach as attach_pyspy
from ..pyspy.speedscope import read_profile, summarize
from .probe import FILE as PROBE_FILE
from .sweep import (
    THREADS_ENV,
    bad_thread_counts,
    parse_thread_counts,
    sweep,
    thread_flag,
)
from .verdict import SOURCE, Series, verdict


def _probe(ctx: RunContext) -> tuple[list[Metric], list[str]]:
    path = ctx.artifact_dir / PROBE_FILE
    if not path.is_file():
        return [Metric("gil_wait", None, "ms", "python", SOURCE, Better.LOWER,
                       reason="the GIL probe wrote nothing (the workload ended early)")], []
    data = json.loads(path.read_text("utf-8"))
    delays = data.get("delays_s") or []
    quiet = statistics.median(data.get("quiet_s") or [0.0])
    if not delays:
        return [Metric("gil_wait", None, "ms", "python", SOURCE, Better.LOWER,
                       reason="the workload ended before the probe woke up once")], []
    waits = sorted(max(0.0, d - quiet) for d in delays)
    p95 = waits[min(len(waits) - 1, int(0.95 * len(waits)))]
    share = 100 * sum(waits) / max(data["duration_s"], 1e-9)
    metrics = [
        Metric("gil_wait", statistics.median(waits) * 1e3, "ms", "python", SOURCE, Better.LOWER,
               samples=[w * 1e3 for w in waits[:: max(1, len(waits) // 200)]],
               samples_of="intervals"),
        Metric("gil_wait_p95", p95 * 1e3, "ms", "python", SOURCE, Better.LOWER),
        Metric("gil_wait_share", share, "%", "python", SOURCE, Better.LOWER),
        # The same figure for the time budget: the probe's waits as a share of its run.
        Metric("budget.gil_wait", min(100.0, share), "%", "python", SOURCE, Better.NEITHER),
    ]
    notes = [f"GIL probe: {len(delays)} wake-ups; a thread that wants the GIL waits "
             f"{statistics.median(waits) * 1e3:.2f} ms median, {p95 * 1e3:.2f} ms p95 "
             f"(switch interval {data['switch_interval_s'] * 1e3:.1f} ms; OS wake-up "
             f"latency {quiet * 1e6:.0f} us subtracted)"]
    return metrics, notes


def gil_busy_share(profiles: list[dict[str, Any]], gil_profiles: list[dict[str, Any]]) -> float:
    """Return the % of the run in which some thread held the GIL, from py-spy's two passes.

    Both passes sample at the same rate, idle threads included, so the longest-lived thread's
    sample count stands for the whole run; GIL-holding samples of all threads add up (only one
    thread holds the GIL at a time).
    """
    def ours(p: dict[str, Any]) -> bool:
        return "perfstack-gil-probe" in str(p.get("name", ""))

    longest = max((len(p.get("samples", [])) for p in profiles if not ours(p)), default=0)
    held = sum(len(p.get("samples", [])) for p in gil_profiles if not ours(p))
    return min(100.0, 100 * held / longest) if longest else 0.0


def _sweep_rows(series: list[Series], counts: list[int]) -> list[Row]:
    rows = []
    for s in series:
        for n in counts:
            values = s.values.get(n)
            if not values:
                continue
            speedup = s.speedup(n)
            row_values: dict[str, Quantity] = {
                "threads": Quantity(n, "count"),
                "measure": Quantity(s.median(n), s.measure),
                "runs": Quantity(len(values), "count"),
                "spread": Quantity(100 * (max(values) - min(values)) / statistics.median(values),
                                   "%"),
                "speedup": Quantity(speedup, "x") if speedup is not None else Quantity(
                    None, "x", "no one-thread run to compare with"),
            }
            if speedup is not None:
                row_values["efficiency"] = Quantity(100 * speedup / n, "%")
            if s.cpu.get(n):
                row_values["cpu_utilisation"] = Quantity(statistics.median(s.cpu[n]), "cpus")
            rows.append(Row(f"sweep:{s.label}:{n}", f"{s.label}, {n} thread(s)", SOURCE,
                            row_values, {"kind": "thread-sweep", "interpreter": s.label,
                                         "free_threaded": s.free_threaded}))
    return rows


class GilBackend(Backend):
    """GIL pressure, a thread sweep under the current and a free-threaded Python, a verdict."""

    name = "gil"
    layers = (Layer.PYTHON,)
    description = ("GIL pressure (probe + py-spy), thread sweep on this and a free-threaded "
                   "Python, verdict")
    opt_in = True
    options = (
        Option("threads", "thread counts to sweep, e.g. 1,2,4 (default: 1, 2, 4... up to the "
               "usable CPUs)", "", check=lambda value: bad_thread_counts(value)),
        Option("repeat", "runs per thread count and interpreter", 3, int, minimum=1),
        Option("python", "a free-threaded interpreter to compare with (default: python3.13t or "
               "python3.14t on PATH, or the one scripts/build-free-threaded.sh built)", ""),
        Option("no_free_threaded", "do not look for a free-threaded interpreter", flag=True),
        Option("no_pyspy", "do not sample GIL holding with py-spy", flag=True),
        Option("thread_arg", "the workload's own argument that sets its thread count "
               "(--gil-thread-arg=--threads, or the name alone: threads): the sweep sets it in "
               "each run, beside PERFSTACK_THREADS", ""),
    )

    def check(self) -> Availability:
        """Always available: the sweep needs only the workload; py-spy is optional."""
        return Availability.yes()

    def launch(self, ctx: RunContext) -> Launch:
        """Its own run: the highest thread count, with the GIL probe inside the workload.
        (With ``--gil-thread-arg`` the run's arguments are the workload's as given: the
        count the user chose.)"""
        counts = parse_thread_counts(ctx.options.get("threads"))
        return Launch(env={THREADS_ENV: str(max(counts))},
                      inprocess=[InProcessHook(f"{__package__}.probe:start")])

    def attach(self, ctx: RunContext, pid: int) -> Attachment | None:
        """Sample GIL holding per thread with py-spy, where it can attach."""
        if ctx.options.get("no_pyspy") or not availability().ok:
            return None
        return attach_pyspy(RunContext(ctx.backend, ctx.workload, ctx.artifact_dir,
                                       {"rate": 200, "gil_rate": 200, "idle": True},
                                       ctx.timeout_s), pid, run_count=1)

    def _free_threaded(self, ctx: RunContext) -> tuple[interpreters.Interpreter | None, str]:
        given = ctx.options.get("python")
        if given:
            info = interpreters.describe(str(given))
            if info is None:
                return None, f"--gil-python {given} does not run"
            if not info.free_threaded or info.gil_enabled:
                return None, (f"--gil-python {given} is {info.label}, not a free-threaded "
                              "build (sys._is_gil_enabled() is True with PYTHON_GIL=0)")
            return info, f"free-threaded: {info.label} ({given})"
        if ctx.options.get("no_free_threaded"):
            return None, "free-threaded comparison switched off (--gil-no-free-threaded)"
        found = interpreters.find_free_threaded()
        if not found:
            return None, ("no free-threaded interpreter found (python3.13t/python3.14t on PATH "
                          "or perfstack's cache): scripts/build-free-threaded.sh builds one, "
                          "or pass --gil-python PATH")
        return found[0], f"free-threaded: {found[0].label} ({found[0].path}), found"

    def collect(self, ctx: RunContext, outcome: Outcome | None) -> Collected:
        """Read the probe and py-spy, run the sweep, and give the verdict."""
        counts = parse_thread_counts(ctx.options.get("threads"))
        repeat = max(1, int(ctx.options.get("repeat") or 3))
        metrics, notes = _probe(ctx)
        rows: list[Row] = []
        held: float | None = None
        frames, profiles = read_profile(ctx.artifact_dir / PROFILE_FILE)
        gil_frames, gil_profiles = read_profile(ctx.artifact_dir / GIL_PROFILE_FILE)
        if profiles and gil_profiles:
            spy_rows, _, _ = summarize(frames, profiles, gil_frames, gil_profiles)
            for row in spy_rows[Layer.PYTHON]:
                if row.attrs.get("kind") == "thread" and "perfstack-gil-probe" not in row.key:
                    rows.append(Row(f"gil-{row.key}", row.name, SOURCE, row.values, row.attrs))
            held = gil_busy_share(profiles, gil_profiles)
            metrics.append(Metric("gil_busy_share", held, "%", "python", SOURCE, Better.NEITHER))
            notes.append("py-spy samples include idle threads: a thread's GIL share is of its "
                         "whole life, waiting included; gil_busy_share is the share of the run "
                         "in which some thread held the GIL")
        else:
            notes.append("no py-spy samples: GIL holding per thread unknown (py-spy missing, "
                         "refused, or --gil-no-pyspy)")
        current = interpreters.describe(sys.executable)
        plan: list[tuple[str | None, str, bool]] = [
            (None, current.label if current else "current Python", False)]
        free, said = self._free_threaded(ctx)
        notes.append(said)
        if free is not None:
            plan.append((free.path, free.label, True))
        series = sweep(ctx, counts, repeat, plan)
        rows += _sweep_rows(series, counts)
        for s in series:
            if s.failure:
                notes.append(f"{s.label}: the workload failed, sweep stopped: {s.failure}")
            top = max((n for n in counts if s.values.get(n)), default=None)
            if top is None or top == 1:
                continue
            suffix = "_free_threaded" if s.free_threaded else ""
            gain = s.speedup(top)
            metrics.append(Metric(f"thread_speedup{suffix}", gain, "x", "run", SOURCE,
                                  Better.HIGHER))
            metrics.append(Metric(f"parallel_efficiency{suffix}",
                                  100 * gain / top if gain is not None else None, "%", "run",
                                  SOURCE, Better.HIGHER,
                                  reason=None if gain is not None else "no one-thread run"))
        free_series = series[1] if len(series) > 1 else None
        if free_series is not None:
            one, ft_one = series[0].median(1), free_series.median(1)
            if one and ft_one:
                metrics.append(Metric("free_threaded_single_thread_speed", ft_one / one, "x",
                                      "run", SOURCE, Better.HIGHER))
        findings = [verdict(series[0], free_series, counts, held,
                            thread_flag(ctx.options.get("thread_arg")) or None)]
        seen = {n: max(v) for n, v in series[0].threads.items() if v}
        if seen:
            notes.append("threads started per count asked: " + ", ".join(
                f"{n} -> {seen[n]}" for n in sorted(seen)))
        notes.append(f"thread sweep {counts} x {repeat} runs per interpreter, interleaved; "
                     f"measure: {series[0].measure or 'none'}")
        return Collected(rows={Layer.PYTHON: rows}, metrics=metrics, findings=findings,
                         notes=notes, artifacts={"probe": ctx.artifact_dir / PROBE_FILE})
