"""Verdicts on how fast an op ran, qualified when the CPUs it ran on were contended: by other
programs, by more compute threads than CPUs, or by the workload's own busy child processes.
An op's CPU time then includes waiting for a CPU (an OpenMP pool waits for its slowest
thread), so its share of the roof reads low for a reason that is not the op's."""

from __future__ import annotations

from perfstack.report import Layer, Report

#: The findings that say the CPUs were contended while the workload ran.
CONTENDED = ("run.busy-machine", "threads.oversubscribed", "threads.children-compete")


def _on_cpu(report: Report) -> bool:
    """Whether the ops placed on a roofline ran on the CPU."""
    devices = {str(r.attrs["roofline"].get("device")) for r in report.layers[Layer.FRAMEWORK]
               if isinstance(r.attrs.get("roofline"), dict)}
    return "cpu" in devices


def qualify(report: Report) -> None:
    """Put first in each roofline finding's evidence that its ops ran on contended CPUs, and
    which finding says so (the evidence a short report shows is the first)."""
    why = next((f for f in report.findings if f.rule in CONTENDED), None)
    if why is None or not _on_cpu(report):
        return
    for found in report.findings:
        if found.rule.startswith("roofline."):
            found.evidence.insert(0, f"measured on contended CPUs ({why.rule}): the ops' "
                                  "times include waiting for a CPU")
