"""A finding rule that raises: reported as a finding, others unaffected."""

from perfstack import hookimpl
from perfstack.report import Report


@hookimpl
def perfstack_findings(report: Report) -> list:
    raise KeyError("no such metric")
