"""Runs inside the workload process of ``perfstack run --on-demand``: armed, recording
nothing, until ``perfstack capture`` asks for N steps.

``arm`` (an in-process hook of that run) writes ``ondemand.json`` in the run's folder (the
pid, the backends armed) and looks, at each step the workload marks, whether
``capture-request.json`` changed (one ``os.stat``: the whole cost of an idle rider). A new
request ``{"id": K, "steps": N}`` opens capture K at that step: the rider writes
``captures/K/ready.json`` and waits (at most :data:`GO_WAIT_S`) for ``captures/K/go``, which
the capture command writes once its samplers attached from outside sample; then each armed
backend's capture function (``Backend.capture``, ``function(options, folder)``) has started
recording into ``captures/K/<backend>/`` (before ``ready.json``: its start is not sampled)
and returned an object with ``step()``, ``stop()`` and, where writing its files costs time,
``write()``; from ``go`` each step is counted and N steps later each is stopped and
``ended.json`` written; once the capture command's samplers stopped (its ``stopped``, seen
at a later step) each writes its files and ``captures/K/done.json`` says the steps and their
times. A capture the script's end cuts short is stopped and written there, and says so. Standard
library only, besides the backends' own functions.
"""

from __future__ import annotations

import contextlib
import importlib
import itertools
import json
import os
import time
from collections.abc import Callable
from typing import Any

from perfstack.inprocess import steps as marks
from perfstack.runfolder.filenames import CAPTURE_REQUEST_FILE as REQUEST_FILE
from perfstack.runfolder.filenames import CAPTURES_DIR as CAPTURES
from perfstack.runfolder.filenames import ONDEMAND_FILE as ARMED_FILE

#: The longest a capture's first step waits for its samplers to attach...
GO_WAIT_S = 15.0
#: ...and its end for them to stop (~30 ms: py-spy ends within 15-30 ms of SIGINT).
STOP_WAIT_S = 0.5


def _write(path: str, data: dict[str, Any]) -> None:
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(data, fh)
    os.replace(tmp, path)


def _wait(path: str, most_s: float = GO_WAIT_S) -> None:
    """Wait for the capture command's word (a file), at most ``most_s``."""
    deadline = time.monotonic() + most_s
    while not os.path.exists(path) and time.monotonic() < deadline:
        time.sleep(0.002)


