"""The run's ceilings: this machine's, from the cache, or measured once after the runs.

Measured only when a backend gave ops a cost (FLOPs or bytes) and the cache has none for
this machine at the workload's thread count; alone on the machine, after every profiled
run has ended (``perfstack.machine.ceilings`` runs the probe in a process of its own).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

from perfstack.backend import Collected
from perfstack.machine import ceilings, datasheets
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
        environment.setdefault("ceilings", {})[kind] = found.as_dict()


def _measure(threads: int | None, device: str,
             progress: Progress) -> tuple[ceilings.Ceilings | None, str | None]:
    """Measure one device's ceilings with a progress line; (ceilings, None) or (None, why)."""
    label = f"measuring this machine's {'GPU ' if device != 'cpu' else ''}ceilings (once; " \
            "cached)"
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
