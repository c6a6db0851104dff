"""Summary statistics of repeated measurements, computed by pyperf (the reference).

pyperf's Benchmark gives median, mean, standard deviation and percentiles with the same
definitions as ``python -m pyperf stats``; we do not reimplement them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Summary:
    """Median, spread and count of a series of positive values."""

    n: int
    median: float
    mean: float
    stdev: float | None  # None for a single value: its spread is unknown, not zero
    minimum: float
    maximum: float

    @property
    def relative_stdev(self) -> float | None:
        """Return stdev / mean, or None when the spread is unknown."""
        if self.stdev is None or self.mean == 0:
            return None
        return self.stdev / self.mean


def summarize(values: Sequence[float], name: str = "values") -> Summary:
    """Return pyperf's summary of ``values`` (at least one, all positive)."""
    import pyperf  # lazy: only the driver and diff need it

    if not values:
        raise ValueError("summarize() needs at least one value")
    run = pyperf.Run(list(values), metadata={"name": name}, collect_metadata=False)
    bench = pyperf.Benchmark([run])
    return Summary(
        n=bench.get_nvalue(),
        median=bench.median(),
        mean=bench.mean(),
        stdev=bench.stdev() if bench.get_nvalue() > 1 else None,
        minimum=min(values),
        maximum=max(values),
    )
