"""A report's findings: what a reader should look at first, with its evidence and what to do,
and the order a report shows them in. No I/O."""

from __future__ import annotations

from typing import Any

from perfstack.records import datarecord, field_names
from perfstack.report.measures import Layer

SEVERITY_ORDER = {"critical": 0, "warning": 1, "info": 2}
#: Findings about how well the run could be measured (noise, a profiler's overhead) come after
#: the findings about the workload itself, at the same severity.
MEASUREMENT_RULES = ("run.noisy-baseline", "run.single-baseline", "run.high-overhead")
#: Said before every other finding of their severity: a failed run, then a machine busy with
#: other programs (every figure after it is partly theirs).
FIRST_RULES = ("run.out-of-memory", "run.crashed", "run.exited", "run.timeout",
               "run.busy-machine")


def order_findings(findings: list[Finding]) -> list[Finding]:
    """Return findings in the order a report shows them: the most severe first, and at one
    severity a failed run, then a busy machine, then the workload's own, then the ones about
    measuring it (stable otherwise)."""
    def rank(f: Finding) -> int:
        if f.rule in FIRST_RULES:
            return FIRST_RULES.index(f.rule) - len(FIRST_RULES)
        return int(f.rule in MEASUREMENT_RULES)

    return sorted(findings, key=lambda f: (SEVERITY_ORDER.get(f.severity, 3), rank(f)))


@datarecord
class Finding:
    """Something a reader should look at first, with the evidence and what to do about it."""

    rule: str
    title: str
    layer: str
    severity: str  # "info" | "warning" | "critical"
    evidence: list[str]
    action: str
    source: str

    def __post_init__(self) -> None:
        if isinstance(self.layer, Layer):  # the enum, as rows use it, or its name
            self.layer = self.layer.value

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON form."""
        return {
            "rule": self.rule,
            "title": self.title,
            "layer": self.layer,
            "severity": self.severity,
            "evidence": self.evidence,
            "action": self.action,
            "source": self.source,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Finding:
        """Build a Finding from its JSON form."""
        return cls(**{k: data[k] for k in field_names(cls)})

