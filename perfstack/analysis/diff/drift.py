"""How much the machine itself moved between two reports: the probes, and what they allow.

Every run times a fixed piece of work in the workload's own process
(``perfstack.machine.probe``), so a change in the probe's time is a change in the machine, not
in the workload. ``diff`` uses that to tell drift from change:

- between two separate sessions, a time or rate metric changes beyond noise only when both the
  raw change and the change corrected for the machine's drift exceed the between-session noise
  (``SESSION_NOISE`` unless told otherwise), in the same direction. A machine that ran 14%
  slower explains a 17% slower workload; a workload 30% slower on a machine 50% slower is still
  30% slower.
- in ``perfstack ab`` the two sides' runs were interleaved, so drift hit both alike; the probe
  then only confirms it.

Where the machine counted instructions, the counts say whether the work itself changed.
"""

from __future__ import annotations

import math
import statistics

from perfstack.records import datarecord
from perfstack.report import Report, RunRecord

#: The between-session noise assumed when nothing better is known: how far two sessions of the
#: same workload drift apart on a shared machine although each session's repeats agree. On the
#: 2-vCPU cloud VM perfstack is developed on, A/A pairs of sessions a minute apart moved wall
#: time by up to 7% and a workload's throughput by up to 17%, mostly explained by the probe;
#: after its correction, 10% holds every pair measured (docs/performance.md,
#: bench/aa_ab.py). Measure your own machine the same way and pass --session-noise.
SESSION_NOISE = 0.10
#: Instruction counts that differ by less than this are "the same work".
SAME_WORK = 0.01


def run_speed(record: RunRecord, wall_clock: bool = True) -> float | None:
    """Return how slow the machine was for one run, as a time (s; larger is slower), or None
    when the run has no probe: the geometric mean of the interpreter probe (CPU time) before
    and after the script. With ``wall_clock``, times (on + waiting for a CPU) / on a CPU of
    the main thread in between: a CPU shared with other programs slows wall-clock figures by
    that much, and CPU-time figures not at all."""
    if not record.probe:
        return None
    times = [record.probe[w]["python_s"] for w in ("start", "end")
             if record.probe.get(w, {}).get("python_s")]
    if not times:
        return None
    speed = math.exp(sum(math.log(t) for t in times) / len(times))
    sched = record.probe.get("sched")
    if wall_clock and sched and sched.get("cpu_s", 0) > 0:
        speed *= 1 + sched["wait_s"] / sched["cpu_s"]
    return speed


def baseline_speeds(report: Report, wall_clock: bool = True) -> list[float]:
    """Return the machine's slowness (``run_speed``) in each clean baseline run, in order."""
    out = []
    for record in report.run.runs:
        if record.role == "baseline" and record.exit.clean:
            speed = run_speed(record, wall_clock)
            if speed is not None:
                out.append(speed)
    return out


def instruction_counts(report: Report) -> list[float] | None:
    """Return the instructions of each clean baseline run, or None where not all were counted."""
    counts = [r.instructions.value for r in report.run.runs
              if r.role == "baseline" and r.exit.clean and r.instructions is not None]
    if not counts or any(c is None for c in counts):
        return None
    return [float(c) for c in counts if c is not None]


def instructions_reason(report: Report) -> str | None:
    """Return why the baseline's instructions were not counted, when they were asked for."""
    return next((r.instructions.reason for r in report.run.runs
                 if r.instructions is not None and r.instructions.value is None
                 and r.instructions.reason), None)


