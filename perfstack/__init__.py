"""perfstack: run a Python or PyTorch workload under every profiler that matters, one report.

This module stays tiny on purpose: the bootstrap that runs inside every profiled workload
imports it, and ``perfstack --help`` must start fast. Public names are loaded on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

# name -> module that defines it; resolved lazily by __getattr__ (PEP 562).
_PUBLIC = {
    "hookimpl": "perfstack.pluginmanager",
    "Backend": "perfstack.backend",
    "Availability": "perfstack.backend",
    "Option": "perfstack.backend",
    "Launch": "perfstack.backend",
    "InProcessHook": "perfstack.backend",
    "RunContext": "perfstack.backend",
    "Outcome": "perfstack.backend",
    "Collected": "perfstack.backend",
    "Workload": "perfstack.backend",
    "Layer": "perfstack.report",
    "Row": "perfstack.report",
    "Quantity": "perfstack.report",
    "Metric": "perfstack.report",
    "Better": "perfstack.report",
    "Finding": "perfstack.report",
    "Report": "perfstack.report",
    "Renderer": "perfstack.render",
}

__all__ = ["__version__", *_PUBLIC]

if TYPE_CHECKING:
    from perfstack.backend import (
        Availability,
        Backend,
        Collected,
        InProcessHook,
        Launch,
        Option,
        Outcome,
        RunContext,
        Workload,
    )
    from perfstack.pluginmanager import hookimpl
    from perfstack.render import Renderer
    from perfstack.report import Better, Finding, Layer, Metric, Quantity, Report, Row


def __getattr__(name: str) -> Any:
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module 'perfstack' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
