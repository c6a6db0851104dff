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
    "hookimpl": "perfstack.hookmark",
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
    "Renderer": "perfstack.render.base",
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
    from perfstack.backend import (
        Availability as Availability,
    )
    from perfstack.backend import (
        Backend as Backend,
    )
    from perfstack.backend import (
        Collected as Collected,
    )
    from perfstack.backend import (
        InProcessHook as InProcessHook,
    )
    from perfstack.backend import (
        Launch as Launch,
    )
    from perfstack.backend import (
        Option as Option,
    )
    from perfstack.backend import (
        Outcome as Outcome,
    )
    from perfstack.backend import (
        RunContext as RunContext,
    )
    from perfstack.backend import (
        Workload as Workload,
    )
    from perfstack.hookmark import (
        hookimpl as hookimpl,
    )
    from perfstack.render.base import (
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
