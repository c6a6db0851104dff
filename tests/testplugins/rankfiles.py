"""A reader of made-up per-rank files (``*.rank``: one JSON object, ``{"rank": N, "step": S}``,
and ``"ops": {name: seconds}`` for framework rows)
that misbehaves on request, for ``perfstack analyze``'s workers: a file whose ``"then"`` is
``"die"`` kills the process reading it (as the out-of-memory killer would), ``"sleep"``
writes ``<file>.started`` beside itself and sleeps a minute (a slow rank, for Ctrl-C),
``"stop"`` stops the process reading it with SIGSTOP the first time (``<file>.stopped``
marks that it did), as a worker stopped from outside would be."""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Sequence
from pathlib import Path

from perfstack import hookimpl
from perfstack.plugin.backend import Backend, Collected, Recorded
from perfstack.report import Better, Layer, Metric, Quantity, Row


class RankFiles(Backend):
    name = "rankfiles"
    layers = (Layer.FRAMEWORK,)
    description = "made-up per-rank files (tests)"
    own_run = False

    def recognizes(self, path: Path) -> bool:
        return path.name.endswith(".rank")

    def analysis_units(self, files: Sequence[Path]) -> list[list[Path]]:
        return [[path] for path in files]

    def analyze(self, files: Sequence[Path]) -> list[Recorded]:
        out = []
        for path in files:
            data = json.loads(path.read_text())
            if data.get("then") == "die":
                os.kill(os.getpid(), signal.SIGKILL)
            stopped = path.with_name(path.name + ".stopped")
            if data.get("then") == "stop" and not stopped.exists():
                stopped.write_text(str(os.getpid()))
                os.kill(os.getpid(), signal.SIGSTOP)
            if data.get("then") == "sleep":
                path.with_name(path.name + ".started").write_text(str(os.getpid()))
                time.sleep(60)
            step = float(data["step"])
            ops = [Row(f"op:{name}", name, self.name, {"self": Quantity(float(seconds), "s")},
                       {"op": name}) for name, seconds in (data.get("ops") or {}).items()]
            out.append(Recorded(Collected(
                rows={Layer.FRAMEWORK: ops} if ops else {},
                metrics=[Metric("rank_step_time", step, "s", "framework", self.name,
                                Better.LOWER, samples=[step] * 3, samples_of="steps")]),
                files=[path], rank=int(data["rank"])))
        return out


@hookimpl
def perfstack_backends() -> list[Backend]:
    return [RankFiles()]