class Rider:
    """The armed rider: the request it last read, the capture under way."""

    def __init__(self, folder: str, hooks: list[dict[str, Any]]) -> None:
        self.folder = folder
        self.hooks = hooks
        self.request = os.path.join(folder, REQUEST_FILE)
        self.seen: int | None = None  # the request file's mtime last read
        self.done_ids: set[int] = set()
        self.active: dict[str, Any] | None = None  # id, steps, recorders, times
        self.pending: dict[str, Any] | None = None  # stopped, its files not yet written

    def on_step(self) -> None:
        """At each step: end or advance the capture under way, else write the one stopped,
        else look for a request."""
        if self.active is not None:
            self._advance()
            return
        if self.pending is not None:
            self._write_pending(force=False)
            return
        try:
            stamp = os.stat(self.request).st_mtime_ns
        except OSError:
            return
        if stamp == self.seen:
            return
        self.seen = stamp
        with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
            with open(self.request, encoding="utf-8") as fh:
                asked = json.load(fh)
            capture, steps = int(asked["id"]), int(asked["steps"])
            if capture not in self.done_ids and steps > 0:
                self._begin(capture, steps)

    def _begin(self, capture: int, steps: int) -> None:
        where = os.path.join(self.folder, CAPTURES, str(capture))
        os.makedirs(where, exist_ok=True)
        recorders: dict[str, Any] = {}
        failed: dict[str, str] = {}
        for hook in self.hooks:  # started before the samplers: their start is not sampled
            name = hook["backend"]
            try:
                module, function = hook["target"].split(":")
                start: Callable[[dict[str, Any], str], Any] = getattr(
                    importlib.import_module(module), function)
                out = os.path.join(where, name)
                os.makedirs(out, exist_ok=True)
                recorders[name] = start(hook.get("options") or {}, out)
            except Exception as exc:  # a backend's failure is said, never the job's
                failed[name] = f"{type(exc).__name__}: {exc}"
        _write(os.path.join(where, "ready.json"), {"pid": os.getpid(), "step": marks.state.count})
        _wait(os.path.join(where, "go"))  # the samplers outside attached
        for recorder in recorders.values():  # the first captured step begins now
            with contextlib.suppress(Exception):
                recorder.step()
        self.active = {"id": capture, "steps": steps, "where": where, "recorders": recorders,
                       "failed": failed, "times": [time.perf_counter()],
                       "first_step": marks.state.count + 1, "began": time.time()}

    def _advance(self) -> None:
        active = self.active
        assert active is not None
        active["times"].append(time.perf_counter())
        if len(active["times"]) > active["steps"]:
            self.finish(None)
            return
        for recorder in active["recorders"].values():
            with contextlib.suppress(Exception):
                recorder.step()

    def finish(self, cut: str | None) -> None:
        """The capture's steps are done (``cut``: why they ended before the count asked):
        each recorder stops recording now, ``ended.json`` says so, and once the samplers
        outside stopped (a later step, or the script's end) each writes its files."""
        active, self.active = self.active, None
        if active is None:
            self._write_pending(force=cut is not None)
            return
        active["ended"] = time.time()
        for recorder in active["recorders"].values():  # the last step ends here
            with contextlib.suppress(Exception):
                getattr(recorder, "end_step", lambda: None)()
        _write(os.path.join(active["where"], "ended.json"), {"steps": len(active["times"]) - 1})
        if cut is None:  # a moment for the samplers to stop: stopping a recorder is no step
            _wait(os.path.join(active["where"], "stopped"), STOP_WAIT_S)
        for name, recorder in active["recorders"].items():
            try:
                recorder.stop()
            except Exception as exc:
                active["failed"][name] = f"{type(exc).__name__}: {exc}"
        self.done_ids.add(active["id"])
        active["cut"] = cut
        self.pending = active
        self._write_pending(force=cut is not None)

    def _write_pending(self, force: bool) -> None:
        """Write the stopped capture's files once the samplers outside have stopped (its
        writing is then not in their samples), or now where ``force``d or waited too long."""
        active = self.pending
        if active is None:
            return
        stopped = os.path.exists(os.path.join(active["where"], "stopped"))
        if not (stopped or force or time.time() - active["ended"] > GO_WAIT_S):
            return
        self.pending = None
        for name, recorder in active["recorders"].items():
            try:
                getattr(recorder, "write", lambda: None)()
            except Exception as exc:
                active["failed"][name] = f"{type(exc).__name__}: {exc}"
        times = active["times"]
        _write(os.path.join(active["where"], "done.json"), {
            "id": active["id"], "steps": len(times) - 1, "asked": active["steps"],
            "first_step": active["first_step"], "began_epoch_s": active["began"],
            "ended_epoch_s": active["ended"], "step_times_s": [
                b - a for a, b in itertools.pairwise(times)],
            "backends": sorted(active["recorders"]), "failed": active["failed"],
            **({"cut": active["cut"]} if active["cut"] else {})})


def arm(options: dict[str, Any], folder: str) -> Callable[[], None]:
    """The in-process hook: arm the rider with ``options["hooks"]`` (each backend's name,
    capture function and options); return what stops a capture the script's end cuts."""
    rider = Rider(folder, list(options.get("hooks") or []))
    _write(os.path.join(folder, ARMED_FILE), {
        "pid": os.getpid(), "armed": [h["backend"] for h in rider.hooks]})
    marks.on_step(rider.on_step)
    return lambda: rider.finish("the workload's script ended first")
