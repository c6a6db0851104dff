"""What py-spy's samples conclude: data loading in the workload's own process, and the time
of its child processes (DataLoader workers, a multiprocessing pool), sampled or not."""

from __future__ import annotations

from perfstack.analysis.origin import short_key, workload_dir
from perfstack.analysis.rules.time import CHILDREN_AT_WORK_S
from perfstack.analysis.views.drilldown import child_words
from perfstack.report import Finding, Layer, Report, Row
from perfstack.report.units import fmt_seconds, pct

from .processes import NAME_PREFIX
from .speedscope import SOURCE

#: Share of samples (%) under torch's data-loading code from which loading is the bottleneck.
DATA_LOADING_SHARE = 20.0
#: The share (%) of all the CPU time the workload's processes used from which a run that did
#: not sample its children says so (and at least the core's CHILDREN_AT_WORK_S seconds).
CHILD_CPU_SHARE = 10.0


def _seconds(row: Row, name: str) -> float:
    q = row.values.get(name)
    return float(q.value) if q is not None and isinstance(q.value, (int, float)) else 0.0


def _plain(row: Row, home: str | None) -> str:
    """A function as the drill-down names it: its file's path short (from the workload's
    folder, or inside its library), not as the interpreter had it."""
    file, line = row.attrs.get("file"), row.attrs.get("line")
    function = row.attrs.get("function")
    if not isinstance(file, str) or not isinstance(function, str):
        return row.name.removeprefix(NAME_PREFIX).strip()
    return short_key(function, file, line if isinstance(line, int) else None, home)


def _outside_startup(report: Report) -> float:
    """How many times its share of all samples a function's share of the samples outside
    start-up (and torch.compile's work) is: (start-up + compiling + running) over running,
    from py-spy's own time budget (idle time has no samples); 1 where the budget is
    unknown."""
    def share(part: str) -> float | None:
        m = report.metric(f"budget.{part}")
        return (float(m.value) if m is not None and m.source == SOURCE
                and isinstance(m.value, (int, float)) else None)

    startup, interpreter, native = share("startup"), share("interpreter"), share("native")
    if startup is None or interpreter is None or native is None or interpreter + native <= 0:
        return 1.0
    return (startup + (share("compile") or 0.0) + interpreter + native) / (interpreter + native)


def data_loading(report: Report) -> list[Finding]:
    """Flag a run whose samples in the workload's own process, outside start-up, are mostly
    inside torch's data loading (DataLoader, datasets, collate): the batches are made where
    the step waits. A short run's imports do not hide it (the samples of a run are mostly
    imports when its loop is short), nor pass for it (importing torch.utils.data is not
    loading). A DataLoader that has workers already is not told to get them: what its workers
    do is the children findings' to say."""
    # Importing torch.utils.data is start-up, not loading (its modules' <module> frames).
    rows = [r for r in report.layers.get(Layer.PYTHON, [])
            if r.source == SOURCE and r.attrs.get("process") != "child"
            and "torch/utils/data/" in str(r.attrs.get("file", ""))
            and r.attrs.get("function") != "<module>"
            and float(r.attrs.get("import_share") or 0.0) < 50.0]
    if any(str(r.attrs.get("function", "")).startswith("_MultiProcessingDataLoaderIter")
           for r in rows):
        return []  # it loads in workers already: where they spend it is the children's say
    share = max((float(r.values["total_share"].value or 0.0) for r in rows
                 if "total_share" in r.values), default=0.0)
    # The wait pass's share counts the loader's waits (a read, a sleep) as a timer around
    # next(batch) does; the running-time share, the main thread's own running samples.
    timed, measured = report.metric("data_loading_time_share"), report.metric(
        "data_loading_share")
    basis, name = "working time (waits included)", "data_loading_time_share"
    if timed is not None and timed.source == SOURCE and timed.value is not None:
        work = float(timed.value)
    elif measured is not None and measured.source == SOURCE and measured.value is not None:
        work, basis, name = float(measured.value), "running time", "data_loading_share"
    else:  # a report of perfstack before data_loading_share
        work, basis = min(100.0, share * _outside_startup(report)), "running time"
    if work < DATA_LOADING_SHARE or not rows:
        return []
    top = max(rows, key=lambda r: float(r.values["total_share"].value or 0.0))
    return [Finding(
        rule="python.data-loading",
        title=(f"data loading: {work:.0f}% of the main thread's {basis} is inside "
               "torch's DataLoader"),
        layer="python", severity="warning",
        evidence=[f"{_plain(top, workload_dir(report))}: {share:.1f}% of the workload "
                  f"process's samples (inclusive); {work:.0f}% of the main thread's {basis} "
                  f"({name})"],
        action=("load in worker processes (DataLoader(num_workers=N, pin_memory=True, "
                "persistent_workers=True)), make __getitem__ cheaper, or prefetch"),
        source=SOURCE)]


#: An optimizer's per-parameter loop from this share (%) of the main thread's running time.
OPTIMIZER_LOOP_SHARE = 10.0


