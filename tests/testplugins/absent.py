"""A backend that is never available here (it needs hardware this machine lacks)."""

from perfstack import hookimpl
from perfstack.plugin.backend import Availability, Backend, Collected, Outcome, RunContext
from perfstack.report import Layer


class Absent(Backend):
    name = "absent"
    layers = (Layer.HARDWARE,)

    def check(self) -> Availability:
        return Availability.no("needs a device this machine lacks", "run it where one is")

    def collect(self, ctx: RunContext, outcome: Outcome | None) -> Collected:
        raise AssertionError("an unavailable backend is never collected")


@hookimpl
def perfstack_backends() -> list[Backend]:
    return [Absent()]
