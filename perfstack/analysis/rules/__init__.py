"""The core's own finding rules: what went wrong with the run itself, and where the time went.

These look only at the run records, the backend table, the environment and the time budget's
metric convention (``budget.*``, ``split.*``; see perfstack.analysis.views.budget), never at a
particular backend, so they hold for every workload: a crash or a hang, a baseline too noisy to
judge overheads and differences, a backend that slowed the workload so much its timings are
suspect,
a run bound by the interpreter or by framework dispatch, a main thread that mostly waits, an
idle device, and more threads than CPUs.
"""

from __future__ import annotations

import re

from perfstack.analysis.rules.children import children_compete, ranks_here
from perfstack.analysis.rules.gpu import gpu_findings
from perfstack.analysis.rules.memory import out_of_memory
from perfstack.analysis.rules.time import share_of, time_rules
from perfstack.analysis.stats import summarize
from perfstack.machine import cpus
from perfstack.machine import load as machineload
from perfstack.plugin.mark import hookimpl
from perfstack.report import Finding, Layer, Overhead, Report, RunRecord, Status
from perfstack.report.units import fmt_seconds, pct

#: Baseline relative standard deviation above which differences are hard to see.
NOISE_LIMIT = 0.05
#: A backend run this many times slower than the baseline distorts what it measures.
OVERHEAD_LIMIT = 1.5


def _stack_top(record: RunRecord, lines: int = 6) -> list[str]:
    """Return the first lines of faulthandler's dump: the most recent calls come first."""
    if not record.python_stack:
        return ["no Python stack could be had (the process died before or outside Python)"]
    text = [line.rstrip() for line in record.python_stack.strip().splitlines() if line.strip()]
    return text[:lines]


#: A Python traceback's frame line, as the interpreter prints it.
_FRAME = re.compile(r'^  File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<func>.+)$')


def raised(stderr: str | None, home: str | None) -> tuple[str, str] | None:
    """Return (the exception as Python printed it, ``file:line in function`` of the innermost
    frame in the workload's own code, or of the innermost frame) from the last traceback in a
    process's stderr (its start may be cut off), or None when it printed none. ``home`` is the
    workload's folder: whose code a frame is, is perfstack.analysis.origin's to say."""
    from perfstack.analysis.origin import origin

    if not stderr:
        return None
    header = "Traceback (most recent call last):"
    tail = (stderr[stderr.rindex(header) + len(header):] if header in stderr
            else stderr).splitlines()
    frames = [m for m in (_FRAME.match(line) for line in tail) if m]
    exception = next((line.strip() for line in reversed(tail)
                      if line.strip() and not line.startswith((" ", "\t"))), None)
    if not frames or exception is None or _FRAME.match(exception):
        return None
    ours = [m for m in frames if origin(m["file"], home).ours]
    where = (ours or frames)[-1]
    return exception, f"{where['file']}:{where['line']} in {where['func']}"


def _failures(report: Report) -> list[Finding]:
    from perfstack.analysis.origin import workload_dir

    home = workload_dir(report)
    raised_at = {r.id: got[1] for r in report.run.runs if not r.exit.clean
                 for got in [raised(r.stderr_tail, home)] if got is not None}
    out, explained = out_of_memory(report, raised_at)  # said once, as what it is
    for kind in ("signalled", "exited", "timeout"):
        # A backend's extra runs (a sweep on another interpreter) are its own to judge.
        bad = [r for r in report.run.runs if r.exit.status == kind and not r.exit.clean
               and r.role != "extra" and r.id not in explained]
        if not bad:
            continue
        first = bad[0]
        ids = ", ".join(r.id for r in bad)
        if kind == "timeout":
            title = f"the workload hung: stopped at the {report.run.timeout_s:g} s timeout"
            action = "the stack shows where it was stuck; raise --timeout if it was just slow"
        elif kind == "signalled":
            title = f"the workload crashed with {first.exit.describe()}"
            action = ("the Python stack shows the last call into native code; run it under gdb "
                      "or with PYTHONFAULTHANDLER=1 to see the native frames")
        else:
            title = f"the workload exited with status {first.exit.code}"
            action = f"see its stderr ({first.stderr}) for the error"
        error = raised(first.stderr_tail, home) if kind == "exited" else None
        if error is not None:
            exception, where = error
            title = f"the workload raised {exception} at {where}"
            action = ("fix the error first: a profile of a failing run measures the failure "
                      f"(the whole traceback is in {first.stderr})")
            detail = [exception, f"raised at {where}",
                      *(first.stderr_tail or "").strip().splitlines()[-6:-1]]
        elif kind == "exited" and not first.python_stack:
            detail = (first.stderr_tail or "it printed nothing on stderr").splitlines()[-4:]
        else:
            detail = _stack_top(first)
        out.append(Finding(
            rule=f"run.{kind if kind != 'signalled' else 'crashed'}", title=title, layer="run",
            severity="critical", evidence=[f"runs: {ids}", *detail], action=action,
            source="perfstack"))
    return out


