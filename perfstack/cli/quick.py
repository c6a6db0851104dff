"""``perfstack run --quick``: a first answer in about twice the workload's own time."""

from __future__ import annotations

import argparse

from perfstack import errors
from perfstack.plugin.backend import availability
from perfstack.plugin.manager import BackendEntry


def quick_plan(ns: argparse.Namespace, own: list[str],
               backends: dict[str, BackendEntry]) -> None:
    """``--quick``: the quick backends that can run here, one baseline run and no warm-up
    (unless --repeat or --warmup is given); refused beside --plugins, or where none of the
    quick backends that need a run of their own (the sampler) can run."""
    if ns.plugins is not None:
        raise errors.UsageError("--quick picks its own backends; leave out --plugins (or "
                                "name them without --quick)")
    names = [n for n, e in sorted(backends.items())
             if e.backend.quick and availability(e.backend).ok]
    if not any(backends[n].backend.own_run for n in names):
        wanted = [n for n, e in sorted(backends.items()) if e.backend.quick and
                  e.backend.own_run]
        raise errors.UsageError("--quick: no quick sampler can run here (" + (", ".join(
            f"{n}: {availability(backends[n].backend).reason}" for n in wanted) or
            "none is installed") + "); name backends with --plugins instead")
    ns.plugins = ",".join(names)

    def given(option: str) -> bool:
        return any(a == option or a.startswith(option + "=") for a in own)

    if not given("--repeat"):
        ns.repeat = 1
    if not given("--warmup"):
        ns.warmup = 0
