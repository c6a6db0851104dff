"""The torch backend's capture on demand (``Backend.capture``), inside a job started with
``perfstack run --on-demand``: torch.profiler from the step ``perfstack capture`` asked for,
each step marked (``ProfilerStep#N``), its trace written into the capture's folder when the
steps are done, where ``perfstack analyze``'s torch reader reads it. Only torch and the
standard library are imported here: this runs in the workload."""

from __future__ import annotations

import os
import socket
from typing import Any

from .inproc import TRACE_SUFFIX


class Recorder:
    """torch.profiler recording: ``step()`` at each step, ``stop()``, then ``write()``."""

    def __init__(self, options: dict[str, Any], folder: str) -> None:
        import torch
        from torch.profiler import ProfilerAction, ProfilerActivity, profile

        activities = [ProfilerActivity.CPU]
        if torch.cuda.is_available():
            activities.append(ProfilerActivity.CUDA)
        self.path = os.path.join(folder, f"{socket.gethostname()}_{os.getpid()}.0{TRACE_SUFFIX}")
        # prepared now (its start-up is not a captured step), recording from the first step()
        self.warmup, self.record = ProfilerAction.WARMUP, ProfilerAction.RECORD
        self.prof = profile(activities=activities, record_shapes=True,
                            with_stack=bool(options.get("stack")), schedule=self.schedule,
                            on_trace_ready=lambda p: None)  # written by write()
        self.prof.start()
        # each captured step's range named by its number in the workload, as a run's are
        # (ProfilerStep#N: N the steps done so far, plus one, at each step())
        from perfstack.inprocess import steps as marks

        self.prof.step_num = marks.state.count

    def schedule(self, step: int) -> Any:
        """torch.profiler's schedule, asked at each step (a method, not a lambda inside
        ``__init__``, so that a sample of it is not read as the recorder's start-up): the
        start warms up (step 0, asked before the step count is set), every step records."""
        return self.warmup if step == 0 else self.record

    def step(self) -> None:
        """One step done: its ``ProfilerStep#N`` range closes, the next opens."""
        self.prof.step()

    def end_step(self) -> None:
        """The last step ends now: its ``ProfilerStep#N`` range closes (what follows, until
        ``stop()``, is the capture's own end, in no step)."""
        ended = getattr(self.prof, "step_rec_fn", None)
        if ended is not None:
            ended.__exit__(None, None, None)
            self.prof.step_rec_fn = None

    def stop(self) -> None:
        """Stop recording: the last step's range closes."""
        self.prof.stop()

    def write(self) -> None:
        """Write the trace (after the samplers outside stopped: not in their samples)."""
        self.prof.export_chrome_trace(self.path)


def start(options: dict[str, Any], folder: str) -> Recorder:
    """Start recording into ``folder``."""
    return Recorder(options, folder)
