"""The finding rules of where the time went, read from the time budget's metric convention
(``budget.*``, ``split.*``, ``gpu_*``; see perfstack.analysis.views.budget) and never from a
particular backend: a run bound by the interpreter or by framework dispatch, a main thread
that mostly waits (a GPU's verdict is perfstack.analysis.rules.gpu's)."""

from __future__ import annotations

from perfstack.report import Finding, Layer, Quantity, Report
from perfstack.report.units import fmt_seconds

#: Interpreter share of the wall time (%) from which a run is Python-bound.
PYTHON_BOUND = 50.0
#: Framework CPU time over kernel CPU time from which dispatch, not compute, dominates (a
#: margin, so two nearly equal shares do not flip the finding from run to run).
DISPATCH_RATIO = 1.5
#: Share of the wall time (%) the main thread may wait before it is a finding.
WAITING_LIMIT = 25.0
#: CPU seconds of the workload's child processes from which its main thread's waiting may be
#: for them (and loading data in workers is not the advice).
CHILDREN_AT_WORK_S = 0.2


def waiting_places(report: Report, top: int = 3) -> list[str]:
    """Where the main thread waited longest outside torch.compile (a sampler's rows of
    ``attrs.kind`` ``wait``: ``wait_time``, the innermost frame, the workload's caller), as
    evidence lines; none where no sampler said."""
    from perfstack.analysis.origin import short_key, workload_dir

    home = workload_dir(report)

    def where(attrs: object) -> str | None:
        if not isinstance(attrs, dict) or not isinstance(attrs.get("function"), str):
            return None
        line = attrs.get("line")
        return short_key(attrs["function"], str(attrs.get("file") or "?"),
                         line if isinstance(line, int) else None, home)

    rows = sorted((r for r in report.layers.get(Layer.PYTHON, [])
                   if r.attrs.get("kind") == "wait" and not r.attrs.get("in_compile")
                   and isinstance(r.values.get("wait_time"), Quantity)
                   and r.values["wait_time"].value),
                  key=lambda r: -float(r.values["wait_time"].value or 0.0))
    out = []
    for r in rows[:top]:
        caller = where(r.attrs.get("caller"))
        share = r.values.get("wait_share")
        of_wall = (f", {share.value:.0f}% of the wall time"
                   if share is not None and share.value is not None else "")
        out.append(f"it waits in {where(r.attrs)}"
                   + (f", called from {caller}" if caller else "")
                   + f": {fmt_seconds(float(r.values['wait_time'].value or 0.0))}{of_wall} "
                   f"(wait_time, from {r.source})")
    return out


def share_of(report: Report, name: str) -> tuple[float, str] | None:
    """A share metric's value and its source, when it is known."""
    m = report.metric(name)
    if m is None or m.value is None:
        return None
    return float(m.value), m.source


#: Worker threads that ran this share of the wall time (%), mostly holding the GIL, while
#: the main thread waited: the workload is bound by the GIL, not by waiting.
GIL_WORKERS_SHARE = 50.0
GIL_HELD = 50.0
GIL_RULE = "time.threads-contend"
#: A thread holding the GIL in this share (%) of its samples or more runs Python.
PYTHON_THREAD = 10.0


def gil_contention(report: Report) -> Finding | None:
    """Threads of the workload's own process (a sampler's thread rows: ``attrs.kind``
    ``thread`` with ``time`` and ``gil_share``) that ran Python most of the wall time while
    the main thread waited for them: they take turns holding the GIL, so more of them add no
    CPU. None when there are none, or they mostly ran native code that released it."""
    wall = report.metric("wall_time")
    rows = [r for r in report.layers.get(Layer.PYTHON, [])
            if r.attrs.get("kind") == "thread" and r.attrs.get("process") != "child"
            and "MainThread" not in r.name and "perfstack-" not in r.name]
    timed = [(float(r.values["time"].value or 0.0), r.values.get("gil_share"))
             for r in rows if "time" in r.values and r.values["time"].value]
    # The threads that ran Python: one that held the GIL in none of its samples ran native
    # code (or a sampler's GIL pass missed it, nameless), and takes no turn on the GIL: it
    # neither contends nor dilutes the others' share (a 4-thread pool read "waiting").
    held = [(t, float(g.value)) for t, g in timed
            if g is not None and g.value is not None and float(g.value) >= PYTHON_THREAD]
    timed = [(t, g) for t, g in timed if g is None or g.value is None
             or float(g.value) >= PYTHON_THREAD]
    busy = sum(t for t, _ in timed)
    if not held or wall is None or not wall.value:
        return None
    share = 100 * busy / float(wall.value)
    gil = sum(t * g for t, g in held) / sum(t for t, _ in held)
    if share < GIL_WORKERS_SHARE or gil < GIL_HELD:
        return None
    source = rows[0].source
    cpus = report.metric("cpu_utilisation")
    idle = share_of(report, "budget.idle")
    evidence = [f"{len(timed)} threads ran {fmt_seconds(busy)} of code, {share:.0f}% of the "
                f"wall time summed, holding the GIL {gil:.0f}% of their samples (their thread "
                f"rows, from {source})"]
    if idle is not None:
        evidence.append(f"meanwhile the main thread waited {idle[0]:.0f}% of the wall time "
                        "(budget.idle): for them")
    if cpus is not None and cpus.value is not None:
        evidence.append(f"the process kept {float(cpus.value):.2f} CPUs busy "
                        f"(cpu_utilisation, from {cpus.source}): one thread at a time")
    return Finding(
        rule=GIL_RULE,
        title=(f"GIL-bound: {len(timed)} threads run Python and take turns holding the GIL "
               "while the main thread waits for them"),
        layer="python", severity="warning", evidence=evidence,
        action=("more threads add no CPU while they hold the GIL: use processes "
                "(concurrent.futures.ProcessPoolExecutor, multiprocessing), move the hot loop "
                "into native code that releases the GIL (NumPy, torch), or run on a "
                "free-threaded Python; a thread sweep (perfstack plugins lists the backend "
                "that makes one) measures how they scale"),
        source="perfstack")


