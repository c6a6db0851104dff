"""This machine's ceilings (peak FLOP/s per type, memory bandwidth, a call's fixed cost),
measured once and cached.

The measuring is ``perfstack.machine.roofline.ceilingprobe``'s, in a process of its own (it imports
torch; this module does not). The cache is one JSON file per key in perfstack's cache
folder: the CPU model, its ISA flags, the thread count, torch's version and the device,
so another machine, another thread count or another torch is measured again.
``PERFSTACK_CEILINGS`` names a ceilings file to use instead (one measured on the machine
the report is about, or a recorded one in tests), or ``off`` to measure nothing.
"""

from __future__ import annotations

import json
import os
import stat
import sys
import time
from pathlib import Path
from typing import Any

from perfstack.cachedir import cache_folder
from perfstack.machine import environment, load
from perfstack.machine.roofline.ceilingrecord import Ceilings

CEILINGS_ENV = "PERFSTACK_CEILINGS"
#: The longest the measuring may take before it is given up (it takes about 5 s on a
#: 2-CPU VM).
TIMEOUT_S = 180.0


def machine_key(threads: int | None, device: str = "cpu") -> dict[str, Any]:
    """What the ceilings depend on: the CPU, its ISA, the threads, torch, the device (on a
    GPU its model and top clocks)."""
    from importlib import metadata  # here: `perfstack show` never needs it (17 ms to import)

    cpu = environment.capture()["cpu"]
    try:
        torch_version: str | None = metadata.version("torch")
    except metadata.PackageNotFoundError:
        torch_version = None
    key = {"cpu": cpu.get("model"), "isa": cpu.get("isa"), "threads": threads,
           "torch": torch_version, "device": device}
    if device != "cpu":
        key["gpu"] = _gpu_identity()
    return key


def _gpu_identity() -> list[str] | None:
    """Each GPU's name and top SM and memory clocks (NVML, without importing torch), or
    None where NVML cannot tell (not verified on a GPU yet: no session has had one)."""
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            out = []
            for i in range(pynvml.nvmlDeviceGetCount()):
                handle = pynvml.nvmlDeviceGetHandleByIndex(i)
                sm = pynvml.nvmlDeviceGetMaxClockInfo(handle, pynvml.NVML_CLOCK_SM)
                mem = pynvml.nvmlDeviceGetMaxClockInfo(handle, pynvml.NVML_CLOCK_MEM)
                out.append(f"{pynvml.nvmlDeviceGetName(handle)} sm {sm} mem {mem}")
            return out
        finally:
            pynvml.nvmlShutdown()
    except Exception:  # no NVML library, no driver, no such query: the key goes without
        return None


def cache_file(key: dict[str, Any]) -> Path:
    """Where the ceilings of ``key`` are cached."""
    import hashlib

    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]
    return cache_folder() / "ceilings" / f"{key['device']}-{digest}.json"


def cached(threads: int | None, device: str = "cpu") -> Ceilings | None:
    """The cached ceilings for this machine at ``threads``, or None when not measured."""
    chosen = os.environ.get(CEILINGS_ENV)
    if chosen == "off":
        return None
    found = _read(Path(chosen) if chosen else cache_file(machine_key(threads, device)))
    return found if found is not None and found.device == _kind(device) else None


def _kind(device: str) -> str:
    """The report's name of a device's ceilings: ``cpu`` or ``gpu`` (any CUDA device)."""
    return "cpu" if device == "cpu" else "gpu"


