"""The words every renderer puts around the view's numbers, defined once.

Text, markdown and HTML say the same sentences about the same figures: the answer, a
backend's status, an overhead, a drill-down line. Formatting of units lives in
``perfstack.report.units``; this module turns the view's numbers into phrases.
"""

from __future__ import annotations

import posixpath
import re

from perfstack.analysis.rules.memory import held_line
from perfstack.analysis.view import Header, View
from perfstack.analysis.views.drilldown import Node
from perfstack.render.words.device import device_answer
from perfstack.report import Metric
from perfstack.report.units import fmt_seconds, fmt_value, pct, pct_fine

LAYER_TITLES = {
    "python": "Python: functions, threads, the GIL",
    "compile": "Compile: torch.compile's frames, graph breaks, recompiles",
    "module": "Modules: time by nn.Module, forward and backward",
    "framework": "Framework: torch ops, shapes, FLOPs, memory",
    "kernel": "Kernel: CPU/GPU kernels, hot native symbols",
    "hardware": "Hardware: counters, CPU use, memory, GPU power",
    "memory": "Memory: what holds it, by function and by torch's categories",
}

#: The table columns of row values, as a reader says them (the raw name is the JSON's, and
#: every format shows it beside: a header's tooltip, the text's --full).
VALUE_TITLES = {
    "self_time": "own time", "self_share": "own %", "total_share": "total %",
    "own_time": "time incl. library calls", "own": "incl. library calls", "self": "own",
    "total": "total", "gil_share": "GIL held", "time": "time", "samples": "samples",
    "calls": "calls", "device": "device time", "flops": "FLOPs", "bytes": "bytes",
    "roof": "of roof", "share": "share", "allocated": "allocated", "compile_time":
    "compile time", "compiles": "compiles", "recompiles": "recompiles", "met": "met compiling",
}


def value_title(name: str, unit: str = "") -> str:
    """A row value's column header (a sampler's counts say they are samples)."""
    title = VALUE_TITLES.get(name, name.replace("_", " "))
    return f"{title} samples" if unit == "count" and name in ("self", "total", "own") \
        else title


#: Groups of related figures (Metric.group), as the report introduces them.
RELATED_TITLES = {
    "interpreter": "Python's share",
    "compile": "torch.compile",
}
_COUNTS = {2: "two", 3: "three", 4: "four", 5: "five"}


def related_title(group: str, metrics: list[Metric]) -> str:
    """How a group of related figures is introduced: "Python's share, counted three ways"."""
    n = len(metrics)
    return f"{RELATED_TITLES.get(group, group + ' figures')}, counted {_COUNTS.get(n, n)} ways"

#: What a backend's status means, in a reader's words.
STATUS_WORDS = {
    "ok": "ok",
    "partial": "partial",
    "empty": "nothing to report",
    "unavailable": "unavailable",
    "failed": "failed",
    "crashed": "crashed",
    "timeout": "timeout",
    "interrupted": "interrupted",
    "skipped": "skipped",
}

#: The budget part that bounds a workload, as the headline says it.
BOUND_WORDS = {
    "startup": "Mostly start-up: imports and interpreter set-up and teardown take",
    "compile": "Mostly compiling: torch.compile (importing the compiler, compiling, "
               "building kernels) takes",
    "interpreter": "Python-bound: Python code (holding the GIL) takes",
    "native": "Native-bound: code outside the interpreter (torch ops and the like) takes",
    "framework": "Framework-bound: torch's dispatch and bookkeeping take",
    "kernels": "Compute-bound: CPU kernels (BLAS, oneDNN, vectorized loops) take",
    "openmp": "Thread-pool-bound: the OpenMP pool spinning and waiting takes",
    "os": "OS-bound: the kernel (syscalls, page faults) takes",
    "runtime": "Runtime-bound: the C/C++ runtime (malloc, memcpy) takes",
    "other": "Mostly other native code, which takes",
    "idle": "Waiting-bound: the main thread waits (sleep, I/O, locks, device sync)",
    "contended": "GIL-bound: the main thread waits for its threads, which take turns holding "
                 "the GIL,",
}


#: An analysed report names its files up to this many; past it, the first and the last (a job's
#: ranks are one file each: a thousand names are not a header).
MOST_FILES_NAMED = 4


