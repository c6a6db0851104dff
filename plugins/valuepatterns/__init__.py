"""The ``valuepatterns`` backend (opt-in): which ops write mostly redundant values.

GVProf's finding on PyTorch was that some kernels write mostly zeros (an embedding's dense
gradient, the wavefield padding of deepwave) or a single repeated value. This analysis checks
every aten op's outputs in its own run of the workload and reports, per op, the share of output
elements that are zero and the share of calls whose whole output is one value. It slows the
workload a lot (every output is read again), so it runs only when named: --plugins valuepatterns.
"""

from __future__ import annotations

from perfstack import hookimpl
from perfstack.plugin.backend import Backend
from perfstack.report import Finding, Layer, Report

from .backend import MIN_ELEMENTS, SINGLE_VALUE_SHARE, ZERO_SHARE, ValuePatternsBackend
from .backend import SOURCE as SOURCE


@hookimpl
def perfstack_findings(report: Report) -> list[Finding]:
    """Flag ops that write mostly zeros, or one value over and over."""
    found = []
    for row in report.layers[Layer.FRAMEWORK]:
        if row.source != SOURCE or row.attrs.get("constant_by_design"):
            continue
        elements = row.values["elements"].value or 0
        zeros = row.values["zero_share"].value or 0
        single = row.values["single_value_calls"].value or 0
        if zeros >= 100 * ZERO_SHARE and elements >= MIN_ELEMENTS:
            found.append(Finding(
                rule="values.mostly-zeros",
                title=f"{zeros:.0f}% of {row.key}'s outputs are zeros",
                layer="framework", severity="warning",
                evidence=[f"{elements:,.0f} output elements over {row.values['calls'].value} "
                          f"calls, {zeros:.1f}% zero"],
                action=("the op computes and writes values that are known to be zero: a sparse "
                        "gradient (Embedding(sparse=True)), skipping the zero region, or a "
                        "smaller buffer would avoid the work"),
                source=SOURCE))
        elif single >= 100 * SINGLE_VALUE_SHARE and row.attrs.get("checked_calls", 0) >= 2:
            found.append(Finding(
                rule="values.single-value",
                title=f"{single:.0f}% of {row.key}'s calls write one repeated value",
                layer="framework", severity="info",
                evidence=[f"{row.attrs['checked_calls']} calls checked"],
                action="a constant output can be computed once or replaced by a broadcast scalar",
                source=SOURCE))
    return found


@hookimpl
def perfstack_backends() -> list[Backend]:
    """Provide the valuepatterns backend."""
    return [ValuePatternsBackend()]
