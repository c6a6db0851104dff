"""The run's ceilings: this machine's, from the cache, or measured once after the runs.

Measured only when a backend gave ops a cost (FLOPs or bytes) and the cache has none for
this machine at the workload's thread count; alone on the machine, after every profiled
run has ended (``perfstack.machine.roofline.ceilings`` runs the probe in a process of its own).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

from perfstack.machine.roofline import ceilings, datasheets
from perfstack.machine.roofline.ceilingrecord import Ceilings
from perfstack.plugin.backend import Collected
from perfstack.run.options import Progress


def costed(collected: Iterable[Collected]) -> set[str]:
    """The devices whose rows carry a cost (FLOPs or bytes) to put on a roofline: ``gpu``
    where the row has device time, else ``cpu``."""
    out = set()
    for one in collected:
        for rows in one.rows.values():
            for row in rows:
                if "flops" in row.values or "bytes" in row.values:
                    device = row.values.get("device")
                    out.add("gpu" if device is not None and device.value else "cpu")
    return out


def threads_of(environment: dict[str, Any]) -> int | None:
    """The intra-op thread count the workload's torch ran with, when it reported one."""
    torch = environment.get("torch")
    found = torch.get("intra_op_threads") if isinstance(torch, dict) else None
    return found if isinstance(found, int) and found > 0 else None


def recorded_ceilings(recorded: dict[str, Any]) -> dict[str, Any]:
    """The ceilings of traces recorded elsewhere: their GPU's datasheet (from the first
    rank's ``device_properties``), or a ceilings file named by PERFSTACK_CEILINGS (measured
    on the machine that recorded them); never this machine's."""
    out: dict[str, Any] = {}
    for env in recorded.values():
        props = env.get("device_properties") if isinstance(env, dict) else None
        if isinstance(props, list) and props and isinstance(props[0], dict):
            found = datasheets.ceilings_of(props[0])
            if found is not None:
                out["gpu"] = found.as_dict()
                break
    chosen = os.environ.get(ceilings.CEILINGS_ENV)
    if chosen and chosen != "off":
        mine = ceilings.cached(None)
        if mine is not None:
            out.setdefault(mine.device, mine.as_dict())
    return out


def run_ceilings(environment: dict[str, Any], collected: Iterable[Collected],
                 progress: Progress, may_measure: bool) -> None:
    """Put the machine's ceilings in the report's environment (``ceilings.cpu``, and
    ``ceilings.gpu`` measured on the first CUDA device where ops ran there), measuring them
    first when none are cached and ``may_measure``; why there are none otherwise
    (``ceilings_unknown``)."""
    threads = threads_of(environment)
    for kind in sorted(costed(collected)):
        device = "cuda" if kind == "gpu" else "cpu"
        found = ceilings.cached(threads if kind == "cpu" else None, device)
        if found is None and os.environ.get(ceilings.CEILINGS_ENV) == "off":
            environment["ceilings_unknown"] = f"{ceilings.CEILINGS_ENV}=off"
            return
        if found is None and may_measure:
            found, why = _measure(threads if kind == "cpu" else None, device, progress)
            if why is not None:
                environment["ceilings_unknown"] = why
                return
        if found is None:
            environment["ceilings_unknown"] = ("the run was interrupted before they were "
                                               "measured")
            return
        doubt = doubted(found, collected, kind, environment)
        if doubt is not None and may_measure and os.environ.get(ceilings.CEILINGS_ENV) is None \
                and _again(found):
            # A ceiling an op ran above is wrong (measured under load, say): measured again,
            # alone now that the runs are over; the cache keeps the best of both.
            again, _ = _measure(threads if kind == "cpu" else None, device, progress,
                                why=f"{doubt}: measuring again")
            if again is not None:
                found, doubt = again, doubted(again, collected, kind, environment)
        if doubt is not None:
            environment.setdefault("ceilings_doubted", {})[kind] = doubt
        environment.setdefault("ceilings", {})[kind] = found.as_dict()


def doubted(found: Ceilings, collected: Iterable[Collected], kind: str,
            environment: dict[str, Any] | None = None) -> str | None:
    """Why ``found`` cannot be the machine's ceiling (an op ran above it, or it was measured
    while other programs kept CPUs busy), or None."""
    from perfstack.analysis.roofline import DOUBT, place, tf32_allowed
    from perfstack.machine.load import disturbed
    from perfstack.report import Layer

    worst: tuple[float, str, str] | None = None
    tf32 = tf32_allowed(environment or {})
    for one in collected:
        for row in one.rows.get(Layer.FRAMEWORK, []):
            p = place(row, Layer.FRAMEWORK, {kind: found}, tf32)
            if p is not None and p.bound == "compute" and p.share is not None \
                    and p.share > DOUBT and (worst is None or p.share > worst[0]):
                worst = (p.share, row.name, p.peak_name or "?")
    if worst is not None:
        return (f"{worst[1]} ran at {100 * worst[0]:.0f}% of the measured {worst[2]} peak")
    busy = [disturbed(m.get("load")) for m in _measurements(found)]
    if busy and all(busy):  # never measured on a quiet machine
        return f"measured while {busy[-1]}"
    return None


def _measurements(found: Ceilings) -> list[dict[str, Any]]:
    kept = found.how.get("measurements")
    if isinstance(kept, list) and kept:
        return [m for m in kept if isinstance(m, dict)]
    return [{"load": found.how.get("load")}]


def _again(found: Ceilings) -> bool:
    """Whether measuring again may settle a doubt: the ceilings were measured once only, or
    last under load (a doubt that survives two measurements, the last a quiet one, is the
    op's to explain, and is said instead of measured every run)."""
    from perfstack.machine.load import disturbed

    kept = _measurements(found)
    last = kept[-1].get("load")
    return len(kept) < 2 or disturbed(last if isinstance(last, dict) else None) is not None


def _measure(threads: int | None, device: str, progress: Progress,
             why: str | None = None) -> tuple[Ceilings | None, str | None]:
    """Measure one device's ceilings with a progress line; (ceilings, None) or (None, why)."""
    label = why or (f"measuring this machine's {'GPU ' if device != 'cpu' else ''}ceilings "
                    "(once; cached)")
    progress.begin(label)
    try:
        found = ceilings.measure(threads, device)
    except RuntimeError as exc:
        progress.end(label, "failed")
        return None, f"measuring the ceilings failed: {exc}"
    except KeyboardInterrupt:
        progress.end(label, "interrupted")
        return None, "interrupted while measuring the ceilings"
    progress.end(label, f"{found.how.get('seconds') or 0:.0f} s")
    return found, None
