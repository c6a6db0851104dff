"""perfstack: run a Python or PyTorch workload under every profiler that matters, one report.

This module stays tiny on purpose: the bootstrap that runs inside every profiled workload
imports it, and ``perfstack --help`` must start fast. Public names are loaded on first use.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from perfstack.inprocess.steps import StepLimitReached as StepLimitReached
from perfstack.inprocess.steps import report_metric as report_metric
from perfstack.inprocess.steps import step as step

__version__ = "0.1.0"


def load(path: str | os.PathLike[str]) -> Report:
    """Return the report stored in ``path`` (``.json`` or ``.json.gz``), checked against the
    schema: for notebooks. ``report.records("python")`` gives a layer's rows as plain dicts,
    ``report.dataframe("python")`` as a pandas DataFrame when pandas is installed."""
    from pathlib import Path

    from perfstack.report.files import load_report

    return load_report(Path(path))


# name -> module that defines it; resolved lazily by __getattr__ (PEP 562).
_PUBLIC = {
    "hookimpl": "perfstack.plugin.mark",
    "Backend": "perfstack.plugin.backend",
    "Availability": "perfstack.plugin.backend",
    "Option": "perfstack.plugin.backend",
    "Launch": "perfstack.plugin.backend",
    "InProcessHook": "perfstack.plugin.backend",
    "RunContext": "perfstack.plugin.backend",
    "Outcome": "perfstack.plugin.backend",
    "Collected": "perfstack.plugin.backend",
    "Workload": "perfstack.plugin.backend",
    "Layer": "perfstack.report",
    "Row": "perfstack.report",
    "Quantity": "perfstack.report",
    "Metric": "perfstack.report",
    "Better": "perfstack.report",
    "Finding": "perfstack.report",
    "Report": "perfstack.report",
    "Renderer": "perfstack.plugin.renderer",
}

__all__ = [
    "Availability",
    "Backend",
    "Better",
    "Collected",
    "Finding",
    "InProcessHook",
    "Launch",
    "Layer",
    "Metric",
    "Option",
    "Outcome",
    "Quantity",
    "Renderer",
    "Report",
    "Row",
    "RunContext",
    "Workload",
    "__version__",
    "hookimpl",
    "load",
    "report_metric",
    "step",
]

if TYPE_CHECKING:
    from perfstack.plugin.backend import (
        Availability as Availability,
    )
    from perfstack.plugin.backend import (
        Backend as Backend,
    )
    from perfstack.plugin.backend import (
        Collected as Collected,
    )
    from perfstack.plugin.backend import (
        InProcessHook as InProcessHook,
    )
    from perfstack.plugin.backend import (
        Launch as Launch,
    )
    from perfstack.plugin.backend import (
        Option as Option,
    )
    from perfstack.plugin.backend import (
        Outcome as Outcome,
    )
    from perfstack.plugin.backend import (
        RunContext as RunContext,
    )
    from perfstack.plugin.backend import (
        Workload as Workload,
    )
    from perfstack.plugin.mark import (
        hookimpl as hookimpl,
    )
    from perfstack.plugin.renderer import (
        Renderer as Renderer,
    )
    from perfstack.report import (
        Better as Better,
    )
    from perfstack.report import (
        Finding as Finding,
    )
    from perfstack.report import (
        Layer as Layer,
    )
    from perfstack.report import (
        Metric as Metric,
    )
    from perfstack.report import (
        Quantity as Quantity,
    )
    from perfstack.report import (
        Report as Report,
    )
    from perfstack.report import (
        Row as Row,
    )


def __getattr__(name: str) -> Any:
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module 'perfstack' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
