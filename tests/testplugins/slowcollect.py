"""A backend whose collect step reads for a long time holding the GIL, as a reader of a big
capture does (memray's of 3M objects took 9 s): it says when it began (``SLOW_COLLECT_MARK``),
then sums in C until its deadline."""

import os
import time
from pathlib import Path

from perfstack import hookimpl
from perfstack.plugin.backend import Backend, Collected, Outcome, RunContext
from perfstack.report import Layer


class SlowCollect(Backend):
    name = "slowcollect"
    layers = (Layer.PYTHON,)

    def collect(self, ctx: RunContext, outcome: Outcome | None) -> Collected:
        Path(os.environ["SLOW_COLLECT_MARK"]).write_text("reading")
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            sum(range(2_000_000))  # C: the GIL held for a while at a time
        return Collected()


@hookimpl
def perfstack_backends() -> list[Backend]:
    return [SlowCollect()]
