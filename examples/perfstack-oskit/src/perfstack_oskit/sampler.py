"""The ``rss`` backend's sampler: a thread in perfstack's process that reads one process's
resident memory from ``/proc/PID/status`` every ``interval_s`` until it exits or is stopped."""

from __future__ import annotations

import json
import threading
from pathlib import Path


def resident_bytes(pid: int, field: str = "VmRSS") -> int | None:
    """Return a memory figure of the process (``VmRSS``: resident now; ``VmHWM``: its peak
    so far) in bytes, or None once the process has gone."""
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) * 1024
    return None


class RssSampler:
    """Samples one pid in a thread; ``stop()`` ends it and writes the samples to a file."""

    def __init__(self, pid: int, out: Path, interval_s: float, field: str = "VmRSS") -> None:
        self.pid, self.out, self.interval_s, self.field = pid, out, interval_s, field
        self.samples: list[int] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"rss-{pid}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            value = resident_bytes(self.pid, self.field)
            if value is None:
                return
            self.samples.append(value)
            self._stop.wait(self.interval_s)

    def stop(self) -> None:
        """Stop sampling and write what was sampled (called after the workload exits)."""
        self._stop.set()
        self._thread.join(timeout=5)
        self.out.write_text(json.dumps({"pid": self.pid, "interval_s": self.interval_s,
                                        "field": self.field, "samples": self.samples}),
                            "utf-8")