def _noise(report: Report) -> list[Finding]:
    wall = report.metric("wall_time")
    if wall is None or not wall.samples:
        return []
    samples = wall.samples
    if len(samples) == 1:
        return [Finding(
            rule="run.single-baseline", title="one baseline run: its noise is unknown",
            layer="run", severity="info",
            evidence=[f"baseline wall time {samples[0]:.3f} s, n=1"],
            action="use --repeat 3 or more so overheads and diffs can be judged against noise",
            source="perfstack")]
    spread = summarize(samples).relative_stdev
    if spread is None or spread <= NOISE_LIMIT:
        return []
    return [Finding(
        rule="run.noisy-baseline", title=f"the baseline varies by {spread:.0%} between runs",
        layer="run", severity="warning",
        evidence=[f"wall times: {', '.join(f'{x:.3f}' for x in samples)} s"],
        action=("differences smaller than this are noise: close other programs, run "
                "'python -m pyperf system tune', or raise --repeat"),
        source="perfstack")]


def _overhead_evidence(name: str, wall_s: float | None, o: Overhead) -> str:
    if o.basis == "step":
        own = o.ratio * o.baseline_median_s
        return (f"{name}'s measured steps: median {fmt_seconds(own)} a step vs the baseline "
                f"runs' {fmt_seconds(o.baseline_median_s)} (n={o.baseline_n} steps, --steps)")
    wall = f"{wall_s:.3f} s" if wall_s is not None else "?"
    return (f"{name} run {wall} vs baseline median {o.baseline_median_s:.3f} s "
            f"(n={o.baseline_n})")


def _disturbed_runs(report: Report) -> list[tuple[RunRecord, str]]:
    """The runs other programs disturbed (``perfstack.machine.load``), with why."""
    out = []
    for r in report.run.runs:
        why = machineload.disturbed(r.machine_load)
        if why is not None:
            out.append((r, why))
    return out


def _openmp_spin(report: Report) -> list[str]:
    """What the OpenMP pool took, from the time budget (its part of the native time) or, with
    no wall-time budget, from the CPU-time split alone; nothing when unmeasured."""
    from perfstack.analysis.views.budget import time_budget

    line = next((ln for ln in time_budget(report).lines if ln.part == "openmp"), None)
    if line is not None and line.seconds is not None and line.share:
        return [f"torch's OpenMP threads spun or waited {pct(line.share)} of the wall time "
                f"({line.source})"]
    split = report.metric("split.openmp")
    if split is not None and isinstance(split.value, (int, float)) and split.value:
        return [f"torch's OpenMP threads spinning or waiting took {pct(float(split.value))} of "
                f"the CPU time outside the interpreter ({split.source})"]
    return []