def _natural(name: str) -> list[int | str]:
    """Sort key putting rank-2 before rank-10."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name)]


def command_line(h: Header) -> str:
    """The first line: the workload's command, or the files an analysed report was read from
    (of many, how many, their common folder, the first two and the last)."""
    if h.attached is not None:
        return f"attached to pid {h.attached['pid']}: $ " + " ".join(h.command)
    if h.analyzed is None:
        return "$ " + " ".join(h.command)
    n = len(h.analyzed)
    if n <= MOST_FILES_NAMED:
        return f"analysed from {n} file{'s' * (n != 1)}: " + ", ".join(h.analyzed)
    names = sorted(h.analyzed, key=_natural)
    folders = {posixpath.dirname(name) for name in names}
    folder = folders.pop() if len(folders) == 1 else ""
    if folder:
        names = [posixpath.basename(name) for name in names]
    where = f" in {folder}/" if folder else ""
    return f"analysed from {n} files{where}: {names[0]}, {names[1]}, …, {names[-1]}"


def steps_phrase(h: Header) -> str:
    """What --steps did, as it happened: the steps every run stopped at, or the runs that
    ended before them and the steps they reached."""
    assert h.steps is not None
    asked = f"{h.steps['warmup']} warm-up + {h.steps['measured']} measured steps"
    if not h.short_of_steps:
        return f"each run ended after {asked} (--steps)"
    reached = sorted({n for _, n in h.short_of_steps if n is not None})
    counts = ", ".join(map(str, reached))
    n = len(h.short_of_steps)
    return (f"--steps asked for {asked}, but the workload ended first in {n} run"
            f"{'s' if n != 1 else ''} ({counts} step{'s' if reached != [1] else ''})")


def by_whom(backends: list[str]) -> str:
    """' (pyspy and perftop do)': the installed backends that would measure what is missing,
    or nothing when none is installed."""
    if not backends:
        return ""
    names = " and ".join([", ".join(backends[:-1]), backends[-1]] if len(backends) > 1
                         else backends)
    return f" ({names} {'does' if len(backends) == 1 else 'do'})"


def wall_line(h: Header) -> str:
    """The baseline's wall time with its spread, how many runs, how they ended."""
    if h.analyzed is not None:
        return (f"nothing was run: read in {fmt_seconds(h.duration_s)} · "
                f"perfstack {h.perfstack_version}")
    if h.attached is not None:
        how = {"running": "it ran on", "exited": "it exited meanwhile",
               "interrupted": "stopped early by the user; it ran on"}
        return (f"nothing was started: measured {fmt_seconds(h.attached['sampled_s'])}, "
                f"{how.get(h.attached['ended'], h.attached['ended'])} · no baseline run: the "
                f"profiler's overhead and the unprofiled speed are unknown · "
                f"perfstack {h.perfstack_version}")
    parts = []
    if h.wall is not None:
        spread = ""
        if h.wall.n > 1:
            spread = f", {fmt_seconds(h.wall.minimum)} to {fmt_seconds(h.wall.maximum)}"
        parts.append(f"baseline {fmt_seconds(h.wall.median)} (median of {h.wall.n}{spread})")
    elif h.repeat == 0:
        parts.append("no baseline (--repeat 0): overheads unknown")
    if h.steps:
        parts.append(steps_phrase(h))
    parts.append("every run exited 0" if not h.failures else
                 f"{len(h.failures)} of {h.runs} runs did not exit 0")
    parts.append(f"{h.runs} run{'s' * (h.runs != 1)}, {fmt_seconds(h.duration_s)} in all")
    parts.append(f"perfstack {h.perfstack_version}")
    return " · ".join(parts)


def printed_caption(h: Header) -> str:
    """Which run's printed lines the report shows, and why that one."""
    return f"the workload printed (run {h.printed_by}, the median run by {h.printed_median_of}):"


#: The rules of a run that did not end cleanly: crashed, exited non-zero, hung.
FAILED_RUN_RULES = ("run.out-of-memory", "run.crashed", "run.exited", "run.timeout")
#: The finding that says other programs kept the machine busy: said before the answer.
BUSY_RULE = "run.busy-machine"


