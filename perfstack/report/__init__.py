"""The report room: the model (``model``: the ``Report``, holding ``measures``, ``findings``
and what the ``session`` ran), its files (``files``: read, written, validated),
units and how quantities print (``units``), and a job's ranks (``job/``: ``rankrows``,
``rankcolumns``, ``rankfold``: rows across ranks, one copy of what ranks repeat in
``canon``); joining the reports of a job's nodes is ``perfstack.analysis.job.merge``.

``from perfstack.report import Report`` (and every record of the model) is the public API, as
it was when the model was one module.
"""

from __future__ import annotations

from perfstack.report.model import (
    FIRST_RULES,
    MEASUREMENT_RULES,
    SCHEMA_NAME,
    SCHEMA_VERSION,
    SEVERITY_ORDER,
    BackendResult,
    Better,
    ExitInfo,
    Finding,
    Layer,
    Metric,
    Overhead,
    Quantity,
    Report,
    Row,
    RunInfo,
    RunRecord,
    Status,
    order_findings,
)

__all__ = [
    'FIRST_RULES', 'MEASUREMENT_RULES', 'SCHEMA_NAME', 'SCHEMA_VERSION',
    'SEVERITY_ORDER', 'BackendResult', 'Better', 'ExitInfo', 'Finding', 'Layer',
    'Metric', 'Overhead', 'Quantity', 'Report', 'Row', 'RunInfo', 'RunRecord', 'Status',
    'order_findings',
]