def measure(threads: int | None, device: str = "cpu", python: str | None = None,
            probe_args: tuple[str, ...] = ()) -> Ceilings:
    """Measure the ceilings now (a few seconds, alone on the machine) and cache them; raise
    RuntimeError with why when the probe fails. ``probe_args`` go to the probe (its
    ``--sizes`` and ``--array-mib`` make a quick check)."""
    argv = [python or sys.executable, "-m", "perfstack.machine.roofline.ceilingprobe",
            "--device", device, *probe_args]
    if threads:
        argv += ["--threads", str(threads)]
    import subprocess

    before, started = load.snapshot(), time.monotonic()
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"measuring took over {TIMEOUT_S:.0f} s") from None
    except OSError as exc:
        raise RuntimeError(f"cannot start the probe: {exc.strerror}") from None
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise RuntimeError(f"the probe failed: {last[:200]}")
    try:
        found = json.loads(proc.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        raise RuntimeError("the probe printed nothing readable") from None
    how = dict(found.get("how") or {})
    props = found.get("device_properties")
    if isinstance(props, dict):  # a GPU: its datasheet beside what was measured
        from perfstack.machine.roofline.datasheets import identify, link_of

        how["device_properties"] = props
        sheet = identify(props)
        if sheet is not None:
            how["datasheet"] = {"model": sheet.model, "peak_flops": sheet.peak_flops,
                                "bandwidth": sheet.bandwidth, "source": sheet.source}
        link = found.get("link")
        if isinstance(link, dict) and link:  # the host link, as the probe measured it
            how["link"] = {**link, "source": "measured"}
        elif sheet is not None and sheet.host_link:
            how["link"] = link_of(sheet)
    how["measured"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    # What else ran meanwhile (a peak measured beside a busy program is low): kept with it.
    how["load"] = load.between(before, load.snapshot(), time.monotonic() - started)
    how["seconds"] = found.get("seconds")
    how["copy_bandwidth"] = found.get("copy_bandwidth")
    how["torch"] = found.get("torch")
    ceilings = Ceilings(device=_kind(device), source="measured",
                        peak_flops=dict(found.get("peak_flops") or {}),
                        bandwidth=found.get("bandwidth"), dispatch_s=found.get("dispatch_s"),
                        name=environment.capture()["cpu"].get("model") if device == "cpu"
                        else str((props or {}).get("name") or device),
                        threads=found.get("threads"), how=how)
    path = cache_file(machine_key(threads, device))
    if not probe_args:  # a quick check's figures are no peaks: never kept as the best
        earlier = _read(path)
        if earlier is not None and earlier.device == ceilings.device:
            ceilings = best_of(earlier, ceilings)
    _store(path, ceilings)
    return ceilings


#: Measurements of one machine kept in its cache file, the newest last.
KEPT = 5


def _summary(c: Ceilings) -> dict[str, Any]:
    return {"measured": c.how.get("measured"), "load": c.how.get("load"),
            "peak_flops": dict(c.peak_flops), "bandwidth": c.bandwidth,
            "dispatch_s": c.dispatch_s}


def best_of(earlier: Ceilings, new: Ceilings) -> Ceilings:
    """The best of two measurements of one machine, figure by figure: a peak is what the
    machine can reach, and a measurement beside a busy program only reads it low. The
    measurements themselves (each with its load) are kept in ``how["measurements"]``."""
    kept = [m for m in earlier.how.get("measurements") or [_summary(earlier)]
            if isinstance(m, dict)]
    peaks = dict(earlier.peak_flops)
    for name, value in new.peak_flops.items():
        peaks[name] = max(value, peaks.get(name, 0.0))
    bandwidths = [b for b in (earlier.bandwidth, new.bandwidth) if b]
    floors = [d for d in (earlier.dispatch_s, new.dispatch_s) if d]
    how = dict(new.how)
    how["measurements"] = [*kept, _summary(new)][-KEPT:]
    return Ceilings(device=new.device, source=new.source, peak_flops=peaks,
                    bandwidth=max(bandwidths) if bandwidths else None,
                    dispatch_s=min(floors) if floors else None, name=new.name,
                    threads=new.threads, how=how)


#: The most of a ceilings file read (one is a few kB).
MAX_FILE_BYTES = 1 << 20


def _read(path: Path) -> Ceilings | None:
    """The ceilings in a file, or None: not there, not a regular file (a FIFO would block the
    read, /dev/zero never end it), too large, or not a ceilings file."""
    try:
        if not stat.S_ISREG(path.stat().st_mode):
            return None
        with open(path, "rb") as fh:
            raw = fh.read(MAX_FILE_BYTES + 1)
        if len(raw) > MAX_FILE_BYTES:
            return None
        return Ceilings.from_dict(json.loads(raw))
    except (OSError, ValueError, TypeError, KeyError, AttributeError, RecursionError):
        return None


def _store(path: Path, ceilings: Ceilings) -> None:
    """Write the cache file whole (a reader never sees half of it); a cache that cannot be
    written is only a cost, the next run measures again."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(ceilings.as_dict(), indent=1) + "\n", "utf-8")
        os.replace(tmp, path)
    except OSError:
        pass