def time_rules(report: Report) -> list[Finding]:
    """Where the time went, from the time budget's metrics: Python-bound, dispatch-bound, a
    main thread that mostly waits."""
    out = []
    interp, native = share_of(report, "budget.interpreter"), share_of(report, "budget.native")
    if interp is not None and interp[0] >= PYTHON_BOUND:
        out.append(Finding(
            rule="time.python-bound",
            title=f"Python-bound: the interpreter runs {interp[0]:.0f}% of the wall time",
            layer="python", severity="warning",
            evidence=[f"{interp[0]:.1f}% of the main thread's wall time in Python code holding "
                      f"the GIL (budget.interpreter, from {interp[1]})",
                      *([f"{native[0]:.1f}% in native code (torch ops and the like)"]
                        if native else [])],
            action=("the top functions of the drill-down are where it goes: move their loops "
                    "into tensor ops, batch the work, or torch.compile the model"),
            source="perfstack"))
    framework, kernels = share_of(report, "split.framework"), share_of(report, "split.kernels")
    if (framework is not None and kernels is not None and native is not None
            and native[0] >= 10 and framework[0] > DISPATCH_RATIO * kernels[0]):
        out.append(Finding(
            rule="time.dispatch-bound",
            title=(f"framework overhead outweighs compute: {framework[0]:.0f}% of native CPU "
                   f"time in dispatch and bookkeeping, {kernels[0]:.0f}% in kernels"),
            layer="framework", severity="warning",
            evidence=[f"split.framework {framework[0]:.1f}%, split.kernels {kernels[0]:.1f}% "
                      f"of the CPU time outside the interpreter (from {framework[1]})",
                      f"native code is {native[0]:.1f}% of the wall time"],
            action=("the ops are too small for their overhead: batch them, fuse them "
                    "(torch.compile), or use larger tensors per call"),
            source="perfstack"))
    idle = share_of(report, "budget.idle")
    wall = report.metric("wall_time")
    idle_s = idle[0] / 100 * float(wall.value) if idle and wall and wall.value else None
    contention = gil_contention(report) if idle is not None and idle[0] >= WAITING_LIMIT \
        else None
    if contention is not None:  # the main thread waits for its threads, which wait for the GIL
        out.append(contention)
    # A sampler's own attach (~0.2 s) reads as waiting: short runs need more than a share.
    elif idle is not None and idle[0] >= WAITING_LIMIT and (idle_s is None or idle_s >= 0.5):
        evidence = [f"{idle[0]:.1f}% of the wall time with no sample of running code on the "
                    f"main thread (budget.idle, from {idle[1]}): sleep, I/O, locks, the GIL, "
                    "device synchronisation"]
        action = ("if it waits for data, load it in worker processes (DataLoader "
                  "num_workers, pin_memory, prefetch); a sampler that records idle frames "
                  "shows where it blocks")
        children = report.metric("child_cpu_time")
        compiling = report.metric("compile_time")
        places = waiting_places(report)
        evidence = places + evidence  # where, first: the short report shows one line
        # where a sampler saw the waits, its places say where it blocks; else one would
        where = ("the places it waits in say where it blocks" if places
                 else "a sampler that records idle frames shows where it blocks")
        if places:
            action = ("if it waits for data, load it in worker processes (DataLoader "
                      "num_workers, pin_memory, prefetch); for the device, synchronise less "
                      f"often; for a lock, what holds it: {where}")
        if not places and compiling is not None and compiling.value:
            # No sampler told the compiler's waits from the rest: torch.compile's inductor
            # builds its kernels in a pool of worker processes the main thread waits for.
            evidence.append(f"torch.compile compiled {fmt_seconds(float(compiling.value))} "
                            f"a run (compile_time, from {compiling.source}); its compiler "
                            "works in worker processes the main thread waits for")
            action = ("part of it is torch.compile's: its workers build kernels while the "
                      "main thread waits (the compile layer says what it compiled and why); "
                      f"a warm cache and fewer recompiles shorten it; {where}")
        elif (children is not None and isinstance(children.value, (int, float))
                and children.value >= CHILDREN_AT_WORK_S):
            # Workers already do the work: loading in workers is not the advice, they are.
            evidence.append(f"meanwhile its child processes used {fmt_seconds(children.value)}"
                            f" of CPU (child_cpu_time, from {children.source})")
            action = ("it may be waiting for its child processes (DataLoader workers, a "
                      "pool): where they spend their time decides its wait (a sampler that "
                      f"follows child processes shows it); {where}")
        out.append(Finding(
            rule="time.waiting",
            title=f"the main thread waits {idle[0]:.0f}% of the wall time",
            layer="run", severity="warning", evidence=evidence, action=action,
            source="perfstack"))
    return out