def answer_lines(view: View) -> list[str]:
    """The headline: what bounds the workload, the workload's own hottest function, and the
    top finding; each sentence carries its number and who measured it."""
    h = view.headline
    if h.finding is not None and h.finding.rule in FAILED_RUN_RULES:
        # A failing workload's time is the failure's: its error is the answer, and where it
        # ran out of memory, what held the memory (the finding's first line that says it).
        held = held_line(h.finding)
        return [f"The workload failed: {h.finding.title}.",
                *([f"{held[0].upper()}{held[1:]}."] if held else []),
                "The figures below measure the failing run, not the workload's work."]
    out = []
    if h.finding is not None and h.finding.rule == BUSY_RULE:
        # Other programs took CPUs from the workload: every figure below is partly theirs.
        out += [f"{h.finding.title[0].upper()}{h.finding.title[1:]}: the figures below are "
                "not the workload's alone (run it again on a quiet machine)."]
    if h.bound is not None and h.bound_share is not None:
        words = BOUND_WORDS.get(h.bound, f"{h.bound_title}:")
        out.append(f"{words} {pct(h.bound_share)} of {h.scope} ({h.bound_source}).")
    elif view.device is not None and view.device.busy is not None:
        out.append(device_answer(view.device))
    else:
        out.append("No time budget was measured" + by_whom(view.budget.measured_by) + ".")
    if h.gpu is not None:  # a GPU's steps: what bounds them comes before the host's story
        out.append(f"What bounds the GPU's steps: {h.gpu.title}.")
    if h.hottest is not None:
        node = h.hottest
        share = (f", {pct(node.share)} of its run's wall time" + (
            f" summed over {node.threads} threads" if node.threads > 1 else "")
            if node.share is not None else "")
        gil = (f", GIL held {pct(node.gil_share)} of its samples"
               if node.gil_share is not None and node.seconds_kind == "self" else "")
        seconds = fmt_seconds(node.seconds) if node.seconds is not None else "?"
        kind = ("in it and the library code it calls" if node.seconds_kind == "own"
                else "of its own time")
        out.append(f"Your hottest function: {node.label}: {seconds} {kind}{share}"
                   f"{gil} ({node.source}).")
    elif view.tree:
        out.append("None of the sampled functions is in the workload's own files: see the "
                   "drill-down for the library code it spends its time in.")
    if h.finding is not None and h.finding.rule != BUSY_RULE and h.finding is not h.gpu:
        out.append(f"Top finding [{h.finding.severity}]: {h.finding.title}.")
    return out


def fmt_overhead(ratio: float | None, noise: float | None) -> str:
    """A backend's overhead: '1.03x', or '0.98x (within noise)' when the baseline's own spread
    covers the difference, '-' when there is none."""
    if ratio is None:
        return "-"
    if noise is not None and abs(ratio - 1) <= 2 * noise:
        return f"{ratio:.2f}x (in noise)"
    return f"{ratio:.2f}x"


def node_figures(node: Node) -> str:
    """A drill-down line's numbers in words: '1.2 s self, 18% of wall, GIL 95%'."""
    parts = []
    if node.seconds is not None:
        kind = "incl. libraries" if node.seconds_kind == "own" else node.seconds_kind
        parts.append(f"{fmt_seconds(node.seconds)} {kind}")
    elif node.samples is not None:
        parts.append(f"{node.samples:,} samples")
    if node.share is not None:
        parts.append(f"{pct(node.share)} of wall")
    if node.calls is not None:
        parts.append(f"{node.calls:,} calls")
    if node.gil_share is not None and node.seconds_kind == "self":
        parts.append(f"GIL held {pct(node.gil_share)}")
    if node.roof is not None:
        parts.append(f"{pct_fine(node.roof)} of its roof"
                     + (f" ({node.bound}-bound)" if node.bound else ""))
    return ", ".join(parts)


def related_line(m: Metric, full: bool) -> str:
    """A related figure: '83% of py-spy's samples holding the GIL (pyspy)'; with ``full``
    the metric's name too."""
    value = fmt_value(m.value, m.unit)
    what = m.description or m.name
    name = f" [{m.name}]" if full else ""
    return f"{value:>6} {what} ({m.source}){name}"


def beside_line(metrics: list[Metric]) -> str:
    """The hardware figures beside the drill-down, in one line: 'CPU use 1.0 cpus (resources);
    IPC n/a (not supported here) (perf)'."""
    return "; ".join(f"{m.name} {fmt_value(m.value, m.unit, m.reason)} ({m.source})"
                     for m in metrics)
