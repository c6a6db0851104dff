"""Inside the workload: what torch.compile recorded of itself, saved at the workload's end.

Dynamo keeps, in memory, a record of every compile it made (``torch._dynamo.utils``:
``get_compilation_metrics()``, one ``CompilationMetrics`` per frame compiled, forward and
backward; ``graph_break_reasons``, each graph break with the user's stack; ``counters``; and
``compilation_time_metrics``, the timings ``compile_times()`` prints). This hook reads them
when the workload ends, if the workload imported dynamo at all (nothing is imported
otherwise), and writes them to ``compile.json`` in the run's folder. Standard library only,
besides the torch the workload already imported.

Torch keeps only the last 64 compile records; the hook raises that limit as soon as dynamo
is imported, so a workload that compiles often loses none.

A run stopped before its end (a timeout, a signal: dynamo can swallow the SystemExit a
SIGTERM raises while it compiles, and the run is then killed) would lose them all: while
dynamo is in use, the file is also written every few seconds when its records grew
(``SNAPSHOT_S``, at most a tenth of the time: a big record costs its writing), so a stopped
run has what was compiled until shortly before. Graph breaks are kept whole up to
``KEEP_BREAKS``; past it they are counted (``graph_breaks_dropped``).
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from perfstack.inprocess.afterimport import when_imported

#: The file written in the run's folder.
COMPILE_FILE = "compile.json"
#: The records kept (torch's default is 64).
KEEP = 100_000
#: Graph breaks kept whole (each with its user stack); the rest are counted.
KEEP_BREAKS = 2_000
#: Seconds between the snapshots written while the workload runs (when dynamo's records grew).
SNAPSHOT_S = 2.0
#: Fields of a compile record that hold whole configurations (kilobytes each, the same in
#: every record): left out.
BULKY = ("dynamo_config", "inductor_config", "compiler_config", "functorch_config",
         "python_version", "cuda_version", "triton_version", "pytorch_version")
DYNAMO = "torch._dynamo.utils"


def _plain(value: Any) -> Any:
    """A JSON form of a record's field: sets as sorted lists, anything else odd as text."""
    if isinstance(value, (set, frozenset)):
        return sorted(str(v) for v in value)
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return str(value)


def _record(metrics: Any) -> dict[str, Any]:
    fields = (dataclasses.asdict(metrics)
              if dataclasses.is_dataclass(metrics) and not isinstance(metrics, type)
              else dict(vars(metrics)))
    out = {k: _plain(v) for k, v in fields.items() if k not in BULKY and v is not None}
    if isinstance(out.get("co_filename"), str):
        out["co_filename"] = _absolute(out["co_filename"])
    if isinstance(out.get("inductor_provenance"), list):  # its stacks name files as run
        out["inductor_provenance"] = [_STACK_FILE.sub(_absolute_file, str(text))
                                      for text in out["inductor_provenance"]]
    return out


#: A file in a formatted stack, inside a JSON text: File \"train.py\", line 7
_STACK_FILE = re.compile(r'File \\"(?P<file>[^"\\]+)\\"')


def _absolute_file(found: re.Match[str]) -> str:
    return f'File \\"{_absolute(found["file"])}\\"'



def _absolute(path: str) -> str:
    """A code object's file as the samplers show it (absolute), where it names a file."""
    return path if path.startswith("<") or os.path.isabs(path) else os.path.abspath(path)


def _frames(stack: Any) -> list[dict[str, Any]]:
    out = []
    for frame in stack or []:
        out.append({"file": _absolute(str(getattr(frame, "filename", "?"))),
                    "line": getattr(frame, "lineno", None),
                    "name": str(getattr(frame, "name", "?"))})
    return out


def snapshot(utils: Any, torch_version: str | None) -> dict[str, Any]:
    """What dynamo recorded, as plain JSON: ``records`` (one per compile, forward and
    backward), ``graph_breaks`` (reason and user stack, one per break met while compiling),
    ``counters`` and ``compile_times`` (seconds per timed phase, each call's)."""
    records = [_record(m) for m in utils.get_compilation_metrics()]
    every = list(getattr(utils, "graph_break_reasons", []))
    breaks = [{"reason": str(getattr(r, "reason", "")), "user_stack": _frames(
        getattr(r, "user_stack", None)), "graph_break": bool(getattr(r, "graph_break", True))}
        for r in every[:KEEP_BREAKS]]
    counters = {str(k): {str(kk): vv for kk, vv in dict(v).items()
                         if isinstance(vv, (int, float))}
                for k, v in dict(getattr(utils, "counters", {})).items()}
    times = {str(k): [float(x) for x in v]
             for k, v in dict(getattr(utils, "compilation_time_metrics", {})).items()}
    limit = getattr(getattr(utils, "_compilation_metrics", None), "maxlen", None)
    return {"torch": torch_version, "records": records, "graph_breaks": breaks,
            "graph_breaks_dropped": max(0, len(every) - KEEP_BREAKS),
            "counters": counters, "compile_times": times,
            # a full deque dropped its oldest records: the totals are then partial
            "records_limit": limit, "saved_at_epoch_s": time.time()}


def _raise_limit(utils: Any) -> None:
    setter = getattr(utils, "set_compilation_metrics_limit", None)
    if callable(setter):
        setter(KEEP)


def write(folder: str) -> None:
    """Write ``compile.json`` into ``folder`` if the workload used dynamo (else nothing)."""
    utils = sys.modules.get(DYNAMO)
    if utils is None:
        return
    torch = sys.modules.get("torch")
    data = snapshot(utils, str(getattr(torch, "__version__", "")) or None)
    tmp = os.path.join(folder, COMPILE_FILE + ".tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(data, fh, default=str)
    os.replace(tmp, os.path.join(folder, COMPILE_FILE))


def _sizes(utils: Any) -> tuple[int, int]:
    return (len(getattr(utils, "_compilation_metrics", None) or ()),
            len(getattr(utils, "graph_break_reasons", None) or ()))


class _Snapshots(threading.Thread):
    """Writes ``compile.json`` while the workload runs, when dynamo's records grew."""

    def __init__(self, folder: str, utils: Any) -> None:
        super().__init__(name="perfstack-compile-snapshots", daemon=True)
        self.folder, self.utils = folder, utils
        self.halt = threading.Event()
        self.written: tuple[int, int] = (0, 0)

    def run(self) -> None:
        wait = SNAPSHOT_S
        while not self.halt.wait(wait):
            sizes = _sizes(self.utils)
            if sizes == self.written:
                continue
            began = time.perf_counter()
            try:
                write(self.folder)
            except Exception:  # a record changing under the copy: the next tick writes it
                continue
            self.written = sizes
            wait = max(SNAPSHOT_S, 10 * (time.perf_counter() - began))


def start(options: dict[str, Any], folder: str) -> Callable[[], None]:
    """The in-process hook: raise torch's limit on kept records once dynamo is imported, save
    what it recorded every few seconds while it compiles, and when the workload ends."""
    snapshots: list[_Snapshots] = []

    def imported(utils: Any) -> None:
        _raise_limit(utils)
        snapshots.append(_Snapshots(folder, utils))
        snapshots[0].start()

    when_imported(DYNAMO, imported)

    def finish() -> None:
        for thread in snapshots:
            thread.halt.set()
            thread.join(timeout=5)
        write(folder)

    return finish