def _busy(report: Report) -> list[Finding]:
    """The machine was busy with other programs during some runs: said first, since every
    figure of those runs is partly the other programs' (a CPU-bound process beside a torch
    loop made its OpenMP threads spin for CPUs they could not get)."""
    hit = _disturbed_runs(report)
    if not hit:
        return []
    measured = sum(1 for r in report.run.runs if r.machine_load)
    worst = machineload.most_others(r.machine_load for r, _ in hit)
    evidence = [f"{r.id}: {why}" for r, why in hit[:6]]
    evidence += _openmp_spin(report)
    return [Finding(
        rule="run.busy-machine",
        title=(f"the machine was busy: other programs kept up to {worst:.1f} CPUs busy during "
               f"{len(hit)} of {measured} runs"),
        layer="run", severity="critical", evidence=evidence,
        action=("the figures of those runs are not the workload's alone: run it again on a "
                "quiet machine; where other programs must share it, OMP_NUM_THREADS=1 keeps "
                "torch's OpenMP threads from spinning against them, and 'perfstack ab' "
                "interleaves two versions so both see the same load"),
        source="perfstack")]


def _overheads(report: Report) -> list[Finding]:
    out = []
    disturbed = {r.id for r, _ in _disturbed_runs(report)}
    baselines = [r for r in report.run.runs if r.role == "baseline" and r.machine_load]
    if baselines and 2 * sum(r.id in disturbed for r in baselines) >= len(baselines):
        return []  # the baseline is not the workload's alone: no overhead can be stated
    for b in report.backends:
        if b.status not in (Status.OK, Status.PARTIAL) or b.overhead is None:
            continue
        if b.run in disturbed:
            continue  # slowed by other programs, not by the profiler
        if b.overhead.ratio > OVERHEAD_LIMIT:
            out.append(Finding(
                rule="run.high-overhead",
                title=f"{b.name} slowed the workload {b.overhead.ratio:.2f}x",
                layer="run", severity="warning",
                evidence=[_overhead_evidence(b.name, b.wall_s, b.overhead)],
                action=(f"read {b.name}'s absolute times with care; compare shares within it, "
                        "or lower its sampling rate or detail"),
                source="perfstack"))
    return out


#: Share of the wall time (%) in start-up and imports from which it is a finding.
STARTUP_SHARE = 100 / 3
#: A teardown this share of the wall time (%) or more is named in the start-up finding.
TEARDOWN_SHARE = 10.0


def _slowest_imports(report: Report, top: int = 3) -> list[str]:
    """The modules whose import took most of a sampler's samples: per package, its outermost
    ``<module>`` row (inclusive share), largest first."""
    from perfstack.analysis.origin import module_of, origin, workload_dir

    home = workload_dir(report)
    best: dict[str, tuple[str, float, str]] = {}  # library -> its largest import
    for row in report.layers.get(Layer.PYTHON, []):
        share = row.values.get("total_share")
        file = row.attrs.get("file")
        if row.attrs.get("function") != "<module>" or share is None or share.value is None \
                or not isinstance(file, str):
            continue
        where = origin(file, home)
        if where.ours:
            continue
        value = float(share.value)
        if value > best.get(where.library, ("", 0.0, ""))[1]:
            best[where.library] = (module_of(file) or where.library, value, where.path)
    ranked = sorted(best.values(), key=lambda b: -b[1])[:top]
    # The module imported names it better than its library ('torch._dynamo', not 'torch').
    return [f"import {module}: {value:.0f}% of the samples ({path})"
            for module, value, path in ranked]


def _late_imports(report: Report, top: int = 3) -> list[str]:
    """Imports made inside the workload's own functions (a sampler files them under the
    function, with the library call that imported), largest first, as evidence lines."""
    from perfstack.analysis.origin import short_key, workload_dir

    home = workload_dir(report)
    found: list[tuple[float, str]] = []
    for row in report.layers.get(Layer.PYTHON, []):
        late, function, file = (row.attrs.get(k) for k in ("late_imports", "function", "file"))
        if not isinstance(late, list) or not isinstance(function, str) \
                or not isinstance(file, str):
            continue
        line = row.attrs.get("line")
        caller = short_key(function, file, line if isinstance(line, int) else None, home)
        for item in late:
            if not isinstance(item, dict) or not isinstance(item.get("seconds"), (int, float)):
                continue
            via = item.get("via")
            how = "an import statement in it"
            if isinstance(via, dict):
                at = via.get("line")
                how = "when it called " + short_key(str(via.get("function")),
                                                    str(via.get("file")),
                                                    at if isinstance(at, int) else None, home)
            found.append((float(item["seconds"]),
                          f"import {item.get('module')} inside {caller}: "
                          f"{float(item['seconds']):.2f} s, {how} ({row.source})"))
    return [text for _, text in sorted(found, key=lambda f: -f[0])[:top]]


