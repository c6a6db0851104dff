"""Where the main thread waits: the wait pass against the main pass.

The main pass samples running code only (py-spy leaves out a thread that sleeps, blocks on a
lock or waits in a system call), so its time budget calls everything else "waiting" without
saying where. The wait pass (``--idle``, a low rate, beside it in the same run) samples the
main thread whatever it does. Two figures come from it:

- the seconds the main thread spent inside torch.compile, waits included: the compiler
  waiting for its compile workers or for the C++ compiler it spawned is compiling, not
  waiting (issue 72), so the budget moves that part of "waiting" into "compile";
- where it waits: per place (the innermost Python frame, with the workload's own frame that
  led there), the wait pass's seconds less the main pass's, largest first. Both passes
  estimate the same running time, so what is left is the time the main thread was idle there;
  small differences are sampling noise and are not listed.
"""

from __future__ import annotations

from typing import Any

from perfstack.records import datarecord
from perfstack.report import Better, Metric, Quantity, Row

from .compiling import CompilerFrames
from .shares import loading_frames, running_with
from .speedscope import (
    _is_native,
    _main_profile,
    _OwnFrames,
    frame_key,
    is_ours,
    key_parts,
)

SOURCE = "pyspy"
#: A place is listed when the main thread waited there at least this long (s) ...
MIN_WAIT_S = 0.1
#: ... and at least this share of the wall time (%).
MIN_WAIT_SHARE = 2.0
#: How many places are listed.
TOP = 5
#: Standard errors by which the wait pass must exceed the main pass at a place.
NOISE = 3.0

#: (innermost Python frame, the workload's own frame above it or "" when there is none or the
#: innermost is the workload's, inside torch.compile)
Place = tuple[str, str, bool]
#: A speedscope file's frames and profiles.
Profile = tuple[list[dict[str, Any]], list[dict[str, Any]]]


@datarecord
class Waits:
    """What the wait pass says of the main thread."""

    #: the share of the main thread's sampled time inside torch.compile, waits included: a
    #: share, not the samples' seconds, since a sampler starved of CPU (three of them beside
    #: a compiling workload on 2 CPUs) drops ticks, most in the busiest stretches
    compile_share: float
    places: dict[Place, float]  # seconds idle per place, the noise left in
    #: the share (%) of the main thread's time in the workload's running part (outside
    #: start-up, teardown and torch.compile), waits included, with torch's DataLoader on the
    #: stack: what a timer around the loop's next(batch) measures; None where none ran
    loading_share: float | None = None


def _seconds_by_place(frames: list[dict[str, Any]], profiles: list[dict[str, Any]],
                      home: str | None) -> tuple[dict[Place, tuple[float, float]], float]:
    """The main thread's seconds per place with their sampling variance (each sample's
    weight squared, summed: a count of samples is Poisson), and the share of its sampled
    time inside torch.compile."""
    out: dict[Place, tuple[float, float]] = {}
    compiling = 0.0
    profile = _main_profile(profiles)
    if profile is None:
        return out, compiling
    total = sum(profile.get("weights", [])) or 1.0
    compiling_now = CompilerFrames(frames)
    python = [not _is_native(f) and not is_ours(f) for f in frames]
    ours = _OwnFrames(frames, home)
    for stack, weight in zip(profile.get("samples", []), profile.get("weights", []),
                             strict=False):
        frames_py = [i for i in stack if python[i]]
        if not frames_py:
            continue
        inside = compiling_now(stack)
        if inside:
            compiling += weight
        own = [i for i in frames_py if ours(i)]
        leaf = frame_key(frames[frames_py[-1]])
        # the workload's own frame that led there; none when the innermost is its own
        caller = frame_key(frames[own[-1]]) if own and own[-1] != frames_py[-1] else ""
        seconds, variance = out.get((leaf, caller, inside), (0.0, 0.0))
        out[(leaf, caller, inside)] = (seconds + weight, variance + weight * weight)
    return out, compiling / total


def read_waits(wait: Profile, main: Profile, home: str | None) -> Waits | None:
    """Compare the wait pass's (frames, profiles) of the workload's process with the main
    pass's; None when the wait pass sampled nothing. ``home``: the workload's folder (its own
    frames are the callers named). A place is kept where the wait pass's seconds exceed the
    main pass's by more than NOISE standard errors of the difference: two samplers of the
    same running code differ by chance."""
    if not wait[1]:
        return None
    waited, compiling = _seconds_by_place(*wait, home)
    ran, _ = _seconds_by_place(*main, home)
    places = {}
    for place, (seconds, variance) in waited.items():
        running, running_variance = ran.get(place, (0.0, 0.0))
        if seconds - running > NOISE * (variance + running_variance) ** 0.5:
            places[place] = seconds - running
    running, (loading,) = running_with(*wait, loading_frames(wait[0]))
    return Waits(compiling, places, 100 * loading / running if running > 0 else None)


def _where(key: str) -> dict[str, Any]:
    """'func (file:line)' -> its function, file and line, as a row's attributes."""
    return dict(zip(("function", "file", "line"), key_parts(key), strict=True))


def wait_metrics(waits: Waits) -> list[Metric]:
    """``data_loading_time_share``: the loop's time waiting for its batches, waits included
    (``data_loading_share``, of the running time only, misses a DataLoader that sleeps or
    reads)."""
    if waits.loading_share is None:
        return []
    return [Metric("data_loading_time_share", waits.loading_share, "%", "python", SOURCE,
                   Better.LOWER, detail=True,
                   description="of the main thread's time outside start-up, teardown and "
                   "torch.compile, waits included, with torch's DataLoader on the stack "
                   "(py-spy's wait pass)")]


def wait_rows(waits: Waits, wall_s: float | None) -> list[Row]:
    """The places the main thread waited longest, as Python-layer rows of kind "wait":
    ``wait_time`` (s) and ``wait_share`` (% of the wall time); the innermost Python frame
    (``function``, ``file``, ``line``), the workload's own frame that led there (``caller``:
    the same three, or None) and whether it was inside torch.compile (``in_compile``)."""
    rows: list[Row] = []
    for (leaf, caller, inside), seconds in sorted(waits.places.items(), key=lambda kv: -kv[1]):
        share = 100 * seconds / wall_s if wall_s else None
        if seconds < MIN_WAIT_S or (share is not None and share < MIN_WAIT_SHARE):
            continue
        values = {"wait_time": Quantity(seconds, "s")}
        if share is not None:
            values["wait_share"] = Quantity(share, "%")
        rows.append(Row(f"wait:{leaf}<-{caller}" + (" [compile]" if inside else ""), leaf,
                        SOURCE, values, {"kind": "wait", **_where(leaf),
                                         "caller": _where(caller) if caller else None,
                                         "in_compile": inside}))
        if len(rows) == TOP:
            break
    return rows

