"""The core's own finding rules: what went wrong with the run itself, and where the time went.

These look only at the run records, the backend table, the environment and the time budget's
metric convention (``budget.*``, ``split.*``; see perfstack.analysis.views.budget), never at a
particular backend, so they hold for every workload: a crash or a hang, a baseline too noisy to
judge overheads and differences, a backend that slowed the workload so much its timings are
suspect,
a run bound by the interpreter or by framework dispatch, a main thread that mostly waits, an
idle device, and more threads than CPUs.
"""

from __future__ import annotations

from perfstack.analysis.rules.children import children_compete
from perfstack.analysis.rules.failures import failures
from perfstack.analysis.rules.gpu import gpu_findings
from perfstack.analysis.rules.noise import busy, noise, overheads
from perfstack.analysis.rules.startup import startup
from perfstack.analysis.rules.threads import oversubscription
from perfstack.analysis.rules.time import time_rules
from perfstack.plugin.mark import hookimpl
from perfstack.report import Finding, Report


@hookimpl
def perfstack_findings(report: Report) -> list[Finding]:
    """Return findings about crashes, hangs, a machine busy with other programs, baseline
    noise, backend overhead (never for a run other programs disturbed), the time budget
    (Python-bound, dispatch-bound, waiting, start-up and imports), what bounds a GPU's steps,
    oversubscribed threads, and torch's threads competing with the workload's children."""
    return [*failures(report), *busy(report), *noise(report), *overheads(report),
            *gpu_findings(report), *time_rules(report), *startup(report),
            *oversubscription(report), *children_compete(report)]
