"""A backend whose collect step raises: the others must go on."""

from perfstack import hookimpl
from perfstack.plugin.backend import Backend, Collected, Outcome, RunContext
from perfstack.report import Layer


class Boom(Backend):
    name = "boom"
    layers = (Layer.PYTHON,)

    def collect(self, ctx: RunContext, outcome: Outcome | None) -> Collected:
        raise ValueError("boom: cannot parse my own output")


@hookimpl
def perfstack_backends() -> list[Backend]:
    return [Boom()]