def optimizer_loop(report: Report) -> list[Finding]:
    """Flag a torch optimizer that updates its parameters one at a time (no ``foreach``, no
    ``fused``) when that loop is a real part of the step: a tensor op per parameter and per
    update term, where foreach runs one per term and fused one in all."""
    share = report.metric("optimizer_loop_share")
    if share is None or share.source != SOURCE or share.value is None \
            or float(share.value) < OPTIMIZER_LOOP_SHARE:
        return []
    rows = [r for r in report.layers.get(Layer.PYTHON, []) if r.source == SOURCE
            and str(r.attrs.get("function", "")).startswith("_single_tensor_")
            and "torch/optim/" in str(r.attrs.get("file", ""))]
    ops = report.layers.get(Layer.FRAMEWORK, [])
    steps = sorted({r.name.split("#", 1)[1].removesuffix(".step") for r in ops
                    if r.name.startswith("Optimizer.step#")})
    name = steps[0] if len(steps) == 1 else "the optimizer"
    evidence = [f"{float(share.value):.0f}% of the main thread's running time in its "
                "per-parameter update (optimizer_loop_share, from pyspy)"]
    if rows:
        top = max(rows, key=lambda r: float(r.values["total_share"].value or 0.0))
        evidence.append(f"{_plain(top, workload_dir(report))}: the loop over the parameters")
    if ops and steps and not any(r.name.startswith(("aten::_foreach_", "aten::_fused_"))
                                 for r in ops):
        evidence.append(f"torch's ops of the step hold no _foreach_ or _fused_ op "
                        f"(Optimizer.step#{steps[0]}.step, from torch)")
    return [Finding(
        rule="python.optimizer-loop",
        title=f"{name} updates its parameters one at a time: {float(share.value):.0f}% of the "
              "main thread's running time",
        layer="python", severity="warning", evidence=evidence,
        action=(f"build it with fused=True ({name}(params, ..., fused=True): one kernel for "
                "the whole update) or foreach=True (one op per update term over all the "
                "parameters); torch picks foreach by itself only on CUDA"),
        source=SOURCE)]


def children(report: Report) -> list[Finding]:
    """Where the workload's child processes did work: sampled (``--pyspy-subprocesses``),
    the functions they spent it in; not sampled, how much CPU py-spy did not see."""
    python = [r for r in report.layers.get(Layer.PYTHON, []) if r.source == SOURCE]
    if not python:
        return []
    threads = [r for r in python if r.attrs.get("process") == "child"
               and r.attrs.get("kind") == "thread"]
    if threads:
        return [_sampled(report, python, threads)]
    return _unsampled(report)


def _sampled(report: Report, python: list[Row], threads: list[Row]) -> Finding:
    processes = threads[0].attrs.get("processes")
    who = child_words(processes)
    total = sum(_seconds(r, "time") for r in threads)
    own = sorted((r for r in python if r.attrs.get("process") == "child"
                  and _seconds(r, "own_time") > 0), key=lambda r: -_seconds(r, "own_time"))
    hot = own or sorted((r for r in python if r.attrs.get("process") == "child"
                         and _seconds(r, "self_time") > 0),
                        key=lambda r: -_seconds(r, "self_time"))
    measure = "own_time" if own else "self_time"
    home = workload_dir(report)
    where = f", most in {_plain(hot[0], home)}" if hot else ""
    evidence = [f"{_plain(r, home)}: {fmt_seconds(_seconds(r, measure))}"
                + (" with the library code it calls" if own else " of its own time")
                + f", {pct(100 * _seconds(r, measure) / total)} of their samples"
                for r in hot[:2] if total]
    idle = report.metric("budget.idle")
    if idle is not None and isinstance(idle.value, (int, float)):
        evidence.append(f"meanwhile the workload's main thread waited {pct(idle.value)} of "
                        "its wall time (budget.idle)")
    return Finding(
        rule="python.child-processes",
        title=f"the workload's {who} ran {fmt_seconds(total)} of Python{where}",
        layer="python", severity="info", evidence=evidence,
        action=("where they are DataLoader workers, each batch costs the main thread their "
                "time divided by num_workers: make that function cheaper, or raise "
                "num_workers while CPUs are free"),
        source=SOURCE)


def _unsampled(report: Report) -> list[Finding]:
    child = report.metric("child_cpu_time")
    user, system = report.metric("cpu_user_time"), report.metric("cpu_system_time")
    if child is None or not isinstance(child.value, (int, float)) or user is None:
        return []
    everything = float(user.value or 0.0) + float(system.value or 0.0 if system else 0.0)
    seconds = float(child.value)
    if (seconds < CHILDREN_AT_WORK_S or not everything
            or 100 * seconds / everything < CHILD_CPU_SHARE):
        return []
    compiled = report.metric("compile_time")
    who = ("torch.compile's compile workers (inductor builds kernels in a pool of processes), "
           "DataLoader workers, a multiprocessing pool" if compiled is not None
           and compiled.value else "DataLoader workers, a multiprocessing pool, compilers")
    return [Finding(
        rule="python.children-unsampled",
        title=(f"the workload's child processes used {fmt_seconds(seconds)} of CPU "
               f"({pct(100 * seconds / everything)} of all), which py-spy did not sample"),
        layer="python", severity="info" if compiled is not None and compiled.value
        else "warning",
        evidence=[f"child_cpu_time {fmt_seconds(seconds)} of {fmt_seconds(everything)} user "
                  f"and system CPU time ({child.source}): {who}"],
        action=("sample the Python ones too: perfstack run --plugins pyspy "
                "--pyspy-subprocesses ... (listed apart, as [child processes]; a compiler "
                "has no Python to sample)"),
        source=SOURCE)]
