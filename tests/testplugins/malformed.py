"""A backend that returns a value of None with no reason (unknown silently): must be refused."""

from perfstack import hookimpl
from perfstack.plugin.backend import Backend, Collected, Outcome, RunContext
from perfstack.report import Layer, Quantity, Row


class Malformed(Backend):
    name = "malformed"
    layers = (Layer.HARDWARE,)
    own_run = False

    def collect(self, ctx: RunContext, outcome: Outcome | None) -> Collected:
        row = Row("cycles", "cycles", "malformed", {"value": Quantity(None, "count")})
        return Collected(rows={Layer.HARDWARE: [row]})


@hookimpl
def perfstack_backends() -> list[Backend]:
    return [Malformed()]
