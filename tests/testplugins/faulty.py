"""Backends that raise in each of the driver's calls but collect: the session records each
error in that backend's entry and goes on."""

from __future__ import annotations

from typing import Any

from perfstack import hookimpl
from perfstack.plugin.backend import Backend, Collected, Launch, Outcome, RunContext
from perfstack.report import Layer


class _Stops:
    """An attachment whose stop raises."""

    def stop(self) -> None:
        raise RuntimeError("faulty: stop failed")


class FaultyLaunch(Backend):
    name = "faulty_launch"
    layers = (Layer.PYTHON,)

    def run_count(self, options: dict[str, Any]) -> int:
        raise RuntimeError("faulty: run_count failed")  # one run, as every backend had

    def launch(self, ctx: RunContext) -> Launch:
        raise RuntimeError("faulty: launch failed")


class FaultyAttach(Backend):
    name = "faulty_attach"
    layers = (Layer.PYTHON,)

    def attach(self, ctx: RunContext, pid: int) -> Any:
        raise RuntimeError("faulty: attach failed")

    def collect(self, ctx: RunContext, outcome: Outcome | None) -> Collected:
        return Collected(notes=["collected anyway"])


class FaultyStop(Backend):
    name = "faulty_stop"
    layers = (Layer.PYTHON,)

    def run_count(self, options: dict[str, Any]) -> int:
        return 2

    def attach(self, ctx: RunContext, pid: int) -> _Stops:
        return _Stops()

    def collect(self, ctx: RunContext, outcome: Outcome | None) -> Collected:
        return Collected(notes=["collected anyway"])


@hookimpl
def perfstack_backends() -> list[Backend]:
    return [FaultyLaunch(), FaultyAttach(), FaultyStop()]
