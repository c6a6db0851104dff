"""The gil backend's verdict from its thread sweeps: GIL-bound, I/O-bound, native code that
releases the GIL, or threads that help only partly. Plain data in, a finding out: tested with
given figures and recorded sweeps (tests/test_gil.py)."""

from __future__ import annotations

import statistics

from perfstack.records import datarecord, field
from perfstack.report import Finding

SOURCE = "gil"
#: Below this share of the ideal extra speed-up, more threads are "not helping".
GIL_BOUND_GAIN = 0.3
#: At or above this parallel efficiency, the workload "scales".
SCALES_EFFICIENCY = 0.6


@datarecord
class Series:
    """The sweep of one interpreter: a measure per thread count, from repeated runs."""

    label: str
    free_threaded: bool
    measure: str  # "throughput <unit>" or "wall time"
    values: dict[int, list[float]] = field(default_factory=dict)  # higher is better
    cpu: dict[int, list[float]] = field(default_factory=dict)  # CPUs busy per wall second
    #: the threads each run started, per thread count asked for
    threads: dict[int, list[int]] = field(default_factory=dict)
    failure: str | None = None

    def unchanged(self) -> int | None:
        """The one thread count every run had, whatever count was asked for (the workload
        ignored it), or None where the counts followed (or were not seen)."""
        seen = {max(v) for v in self.threads.values() if v}
        return seen.pop() if len(seen) == 1 and len(self.threads) > 1 else None

    def median(self, n: int) -> float | None:
        """Return the median of the measure at ``n`` threads, or None when none ran."""
        values = self.values.get(n)
        return statistics.median(values) if values else None

    def speedup(self, n: int) -> float | None:
        """Return the measure at ``n`` threads over the measure at one thread."""
        one, at = self.median(1), self.median(n)
        return at / one if one and at is not None else None


def verdict(current: Series, free: Series | None, counts: list[int],
            held_share: float | None, thread_arg: str | None = None) -> Finding:
    """Return the verdict finding from the sweeps (and the sampled GIL share, if any); a
    sweep whose runs all had the same threads measured nothing, and says so."""
    same = current.unchanged()
    if same is not None:
        asked = ", ".join(str(n) for n in sorted(current.threads))
        how = (f"{thread_arg} and PERFSTACK_THREADS" if thread_arg else "PERFSTACK_THREADS")
        return Finding(
            "gil.threads-unchanged",
            f"the thread sweep measured nothing: every run started {same} thread"
            f"{'' if same == 1 else 's'}, whatever {how} asked ({asked})",
            "python", "warning",
            [f"{current.label}: {same} threads started in every run (counted as they "
             "started)", f"the sweep set {how} to {asked}"],
            "name the argument that sets the workload's thread count: perfstack run --plugins "
            "gil --gil-thread-arg=--threads ... (it is set in every run of the sweep), or read "
            "PERFSTACK_THREADS in the workload", SOURCE)
    n = max(c for c in counts if current.values.get(c)) if current.values else 1
    gain = current.speedup(n)
    evidence = [f"{current.label}: {n} threads give {gain:.2f}x of 1 thread "
                f"({current.measure}, median of {len(current.values.get(n, []))} runs)"
                if gain is not None else f"{current.label}: no speed-up could be computed"]
    if held_share is not None:
        evidence.append(f"py-spy: some thread held the GIL {held_share:.0f}% of the run "
                        "(start-up and imports included)")
    ft_text = ""
    if free is not None:
        ft_gain = free.speedup(n)
        if ft_gain is not None:
            ft_text = f", {ft_gain:.1f}x free-threaded"
            evidence.append(f"{free.label} (PYTHON_GIL=0): {n} threads give {ft_gain:.2f}x "
                            "(timing only: py-spy cannot sample free-threaded builds yet)")
            one, ft_one = current.median(1), free.median(1)
            if one and ft_one:
                evidence.append(f"one thread on {free.label} runs at {ft_one / one:.2f}x the "
                                f"speed of {current.label} (the single-thread cost of the "
                                "free-threaded build, and of the version difference)")
        elif free.failure:
            evidence.append(f"{free.label}: the workload failed: {free.failure}")
    cpu = statistics.median(current.cpu[n]) if current.cpu.get(n) else None
    if cpu is not None:
        evidence.append(f"CPU use at {n} threads: {cpu:.2f} CPUs busy per wall second")
    headline = (f"{n} threads give {gain:.2f}x on {current.label}{ft_text}"
                if gain is not None else "")
    if gain is None or n == 1:
        return Finding("gil.unknown", "the thread sweep could not be judged", "python", "info",
                       evidence, "check that the workload runs with PERFSTACK_THREADS set", SOURCE)
    efficiency = gain / n
    if gain < 1 + GIL_BOUND_GAIN * (n - 1) and (held_share is None or held_share >= 50):
        return Finding(
            "gil.bound", f"GIL-bound: {headline}", "python", "warning", evidence,
            "the threads take turns holding the GIL: use processes (multiprocessing, "
            "concurrent.futures.ProcessPoolExecutor), move the hot loop into native code that "
            "releases the GIL (torch, NumPy), or run on a free-threaded Python"
            + (" (measured above)" if ft_text else " (--gil-python PATH)"), SOURCE)
    if efficiency >= SCALES_EFFICIENCY:
        if cpu is not None and cpu < 0.5 * n:
            return Finding(
                "gil.io-bound", f"I/O-bound, not GIL-bound: {headline}", "python", "info",
                evidence, "threads spend their time waiting on I/O with the GIL released; more "
                "threads (or asyncio) raise throughput until the other side saturates", SOURCE)
        return Finding(
            "gil.releases", f"not GIL-bound, native code releases the GIL: {headline}",
            "python", "info", evidence, "threads already run in parallel; keep per-thread "
            "library threads (torch.set_num_threads) x Python threads within the cores", SOURCE)
    return Finding(
        "gil.limited", f"threads help only partly: {headline}", "python", "warning", evidence,
        "something serializes the threads: the GIL in part of the work, a lock, memory "
        "bandwidth, or library thread pools oversubscribing the cores", SOURCE)
