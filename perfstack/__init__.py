"""perfstack: run a Python or PyTorch workload under every profiler that matters, one report.

This module stays tiny on purpose: the bootstrap that runs inside every profiled workload
imports it, and ``perfstack --help`` must start fast. Public names are loaded on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from perfstack.inprocess.steps import StepLimitReached as StepLimitReached
from perfstack.inprocess.steps import report_metric as report_metric
from perfstack.inprocess.steps import step as step

if TYPE_CHECKING:  # what __getattr__ gives, for type checkers (exported by __all__)
    from perfstack.plugin.backend import (
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
    from perfstack.plugin.mark import hookimpl
    from perfstack.plugin.renderer import Renderer
    from perfstack.report import Better, Finding, Layer, Metric, Quantity, Report, Row
    from perfstack.report.files import load

__version__ = "0.1.0"

#: name -> the module that defines it, resolved on first use by __getattr__ (PEP 562)
_PUBLIC = {name: module for module, names in (
    ("perfstack.plugin.mark", "hookimpl"),
    ("perfstack.plugin.backend", "Availability Backend Collected InProcessHook Launch Option "
                                 "Outcome RunContext Workload"),
    ("perfstack.plugin.renderer", "Renderer"),
    ("perfstack.report", "Better Finding Layer Metric Quantity Report Row"),
    ("perfstack.report.files", "load"),
) for name in names.split()}

__all__ = ["Availability", "Backend", "Better", "Collected", "Finding", "InProcessHook",
           "Launch", "Layer", "Metric", "Option", "Outcome", "Quantity", "Renderer", "Report",
           "Row", "RunContext", "Workload", "__version__", "hookimpl", "load", "report_metric",
           "step"]


def __getattr__(name: str) -> Any:
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module 'perfstack' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