def _startup(report: Report) -> list[Finding]:
    share = share_of(report, "budget.startup")
    if share is None or share[0] < STARTUP_SHARE:
        return []
    wall = report.metric("wall_time")
    seconds = (f" ({share[0] / 100 * float(wall.value):.2f} s of {float(wall.value):.2f} s)"
               if wall is not None and wall.value else "")
    late = _late_imports(report)
    teardown = report.metric("teardown_time")
    after = ([f"the process ran on {float(teardown.value):.2f} s after the script returned "
              "(teardown: atexit handlers, threads and worker pools joined; teardown_time)"]
             if teardown is not None and teardown.value is not None and wall is not None
             and wall.value and float(teardown.value) >= TEARDOWN_SHARE / 100 * float(
                 wall.value) else [])
    return [Finding(
        rule="time.startup",
        title=f"start-up and imports take {share[0]:.0f}% of the run{seconds}",
        layer="python", severity="warning",
        # An import made inside the workload's own function is the most actionable: first.
        evidence=[*late, f"{share[0]:.1f}% of the main thread's wall time before the "
                  f"workload's own code ran or after it ended: imports, interpreter set-up and "
                  f"teardown (budget.startup, from {share[1]})", *after,
                  *_slowest_imports(report)],
        action=(("an import made inside your own function runs the first time that call is "
                 "made (a one-time cost of the process, not of each step); "
                 if late else "")
                + "measure each import with 'python -X importtime script.py 2> imports.log'; "
                "import heavy modules only where needed, or keep one process alive for many "
                "tasks (a server, a notebook) instead of starting one per task; for a "
                "benchmark, profile more steps (the start-up is a fixed cost)"),
        source="perfstack")]


def _oversubscription(report: Report) -> list[Finding]:
    torch = report.environment.get("torch")
    settings = report.environment.get("threads")
    if not isinstance(torch, dict):
        return []
    ranks = ranks_here(report)
    found = cpus.oversubscription(settings if isinstance(settings, dict) else {}, torch,
                                  cpus.usable_cpus(report.environment), ranks)
    if found is None:
        return []
    evidence = [found.describe()]
    spin = share_of(report, "split.openmp")
    if spin is not None:
        evidence.append(f"the OpenMP pool spins or waits {spin[0]:.1f}% of the native CPU "
                        f"time (split.openmp, from {spin[1]})")
    return [Finding(
        rule="threads.oversubscribed",
        title=f"{found.threads} compute threads on {found.cpus} CPUs",
        layer="hardware", severity="warning", evidence=evidence,
        action=(f"set OMP_NUM_THREADS (or torch.set_num_threads) to "
                f"{max(1, found.cpus // ranks)} per process; 'perfstack sweep --env "
                "OMP_NUM_THREADS=...' finds the best"),
        source="perfstack")]


@hookimpl
def perfstack_findings(report: Report) -> list[Finding]:
    """Return findings about crashes, hangs, a machine busy with other programs, baseline
    noise, backend overhead (never for a run other programs disturbed), the time budget
    (Python-bound, dispatch-bound, waiting, start-up and imports), what bounds a GPU's steps,
    oversubscribed threads, and torch's threads competing with the workload's children."""
    return [*_failures(report), *_busy(report), *_noise(report), *_overheads(report),
            *gpu_findings(report), *time_rules(report), *_startup(report),
            *_oversubscription(report), *children_compete(report)]
