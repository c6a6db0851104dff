"""In the workload process: a probe thread that measures how long a thread waits for the GIL.

The probe sleeps for a short period (the GIL is released while it sleeps), then needs the GIL
back to go on. The delay between the end of the sleep and the moment it runs again is the
time it waited for the GIL (plus the OS's wake-up latency, a few microseconds, measured with no
other thread wanting the GIL before the script starts). On CPython with the GIL, a thread that
wants it waits up to the switch interval (``sys.getswitchinterval()``, 5 ms) while another
thread runs Python code. Standard library only: this runs in the workload.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

FILE = "gil-probe.json"


def _measure(period: float, stop: threading.Event, out: list[float]) -> None:
    while not stop.is_set():
        before = time.perf_counter()
        time.sleep(period)
        out.append(max(0.0, time.perf_counter() - before - period))


def _quiet_latency(period: float, n: int = 20) -> list[float]:
    # Before the script starts nothing else wants the GIL: this is the OS's own latency.
    out = []
    for _ in range(n):
        before = time.perf_counter()
        time.sleep(period)
        out.append(max(0.0, time.perf_counter() - before - period))
    return out


def start(options: dict[str, Any], folder: str) -> Callable[[], None]:
    """Start the probe thread; the returned function stops it and writes gil-probe.json."""
    period = float(options.get("period_s", 0.002))
    quiet = _quiet_latency(period)
    delays: list[float] = []
    stop = threading.Event()
    thread = threading.Thread(target=_measure, args=(period, stop, delays), daemon=True,
                              name="perfstack-gil-probe")
    started = time.perf_counter()
    thread.start()

    def finish() -> None:
        stop.set()
        thread.join(timeout=1.0)
        data = {"period_s": period, "switch_interval_s": sys.getswitchinterval(),
                "duration_s": time.perf_counter() - started, "quiet_s": quiet,
                "delays_s": delays[:20000], "count": len(delays)}
        tmp = os.path.join(folder, FILE + ".tmp")
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump(data, fh)
        os.replace(tmp, os.path.join(folder, FILE))

    return finish
