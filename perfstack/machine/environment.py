"""The environment block of a report: what a reader needs to know to trust or compare numbers.

Interpreter, OS, CPU model and ISA flags, core and socket counts, thread settings,
perf_event_paranoid, and pyperf's own metadata. Plugins add their own sections (torch build,
GPUs and driver) through the ``perfstack_environment`` hook. Nothing here imports torch.
"""

from __future__ import annotations

import os
import platform
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

#: Environment variables that change how fast numerical code runs.
THREAD_VARIABLES = (
    "OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "KMP_BLOCKTIME",
    "KMP_AFFINITY", "OMP_PROC_BIND", "OMP_PLACES", "GOMP_CPU_AFFINITY", "CUDA_VISIBLE_DEVICES",
    "PYTHON_GIL", "ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA", "LD_PRELOAD",
)

#: /proc/cpuinfo flags worth naming, in the words people use for them.
ISA_FLAGS = {
    "sse4_2": "SSE4.2", "avx": "AVX", "avx2": "AVX2", "fma": "FMA", "avx512f": "AVX-512F",
    "avx512bw": "AVX-512BW", "avx512vl": "AVX-512VL", "avx512dq": "AVX-512DQ",
    "avx512_vnni": "AVX-512 VNNI", "avx512_bf16": "AVX-512 BF16", "avx512_fp16": "AVX-512 FP16",
    "avx_vnni": "AVX-VNNI", "amx_tile": "AMX-TILE", "amx_bf16": "AMX-BF16", "amx_int8": "AMX-INT8",
    "asimd": "NEON", "sve": "SVE",
}


def _cpuinfo() -> dict[str, Any]:
    try:
        text = Path("/proc/cpuinfo").read_text("utf-8", errors="replace")
    except OSError:
        return {"model": platform.processor() or None, "isa": [], "sockets": None}
    model = None
    flags: set[str] = set()
    sockets: set[str] = set()
    cores: set[tuple[str, str]] = set()
    socket = ""
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip()
        if key == "model name" and model is None:
            model = value.strip()
        elif key in ("flags", "Features") and not flags:
            flags = set(value.split())
        elif key == "physical id":
            socket = value.strip()
            sockets.add(socket)
        elif key == "core id":
            cores.add((socket, value.strip()))
    return {
        "model": model,
        "isa": [word for flag, word in ISA_FLAGS.items() if flag in flags],
        "sockets": len(sockets) or None,
        "physical_cores": len(cores) or None,
        "numa_nodes": _numa_nodes(),
    }


def _numa_nodes() -> int | None:
    try:
        nodes = [p for p in Path("/sys/devices/system/node").iterdir()
                 if p.name.startswith("node") and p.name[4:].isdigit()]
    except OSError:
        return None
    return len(nodes) or None


def _package_version(name: str) -> str | None:
    from importlib import metadata

    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


#: The distributions whose versions every environment block records (the backends add theirs,
#: ``Backend.packages``).
CORE_PACKAGES = ("torch", "numpy", "pyperf")


def packages(names: Iterable[str]) -> dict[str, str]:
    """Return the installed version of each of ``names`` that is installed, as pip sees it."""
    return {name: version for name in names if (version := _package_version(name)) is not None}


def _read(path: str) -> str | None:
    try:
        return Path(path).read_text("utf-8").strip()
    except OSError:
        return None


def _pyperf_metadata() -> dict[str, Any]:
    import pyperf

    # A Run with collect_metadata=True is pyperf's public way to gather its system metadata.
    meta = dict(pyperf.Run([1.0], collect_metadata=True).get_metadata())
    for key in ("mem_max_rss", "mem_peak_pagefile_usage"):  # the driver's own, not the workload's
        meta.pop(key, None)
    return {k: v if isinstance(v, (int, float, str)) else str(v) for k, v in meta.items()}


#: The top-level blocks of an environment the core writes (``capture``, the driver, ``perfstack
#: env``, ``analyze``); every other block is a plugin's (``perfstack_environment``).
CORE_BLOCKS = frozenset({
    "python", "os", "cpu", "threads", "packages", "perf_event_paranoid", "pyperf", "torch",
    "backends", "distributed", "recorded", "plugin_errors", "free_threaded_interpreters",
    "system", "noise_advice", "repository", "ceilings", "ceilings_unknown",
    # (analyze's and merge's: how the files were read, and the figures across ranks)
    "reading", "rows_across_ranks", "across_ranks", "merged_from"})


def plugin_blocks(env: dict[str, Any]) -> list[str]:
    """Return the names of the blocks plugins added to ``env``, in order."""
    return [k for k, v in env.items() if k not in CORE_BLOCKS and isinstance(v, dict)]


def describe_block(block: dict[str, Any]) -> str:
    """One line for a plugin's environment block: its reason when not available, else its
    facts (``key value``, lists of records by their values)."""
    if block.get("available") is False:
        return str(block.get("reason") or "not available")
    parts = []
    for key, value in block.items():
        if key == "available":
            continue
        if isinstance(value, list):
            value = "; ".join(" ".join(str(v) for v in item.values()) if isinstance(item, dict)
                              else str(item) for item in value) or "none"
        parts.append(f"{key} {value}")
    return ", ".join(parts) or "available"


def capture() -> dict[str, Any]:
    """Return the core environment block (plugins add theirs separately)."""
    paranoid = _read("/proc/sys/kernel/perf_event_paranoid")
    try:
        affinity = sorted(os.sched_getaffinity(0))
    except AttributeError:
        affinity = None
    return {
        "python": {
            "version": platform.python_version(),
            "implementation": platform.python_implementation(),
            "executable": sys.executable,
            "gil_enabled": getattr(sys, "_is_gil_enabled", lambda: True)(),
        },
        "os": {"system": platform.system(), "release": platform.release(),
               "machine": platform.machine()},
        "cpu": {**_cpuinfo(), "logical_cpus": os.cpu_count(),
                "affinity": affinity},
        "threads": {name: os.environ[name] for name in THREAD_VARIABLES if name in os.environ},
        # Installed, as pip sees it; what the workload really imported is added by the driver.
        "packages": packages(CORE_PACKAGES),
        "perf_event_paranoid": int(paranoid) if paranoid and paranoid.lstrip("-").isdigit()
        else None,
        "pyperf": _pyperf_metadata(),
    }

