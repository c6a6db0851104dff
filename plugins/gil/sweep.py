"""The thread sweep: the thread counts asked for, how a count reaches the workload (the
variable, its argument, the in-process counter), and the runs at each count and interpreter."""

from __future__ import annotations

from perfstack.machine import cpus
from perfstack.plugin.backend import (
    InProcessHook,
    Outcome,
    RunContext,
)

from .threadcount import read as read_thread_count
from .verdict import Series

THREADS_ENV = "PERFSTACK_THREADS"


def default_thread_counts() -> list[int]:
    """Return 1, 2, 4, ... up to the CPUs this process may use, and that count itself."""
    cores = cpus.usable_cpus() or 1
    counts, n = [], 1
    while n < cores:
        counts.append(n)
        n *= 2
    return [*counts, cores] if cores > 1 else [1, 2]


def parse_thread_counts(text: str | None) -> list[int]:
    """Parse ``--gil-threads 1,2,4``; an empty value means the default counts."""
    if not text:
        return default_thread_counts()
    try:
        counts = sorted({int(part) for part in str(text).split(",") if part.strip()})
    except ValueError:
        raise ValueError(f"--gil-threads takes counts like 1,2,4, got {text!r}") from None
    if not counts or counts[0] < 1:
        raise ValueError(f"--gil-threads takes positive counts, got {text!r}")
    return counts if counts[0] == 1 else [1, *counts]


def bad_thread_counts(text: str) -> str | None:
    """Why ``--gil-threads`` cannot be used, or None (checked before anything runs)."""
    try:
        parse_thread_counts(text) if text else None
    except ValueError as exc:
        return str(exc)
    return None


def _measure_of(outcome: Outcome) -> tuple[float | None, str, float | None]:
    """Return (value where higher is better, what it is, CPU utilisation) for one run."""
    from perfstack.runfolder.rundir import RunFolder

    metrics = {m["name"]: m for m in RunFolder(outcome.artifact_dir).workload_metrics()}
    cpu = metrics.get("cpu_utilisation", {}).get("value")
    record = outcome.record
    if cpu is None and record.wall_s:
        cpu = (record.rusage.get("user_s", 0.0) + record.rusage.get("system_s", 0.0)) \
            / record.wall_s
    if "throughput" in metrics:
        m = metrics["throughput"]
        if m["better"] == "lower":
            return (1 / m["value"] if m["value"] else None), f"1/throughput {m['unit']}", cpu
        return m["value"], f"throughput {m['unit']}".strip(), cpu
    if record.wall_s:
        return 1 / record.wall_s, "1/wall time (start-up included)", cpu
    return None, "wall time", cpu


def _failure(outcome: Outcome) -> str:
    tail = [line for line in (outcome.record.stderr_tail or "").splitlines() if line.strip()]
    last = tail[-1].strip() if tail else ""
    return f"{outcome.record.exit.describe()}" + (f": {last[:200]}" if last else "")


def with_thread_arg(args: list[str], flag: str, n: int) -> list[str]:
    """The workload's arguments with ``flag`` set to ``n``: its value replaced where it is
    given (``--threads 4``, ``--threads=4``), else appended."""
    out, i = [], 0
    found = False
    while i < len(args):
        a = args[i]
        if a == flag and i + 1 < len(args):
            out += [flag, str(n)]
            i, found = i + 2, True
            continue
        if a.startswith(flag + "="):
            out.append(f"{flag}={n}")
            i, found = i + 1, True
            continue
        out.append(a)
        i += 1
    return out if found else [*out, flag, str(n)]


def thread_flag(value: object) -> str:
    """``--gil-thread-arg`` as the workload's flag: 'threads' is '--threads'; '' for none."""
    text = str(value or "").strip()
    return text if not text or text.startswith("-") else f"--{text}"


COUNTER = InProcessHook(f"{__package__}.threadcount:start")


def sweep(ctx: RunContext, counts: list[int], repeat: int,
          interpreters_: list[tuple[str | None, str, bool]]) -> list[Series]:
    """Run the workload per interpreter and thread count, ``repeat`` times, interleaved;
    ``--gil-thread-arg`` sets the count in the workload's arguments too."""
    assert ctx.run_extra is not None
    flag = thread_flag(ctx.options.get("thread_arg"))
    series = [Series(label, ft, "") for _, label, ft in interpreters_]
    for r in range(1, repeat + 1):
        for (python, _, ft), s in zip(interpreters_, series, strict=True):
            if s.failure is not None:
                continue
            for n in counts:
                env = {THREADS_ENV: str(n)}
                if ft:
                    env["PYTHON_GIL"] = "0"
                tag = "free-threaded" if ft else "current"
                args = with_thread_arg(ctx.workload.args, flag, n) if flag else None
                outcome = ctx.run_extra(f"{tag}-t{n}-r{r}", env=env, python=python, args=args,
                                        inprocess=[COUNTER])
                if not outcome.record.exit.clean:
                    s.failure = _failure(outcome)
                    break
                alive = read_thread_count(outcome.artifact_dir)
                if alive is not None:
                    s.threads.setdefault(n, []).append(alive)
                value, measure, cpu = _measure_of(outcome)
                if value is None:
                    continue
                s.measure = measure
                s.values.setdefault(n, []).append(value)
                if cpu is not None:
                    s.cpu.setdefault(n, []).append(cpu)
    return series
