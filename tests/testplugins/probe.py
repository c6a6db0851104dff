"""A backend that uses every way in: a command wrapper, an environment variable, an in-process
hook and an attachment to the pid. Its collect step turns what each left behind into rows."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from perfstack import hookimpl
from perfstack.plugin.backend import (
    Backend,
    Collected,
    InProcessHook,
    Launch,
    Option,
    Outcome,
    RunContext,
)
from perfstack.report import Better, Layer, Metric, Quantity, Row


def start(options: dict[str, Any], folder: str) -> Any:
    """In-process hook: note the pid, the wrapper's variable and the option; flush at exit."""
    seen = {"pid": os.getpid(), "wrapped": os.environ.get("PROBE_WRAPPED"),
            "label": options.get("label")}

    def finish() -> None:
        Path(folder, "inprocess.json").write_text(json.dumps(seen))

    return finish


class Attached:
    def __init__(self, folder: Path, pid: int) -> None:
        self.folder, self.pid = folder, pid

    def stop(self) -> None:
        (self.folder / "attached.json").write_text(json.dumps({"pid": self.pid}))


class Probe(Backend):
    name = "probe"
    layers = (Layer.PYTHON, Layer.HARDWARE)
    options = (Option("label", "a label passed into the workload process", default="none"),)
    openers = (("inprocess.json", "any JSON viewer"),)

    def launch(self, ctx: RunContext) -> Launch:
        return Launch(wrap=["env", "PROBE_WRAPPED=yes"], env={"PROBE_ENV": "1"},
                      inprocess=[InProcessHook("tests.testplugins.probe:start",
                                               {"label": ctx.options["label"]})])

    def attach(self, ctx: RunContext, pid: int) -> Attached:
        return Attached(ctx.artifact_dir, pid)

    def collect(self, ctx: RunContext, outcome: Outcome | None) -> Collected:
        inside = json.loads((ctx.artifact_dir / "inprocess.json").read_text())
        attached = json.loads((ctx.artifact_dir / "attached.json").read_text())
        row = Row("probe:<module> (x.py:1)", "probe [bold]<script>", "probe",
                  {"pid": Quantity(inside["pid"], "")},
                  attrs={"wrapped": inside["wrapped"], "label": inside["label"],
                         "attached_pid": attached["pid"], "outcome_pid": outcome.workload_pid})
        return Collected(rows={Layer.PYTHON: [row]},
                         metrics=[Metric("probe_metric", 1.0, "", "python", "probe",
                                         Better.HIGHER)],
                         artifacts={"inprocess": ctx.artifact_dir / "inprocess.json"},
                         notes=["probe note"])


@hookimpl
def perfstack_backends() -> list[Backend]:
    return [Probe()]
