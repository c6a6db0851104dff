"""A backend whose collect step never returns: bounded by --collect-timeout."""

import time

from perfstack import hookimpl
from perfstack.plugin.backend import Backend, Collected, Outcome, RunContext
from perfstack.report import Layer


class Stuck(Backend):
    name = "stuck"
    layers = (Layer.PYTHON,)

    def collect(self, ctx: RunContext, outcome: Outcome | None) -> Collected:
        time.sleep(3600)
        return Collected()


@hookimpl
def perfstack_backends() -> list[Backend]:
    return [Stuck()]
