"""``perfstack show --format pyperf``: the repeated measurements as a pyperf benchmark suite.

Every metric with repeated samples (the baseline's wall time, and what the workload reported
with ``perfstack.report_metric``) becomes a pyperf benchmark, one pyperf run per baseline run,
so ``python -m pyperf compare_to base.pyperf.json new.pyperf.json`` works on exactly the data
``perfstack diff`` judges, with the same t-test.
"""

from __future__ import annotations

import os
from pathlib import Path

from perfstack.errors import UsageError
from perfstack.plugin.mark import hookimpl
from perfstack.plugin.renderer import Renderer, RenderOptions
from perfstack.report import Report

#: pyperf knows these units; anything else is stored as a plain number ("integer" formats it).
PYPERF_UNITS = {"s": "second", "B": "byte"}


class PyperfRenderer(Renderer):
    """A pyperf JSON file (BenchmarkSuite) of the report's repeated metrics."""

    name = "pyperf"
    description = "pyperf benchmark suite JSON of the repeated metrics (for pyperf compare_to)"
    output_file_extension = ".json"

    def render(self, report: Report, options: RenderOptions) -> str:
        """Return the pyperf JSON text."""
        import pyperf

        benches = []
        for metric in report.metrics:
            samples = [float(v) for v in metric.samples or [] if v is not None and v > 0]
            if len(samples) < 1 or metric.samples is None or len(samples) != len(metric.samples):
                continue  # pyperf needs positive values; an incomplete series is not exported
            name = metric.name if metric.source in ("baseline", "workload") else \
                f"{metric.source}.{metric.name}"
            meta = {"name": name, "unit": PYPERF_UNITS.get(metric.unit, "integer"),
                    "description": f"{metric.name} [{metric.unit}] from {metric.source}, "
                    f"better {metric.better.value}"}
            runs = [pyperf.Run([value], metadata=meta, collect_metadata=False)
                    for value in samples]
            benches.append(pyperf.Benchmark(runs))
        if not benches:
            raise UsageError("the report has no repeated measurements to export to pyperf "
                             "(no metric has samples)")
        suite = pyperf.BenchmarkSuite(benches)
        import tempfile  # lazy: the other formats' start does not pay for it

        fd, tmp = tempfile.mkstemp(suffix=".json")
        os.close(fd)
        try:
            suite.dump(tmp, replace=True)
            return Path(tmp).read_text("utf-8")
        finally:
            Path(tmp).unlink(missing_ok=True)


@hookimpl
def perfstack_renderers() -> list[Renderer]:
    """Provide the pyperf export format."""
    return [PyperfRenderer()]
