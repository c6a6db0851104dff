"""Step marks on the GPU's clock: a workload whose host queues 2 ms of work a step that the
device takes 38 ms to run has 38 ms steps, not 2 ms. No GPU here: torch.cuda's event API
(``Event(enable_timing=True)``, ``record``, ``synchronize``, ``elapsed_time`` in ms,
``is_initialized``, ``is_current_stream_capturing``) is played by a queue with a clock of its
own; the GPU session's check of the same code is in tests/fixtures/gpu-runs."""

from __future__ import annotations

import itertools
import json
import sys
import types
from pathlib import Path
from typing import Any

import pytest

from perfstack.inprocess import devicemarks
from perfstack.runfolder import rundir
from perfstack.runfolder.filenames import STEPS_FILE


class _Device:
    """One stream: work queued by the host runs back to back; an event is stamped when the
    device reaches it."""

    def __init__(self) -> None:
        self.host = 0.0  # the host's clock, s
        self.free_at = 0.0  # when the device ends what was queued so far
        self.capturing = False

    def launch(self, seconds: float) -> None:
        self.free_at = max(self.free_at, self.host) + seconds


def _fake_torch(device: _Device) -> types.ModuleType:
    class Event:
        def __init__(self, enable_timing: bool = False) -> None:
            assert enable_timing
            self.at: float | None = None

        def record(self) -> None:
            self.at = max(device.free_at, device.host)

        def synchronize(self) -> None:
            assert self.at is not None
            device.host = max(device.host, self.at)

        def elapsed_time(self, other: Any) -> float:
            return 1e3 * (other.at - self.at)

    cuda = types.SimpleNamespace(Event=Event, is_initialized=lambda: True,
                                 is_current_stream_capturing=lambda: device.capturing)
    torch = types.ModuleType("torch")
    torch.cuda = cuda  # type: ignore[attr-defined]
    return torch


@pytest.fixture
def device(monkeypatch: pytest.MonkeyPatch) -> _Device:
    dev = _Device()
    monkeypatch.setitem(sys.modules, "torch", _fake_torch(dev))
    monkeypatch.setattr(devicemarks, "_events", {})
    monkeypatch.setattr(devicemarks.time, "time", lambda: 1000.0 + dev.host)
    return dev


def test_steps_are_timed_as_the_device_ran_them(device: _Device, tmp_path: Path) -> None:
    host_marks = []
    for i in range(6):
        device.host += 0.002  # the host queues a step's work in 2 ms...
        device.launch(0.038)  # ...which the device runs in 38 ms
        host_marks.append(device.host)
        devicemarks.mark(i)
    epochs = devicemarks.epochs(len(host_marks))
    assert epochs is not None and all(e is not None for e in epochs)
    steps = {"steps": 6, "step_times_s": [b - a for a, b in itertools.pairwise(host_marks)],
             "device_mark_epoch_s": epochs}
    (tmp_path / STEPS_FILE).write_text(json.dumps(steps))
    folder = rundir.RunFolder(tmp_path)
    assert folder.host_step_times() == pytest.approx([0.002] * 5)
    assert folder.step_times() == pytest.approx([0.038] * 5)
    # the last mark was reached when the device ended the sixth step's work
    assert epochs[-1] == pytest.approx(1000.0 + device.free_at)


def test_no_mark_inside_a_captured_graph_or_without_cuda(device: _Device,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    device.capturing = True
    devicemarks.mark(0)
    assert devicemarks._events == {} and devicemarks.epochs(1) is None
    device.capturing = False
    monkeypatch.delitem(sys.modules, "torch")
    devicemarks.mark(0)
    assert devicemarks._events == {}


def test_a_step_the_device_did_not_stamp_keeps_the_hosts_time(tmp_path: Path) -> None:
    steps = {"steps": 3, "step_times_s": [0.5, 0.002, 0.002],
             "device_mark_epoch_s": [None, 10.0, 10.038, 10.076]}  # --steps: from the start
    (tmp_path / STEPS_FILE).write_text(json.dumps(steps))
    assert rundir.RunFolder(tmp_path).step_times() == pytest.approx([0.5, 0.038, 0.038])
