"""Linux ``perf``: two backends, ``perf`` (perf stat: counters) and ``perftop`` (perf record).

``perf`` wraps the workload in ``perf stat -x,`` with a default event set (``--perf-events``
adds more). perf scales multiplexed counts itself; the share of time each counter ran is kept.
A counter the machine cannot read (in most virtual machines: every hardware event) is recorded
as not supported, with the reason, never as 0; derived metrics (IPC, miss rates, CPUs utilised)
exist only when their inputs were counted.

``perftop`` is the ``perf top`` view of one run: ``perf record -e cpu-clock -g``, then the
hottest native symbols by shared object, grouped so a reader sees at once how much time is the
interpreter, the framework, OpenMP, JIT code (oneDNN), the OS kernel, and the rest.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

from perfstack import hookimpl
from perfstack.plugin.backend import (
    Availability,
    Backend,
    Collected,
    InProcessHook,
    Launch,
    Option,
    Outcome,
    RunContext,
)
from perfstack.records import datarecord
from perfstack.report import Better, Finding, Layer, Metric, Quantity, Report, Row

from .. import gcphase
from .symbols import group_of, read_symbols, split_metrics, to_float

DEFAULT_EVENTS = ("cycles", "instructions", "branches", "branch-misses", "cache-references",
                  "cache-misses", "L1-dcache-load-misses", "LLC-load-misses", "task-clock",
                  "context-switches", "cpu-migrations", "page-faults")
INSTALL_HINT = "install perf: apt-get install linux-perf (Debian) or linux-tools-$(uname -r)"


def unknown_events(text: str) -> str | None:
    """Why ``--perf-events`` cannot be counted here, or None: perf itself is asked (a
    ``perf stat`` of ``true``), so a typo is one line before the run, not a failed run."""
    events = [e.strip() for e in text.split(",") if e.strip()]
    if not events or shutil.which("perf") is None:
        return None  # no perf: the backend says so itself, as unavailable
    proc = subprocess.run(["perf", "stat", "-x,", "-e", ",".join(events), "--", "true"],
                          capture_output=True, text=True, timeout=30, check=False)
    if proc.returncode == 0:
        return None
    lines = [ln.strip() for ln in proc.stderr.splitlines() if ln.strip()]
    why = next((ln for ln in lines if "event syntax error" in ln or "unknown" in ln.lower()),
               lines[0] if lines else f"perf exited with {proc.returncode}")
    return f"perf cannot count {text!r}: {why}"


def _whole_run(ctx: RunContext) -> list[str]:
    """Under --steps: perf wraps the command, so it sees the whole run, not the steps."""
    if ctx.steps is None:
        return []
    return [f"perf counts the whole run: start-up, the {ctx.steps.warmup} warm-up steps and the "
            f"{ctx.steps.measured} measured ones (--steps bounds the run, not perf's window)"]


@datarecord(frozen=True)
class Counter:
    """One line of ``perf stat -x,``: a count, or why there is none."""

    event: str
    value: float | None
    unit: str
    running: float | None  # % of the run the counter was scheduled (multiplexing)
    reason: str | None = None


def _vm() -> bool:
    try:
        return " hypervisor" in Path("/proc/cpuinfo").read_text("utf-8", errors="replace")
    except OSError:
        return False


def _not_supported_reason() -> str:
    if _vm():
        return ("<not supported>: this is a virtual machine whose hypervisor does not expose "
                "the CPU's performance counters")
    return "<not supported>: the kernel or CPU offers no such counter here"


def parse_stat(text: str, vm_reason: str | None = None) -> list[Counter]:
    """Return the counters in ``perf stat -x,`` output (lines: value,unit,event,run,pct,...)."""
    counters = []
    for line in text.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        fields = line.split(",")
        if len(fields) < 5:
            continue
        raw, unit, event = fields[0], fields[1], fields[2]
        running = to_float(fields[4])
        if raw.startswith("<not supported>"):
            counters.append(Counter(event, None, unit, None,
                                    vm_reason or "<not supported> on this machine"))
        elif raw.startswith("<not counted>"):
            counters.append(Counter(event, None, unit, None,
                                    "<not counted>: never scheduled on a hardware counter "
                                    "(too many events at once, or the counter is busy)"))
        else:
            value = to_float(raw)
            if value is not None:
                counters.append(Counter(event, value, unit, running))
    return counters


def _quantity(c: Counter) -> Quantity:
    if c.value is None:
        return Quantity.unsupported("s" if c.unit == "msec" else "count", c.reason or "unknown")
    if c.unit == "msec":
        return Quantity(c.value / 1e3, "s")
    if c.unit == "ns":
        return Quantity(c.value / 1e9, "s")
    return Quantity(c.value, c.unit or "count")


def derived(counters: dict[str, Counter], wall_s: float | None) -> list[Metric]:
    """Return IPC, miss rates and CPUs utilised, each only when its inputs were counted."""
    def val(name: str) -> float | None:
        c = counters.get(name) or counters.get(name + ":u")
        return c.value if c is not None else None

    out = []
    pairs = (("ipc", "instructions", "cycles", "instructions per cycle", Better.HIGHER, 1.0),
             ("branch_miss_rate", "branch-misses", "branches", "%", Better.LOWER, 100.0),
             ("cache_miss_rate", "cache-misses", "cache-references", "%", Better.LOWER, 100.0),
             ("llc_misses_per_kilo_instruction", "LLC-load-misses", "instructions", "MPKI",
              Better.LOWER, 1000.0))
    for name, num, den, unit, better, scale in pairs:
        a, b = val(num), val(den)
        if a is not None and b:
            out.append(Metric(name, a / b * scale, unit, "hardware", "perf", better))
    clock = val("task-clock")
    if clock is not None and wall_s:
        out.append(Metric("cpus_utilized", clock / 1e3 / wall_s, "cpus", "hardware", "perf",
                          Better.NEITHER))
    return out


def _perf_works(args: list[str]) -> tuple[bool, str]:
    return _perf_answer(tuple(args))


@functools.cache
def _perf_answer(args: tuple[str, ...]) -> tuple[bool, str]:
    """Whether ``perf ARGS -- true`` works, and what it said; asked once per process (the
    backends' checks and the environment ask the same questions)."""
    try:
        proc = subprocess.run(["perf", *args, "--", "true"], capture_output=True, text=True,
                              timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, str(exc)
    return proc.returncode == 0, proc.stderr.strip()


#: ``perf record`` first writes an event for every BPF program loaded on the machine, which
#: no Python or torch profile uses: 0.9 s of every record here (1.09 s -> 0.20 s for `true`).
NO_BPF_EVENTS = "--no-bpf-event"


def record_flags() -> list[str]:
    """Return ``--no-bpf-event`` where this perf knows it (perf 5.1 and later), else none."""
    ok, err = _perf_works(["record", NO_BPF_EVENTS, "-e", "cpu-clock", "-o", os.devnull])
    return [NO_BPF_EVENTS] if ok or "unknown option" not in err else []


def _availability(args: list[str]) -> Availability:
    if shutil.which("perf") is None:
        return Availability.no("no perf binary on PATH", INSTALL_HINT)
    ok, err = _perf_works(args)
    if ok:
        return Availability.yes()
    paranoid = Path("/proc/sys/kernel/perf_event_paranoid")
    level = paranoid.read_text().strip() if paranoid.exists() else "?"
    if "paranoid" in err or "Permission" in err or "permission" in err:
        return Availability.no(
            f"perf_event_paranoid={level} forbids profiling as this user",
            "sudo sysctl kernel.perf_event_paranoid=1 (or grant CAP_PERFMON)")
    return Availability.no(f"perf fails here: {err.splitlines()[-1] if err else 'no output'}",
                           INSTALL_HINT)


class PerfStatBackend(Backend):
    """``perf stat``: hardware and software counters of one run (hardware layer)."""

    name = "perf"
    layers = (Layer.HARDWARE,)
    description = "perf stat counters: cycles, instructions, caches, branches, task-clock..."
    options = (Option("events", "extra events for perf stat, comma-separated", "",
                      check=lambda value: unknown_events(value)),)

    def check(self) -> Availability:
        """Available when ``perf stat -e task-clock`` works for this user."""
        return _availability(["stat", "-e", "task-clock"])

    def launch(self, ctx: RunContext) -> Launch:
        """Wrap the workload in ``perf stat -x,``, writing to this run's folder."""
        extra = [e.strip() for e in str(ctx.options.get("events") or "").split(",") if e.strip()]
        events = ",".join(dict.fromkeys([*DEFAULT_EVENTS, *extra]))
        out = ctx.artifact_dir / "perf-stat.csv"
        return Launch(wrap=["perf", "stat", "-x,", "--no-big-num", "-o", str(out), "-e", events,
                            "--"])

    def collect(self, ctx: RunContext, outcome: Outcome | None) -> Collected:
        """Parse the counters; unreadable ones keep their reason."""
        out = ctx.artifact_dir / "perf-stat.csv"
        if not out.is_file():
            return Collected(notes=["perf stat wrote nothing (it did not finish)"])
        counters = parse_stat(out.read_text("utf-8", errors="replace"), _not_supported_reason())
        rows = []
        metrics = []
        for c in counters:
            values = {"value": _quantity(c)}
            if c.running is not None:
                values["running"] = Quantity(c.running, "%")
            rows.append(Row(f"perf.{c.event}", c.event, "perf", values,
                            {"multiplexed": c.running is not None and c.running < 100}))
            if c.value is not None:
                q = _quantity(c)
                # The raw counts are details: the derived figures (IPC, miss rates) lead.
                metrics.append(Metric(f"perf_{c.event.replace('-', '_').replace(':', '_')}",
                                      q.value, q.unit, "hardware", "perf", Better.LOWER,
                                      detail=True))
        wall = outcome.record.wall_s if outcome is not None else None
        metrics += derived({c.event: c for c in counters}, wall)
        missing = [c.event for c in counters if c.value is None]
        notes = _whole_run(ctx)
        if any(c.running is not None and c.running < 100 for c in counters):
            notes.append("some counters were multiplexed: perf scaled them by the time they ran")
        partial = None
        if missing:
            reason = next((c.reason for c in counters if c.value is None and c.reason), None)
            partial = (f"{len(missing)} of {len(counters)} counters not counted here "
                       f"({', '.join(missing)})" + (f": {reason}" if reason else ""))
        return Collected(rows={Layer.HARDWARE: rows}, metrics=metrics, notes=notes,
                         artifacts={"csv": out}, partial=partial)


class PerfTopBackend(Backend):
    """``perf record``: the hottest native code of one run, by shared object (kernel layer)."""

    name = "perftop"
    layers = (Layer.KERNEL,)
    primary = "cpu_time"
    publishes = ("split.", "cpu_share_", "gc_time_")
    openers = (("perf.data", "perf report -i"),)
    description = "perf record -e cpu-clock: hot native symbols grouped by library (perf top)"
    options = (Option("freq", "samples per second", 999, int, minimum=1, maximum=100_000),
               Option("callgraph", "call graphs: fp, dwarf (large) or none", "fp",
                      choices=("fp", "dwarf", "none")))

    def check(self) -> Availability:
        """Available when ``perf record -e cpu-clock`` works for this user."""
        return _availability(["record", *record_flags(), "-e", "cpu-clock", "-o", os.devnull])

    def launch(self, ctx: RunContext) -> Launch:
        """Wrap the workload in ``perf record``."""
        graph = str(ctx.options.get("callgraph") or "fp")
        argv = ["perf", "record", "-q", *record_flags(), "-e", "cpu-clock", "-F",
                str(ctx.options.get("freq") or 999), "-o", str(ctx.artifact_dir / "perf.data")]
        if graph != "none":
            argv += ["--call-graph", graph]
        # The collector's time by phase, from inside the workload: perf sees how much, not when.
        return Launch(wrap=[*argv, "--"],
                      inprocess=[InProcessHook(f"{gcphase.__name__}:start")])

    def collect(self, ctx: RunContext, outcome: Outcome | None) -> Collected:
        """Summarize perf.data by shared object and by symbol; the collector's time by phase."""
        data = ctx.artifact_dir / "perf.data"
        if not data.is_file():
            return Collected(notes=["perf record wrote no data"])
        freq = float(ctx.options.get("freq") or 999)
        by_sym = read_symbols(data)
        groups: dict[str, list[float]] = {}
        for pct, samples, dso, _ in by_sym:
            entry = groups.setdefault(group_of(dso), [0.0, 0.0])
            entry[0] += pct
            entry[1] += samples
        rows = [Row(f"group:{g}", g, "perftop",
                    {"share": Quantity(pct, "%"), "cpu_time": Quantity(samples / freq, "s")},
                    {"kind": "library-group"})
                for g, (pct, samples) in sorted(groups.items(), key=lambda kv: -kv[1][0])]
        for pct, samples, dso, sym in sorted(by_sym, key=lambda r: -r[0])[:50]:
            rows.append(Row(f"{dso}:{sym}", f"{sym} ({dso})", "perftop",
                            {"share": Quantity(pct, "%"), "cpu_time": Quantity(samples / freq,
                                                                                "s")},
                            {"kind": "symbol", "dso": dso, "group": group_of(dso)}))
        metrics = [Metric(f"cpu_share_{g.split(' ')[0].lower()}", pct, "%", "kernel", "perftop",
                          Better.NEITHER, detail=not g.startswith("interpreter"),
                          description="of CPU samples in libpython: code, imports, GC"
                          if g.startswith("interpreter") else f"of CPU samples in {g}",
                          group="interpreter" if g.startswith("interpreter") else None)
                   for g, (pct, _) in groups.items()]
        metrics += split_metrics(by_sym)
        total = sum(n for _, n, _, _ in by_sym)
        notes = [f"{total} samples at {freq:g} Hz of cpu-clock (all threads)", *_whole_run(ctx)]
        gc_metrics, gc_notes = gcphase.metrics(ctx.artifact_dir, self.name)
        metrics += gc_metrics
        notes += gc_notes
        return Collected(rows={Layer.KERNEL: rows}, metrics=metrics, notes=notes,
                         artifacts={"perf.data": data})


#: Instructions per cycle below which a CPU-bound run is stalled (memory, branches).
LOW_IPC = 1.0


@hookimpl
def perfstack_findings(report: Report) -> list[Finding]:
    """Flag a low IPC where the hardware counters counted, and a garbage collector that takes
    over a tenth of the CPU time (perf record's symbols)."""
    found = gcphase.finding(report, "perftop")
    ipc = next((m for m in report.metrics if m.name == "ipc" and m.source == "perf"), None)
    if ipc is None or ipc.value is None or ipc.value >= LOW_IPC:
        return found
    evidence = [f"{ipc.value:.2f} instructions per cycle over the whole run (perf stat)"]
    for name in ("cache_miss_rate", "llc_misses_per_kilo_instruction", "branch_miss_rate"):
        m = next((x for x in report.metrics if x.name == name), None)
        if m is not None and m.value is not None:
            evidence.append(f"{name} {m.value:.2f} {m.unit}")
    return [*found, Finding(
        rule="hardware.low-ipc", title=f"low IPC: {ipc.value:.2f} instructions per cycle",
        layer="hardware", severity="warning", evidence=evidence,
        action=("the CPU waits on memory or mispredicted branches: look at the cache miss "
                "rates, the data layout (channels_last, contiguous tensors) and the batch size; "
                "perftop shows which code stalls"),
        source="perf")]


@hookimpl
def perfstack_backends() -> list[Backend]:
    """Provide the perf and perftop backends."""
    return [PerfStatBackend(), PerfTopBackend()]


@hookimpl
def perfstack_environment() -> dict[str, Any]:
    """Add perf's version and whether hardware counters count here to the environment block."""
    if shutil.which("perf") is None:
        return {"perf": {"available": False, "reason": "no perf binary on PATH"}}
    try:
        version = subprocess.run(["perf", "--version"], capture_output=True, text=True,
                                 timeout=10).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        version = ""
    software, _ = _perf_works(["stat", "-e", "task-clock"])
    hardware, err = _perf_works(["stat", "-x,", "-e", "instructions"])
    if hardware and "<not supported>" in err:
        hardware = False
    info: dict[str, Any] = {"available": software, "version": version or None,
                            "hardware_counters": hardware}
    if not hardware:
        info["hardware_reason"] = _not_supported_reason()
    return {"perf": info}
