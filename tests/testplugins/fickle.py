"""A backend whose ``run_count`` answers more each time it is asked: the session must ask
once and make the runs its plan counted."""

from typing import Any

from perfstack import hookimpl
from perfstack.plugin.backend import Backend, Collected, Outcome, RunContext
from perfstack.report import Layer


class Fickle(Backend):
    name = "fickle"
    layers = (Layer.PYTHON,)

    def __init__(self) -> None:
        self.asked = 0

    def run_count(self, options: dict[str, Any]) -> int:
        self.asked += 1
        return self.asked + 1  # 2 the first time, 3 the next

    def collect(self, ctx: RunContext, outcome: Outcome | None) -> Collected:
        runs = 0 if outcome is None else 1 + len(outcome.more)
        return Collected(notes=[f"runs made: {runs}; run_count asked {self.asked} time(s)"])


@hookimpl
def perfstack_backends() -> list[Backend]:
    return [Fickle()]