@datarecord
class MachineDrift:
    """How the machine's speed and the workload's work compare between two reports."""

    change: float | None  # machine slowness new / base - 1, for wall-clock figures: > 0 slower
    cpu_change: float | None  # the same for CPU-time figures: the probe alone, no CPU sharing
    n_base: int
    n_new: int
    instructions_change: float | None  # median instructions new / base - 1, when counted
    instructions_note: str | None  # why instructions are unknown
    session_noise: float  # the between-session noise changes are judged against
    paired: bool  # perfstack ab: interleaved runs, drift hit both sides alike

    def describe(self) -> str:
        """Return one line a reader can quote about the machine between the two reports."""
        if self.change is None:
            speed = "the machine's speed is unknown (a report without the probe)"
        elif self.paired:
            speed = (f"the probe's median moved {_pct(self.change)} between the sides, whose "
                     "runs alternated")
        elif abs(self.change) < 0.02:
            speed = f"the machine ran at the same speed ({_pct(self.change)}, probe)"
        else:
            way = "slower" if self.change > 0 else "faster"
            speed = f"the machine ran {abs(self.change):.0%} {way} during NEW (probe"
            shared = ((1 + self.change) / (1 + self.cpu_change) - 1
                      if self.cpu_change is not None else 0.0)
            if abs(shared) >= 0.02:
                speed += (f"; waiting for CPUs shared with other programs "
                          f"{_pct(shared)} of it")
            speed += ")"
        if self.instructions_change is not None:
            same = abs(self.instructions_change) < SAME_WORK
            work = (f"; the workload retired {'the same' if same else 'a different'} number of "
                    f"instructions ({_pct(self.instructions_change)})")
        elif self.instructions_note:
            work = "; instructions not counted"
        else:
            work = ""
        if self.paired:
            noise = "; runs interleaved (perfstack ab), so drift hit both sides alike"
        else:
            noise = (f"; separate sessions: changes within ±{self.session_noise:.0%} of "
                     "between-session noise are not called changes")
        return speed + work + noise


def _pct(change: float) -> str:
    return f"{100 * change:+.1f}%"


def machine_drift(base: Report, new: Report, session_noise: float = SESSION_NOISE,
                  paired: bool = False) -> MachineDrift:
    """Return how the machine moved from ``base`` to ``new``."""
    a, b = baseline_speeds(base), baseline_speeds(new)
    change = statistics.median(b) / statistics.median(a) - 1 if a and b else None
    ca, cb = baseline_speeds(base, wall_clock=False), baseline_speeds(new, wall_clock=False)
    cpu_change = statistics.median(cb) / statistics.median(ca) - 1 if ca and cb else None
    ia, ib = instruction_counts(base), instruction_counts(new)
    work = statistics.median(ib) / statistics.median(ia) - 1 if ia and ib else None
    note = None if work is not None else (instructions_reason(base) or instructions_reason(new))
    return MachineDrift(change, cpu_change, len(a), len(b), work, note, session_noise, paired)


def speed_ratio_of_runs(base: RunRecord | None, new: RunRecord | None,
                        wall_clock: bool = True) -> float | None:
    """Return the machine's slowness change between two single runs (probe), or None."""
    a = run_speed(base, wall_clock) if base is not None else None
    b = run_speed(new, wall_clock) if new is not None else None
    return b / a - 1 if a and b else None


def drift_for(metric_layer: str, machine: MachineDrift) -> float | None:
    """Return the drift that applies to a metric: figures of the whole run (layer ``run``:
    wall time, the workload's own throughput) are wall-clock and feel a shared CPU; the
    others (CPU times, per-layer figures) feel only how fast the machine runs code."""
    return machine.change if metric_layer == "run" else machine.cpu_change


def scales_with_speed(unit: str) -> int:
    """Return how a metric in ``unit`` moves when the machine slows: 1 for times (s), -1 for
    rates (per second), 0 for what the machine's speed does not change (bytes, counts, %)."""
    if unit == "s":
        return 1
    if unit.endswith("/s"):
        return -1
    return 0


def corrected(change: float, machine: float | None, unit: str) -> float:
    """Return ``change`` with the machine's own change taken out (unchanged where the unit
    does not scale with the machine's speed, or the drift is unknown)."""
    direction = scales_with_speed(unit)
    if machine is None or direction == 0:
        return change
    return (1 + change) / (1 + machine) ** direction - 1
