"""In the workload process: how many threads it started (perfstack's own not counted).

``threading.Thread.start`` is wrapped to count each start; nothing runs between starts, so a
workload that starts its pool once pays one wrapped call per thread. The sweep of the ``gil``
backend reads it to tell whether a thread count it set changed anything: a program whose
threads follow the count starts more at a higher one. (The threads alive at once are no
measure: a short thread may end before the next one starts.) Standard library only: this
runs in the workload.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable
from typing import Any

FILE = "threads.json"
#: perfstack's own threads, not the workload's.
OURS = ("perfstack-",)


def _alive() -> int:
    return sum(1 for t in threading.enumerate() if not t.name.startswith(OURS))


def start(options: dict[str, Any], folder: str) -> Callable[[], None]:
    """Count threads from now on; the returned function writes the most seen at once."""
    seen = {"most": _alive(), "started": 0}
    original = threading.Thread.start

    def counted(self: threading.Thread) -> None:
        original(self)
        if not self.name.startswith(OURS):
            seen["started"] += 1
            seen["most"] = max(seen["most"], _alive())

    threading.Thread.start = counted  # type: ignore[method-assign]

    def finish() -> None:
        threading.Thread.start = original  # type: ignore[method-assign]
        tmp = os.path.join(folder, FILE + ".tmp")
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump(seen, fh)
        os.replace(tmp, os.path.join(folder, FILE))

    return finish


def read(folder: str | os.PathLike[str]) -> int | None:
    """How many threads a run started (its main thread not counted), or None."""
    try:
        with open(os.path.join(folder, FILE), encoding="utf-8") as fh:
            started = json.load(fh).get("started")
    except (OSError, ValueError, AttributeError):
        return None
    return started if isinstance(started, int) and started >= 0 else None
