"""Each rank's figures by name, as the figures across a job's ranks read them.

A report of a few ranks lists each rank's figures as ``name[rankN]`` metrics; a big job's
are columns (``perfstack.report.job.rankcolumns``), only the ranks that stand out listed.
:class:`PerRank` reads either the same way, and takes the per-rank figures the job's analysis
computes (``perfstack.analysis.job.distributed``): a small job's as metrics of every rank, a big
job's into a column of their own, listed for the ranks that stand out.
"""

from __future__ import annotations

import re
import statistics
from typing import TYPE_CHECKING

from perfstack.analysis.job import straggler
from perfstack.records import replace
from perfstack.report import Better, Metric, Report
from perfstack.report.units import nearest_rank

if TYPE_CHECKING:
    from perfstack.report.job.rankcolumns import RankColumns

#: A rank's own figure: its base name and rank.
RANKED = re.compile(r"^(?P<base>.+)\[rank(?P<rank>\d+)\]$")


class PerRank:
    """Each rank's figures by name: the report's ``name[rankN]`` metrics, or a big job's
    columns (``perfstack.report.job.rankcolumns``), with the figures computed here added."""

    def __init__(self, report: Report, columns: RankColumns | None) -> None:
        """The figures of ``report``'s ranks, those of ``columns`` where given."""
        self.report = report
        self.columns = columns
        self.added: list[Metric] = []  # per-rank metrics computed here (a small job's)
        self.published: set[str] = set()  # the figures computed here, by name

    def values(self, base: str) -> dict[int, float]:
        """Each rank's known value of figure ``base``."""
        if self.columns is not None:
            return self.columns.values(base)
        return straggler.per_rank([*self.report.metrics, *self.added], base)

    def bases(self) -> list[tuple[str, Metric]]:
        """Each figure the ranks published (its base name) with one rank's metric of it."""
        if self.columns is not None:
            return [(n, self.columns.columns[n].template) for n in self.columns.names()]
        out: dict[str, Metric] = {}
        for m in self.report.metrics:
            found = RANKED.match(m.name)
            if found:
                out.setdefault(found["base"], m)
        return list(out.items())

    def samples(self) -> list[tuple[str, list[float] | None]]:
        """(name, samples) of each rank's figures that keep their samples."""
        if self.columns is not None:
            return [(name, samples) for name, _, samples in self.columns.samples()]
        return [(m.name, m.samples) for m in self.report.metrics]

    def publish(self, template: Metric, values: dict[int, float]) -> list[Metric]:
        """Each rank's ``template.name[rankN]`` metric with its value; of a big job only those
        of the ranks kept whole (the rest is in the figure's column)."""
        ranks = sorted(values)
        self.published.add(template.name)
        if self.columns is not None:  # the ranks kept whole, and this figure's ends
            self.columns.derive(template, values)
            listed = set(self.columns.whole) | self.columns.ends(template.name)
            ranks = [r for r in ranks if r in listed]
        out = [replace(template, name=f"{template.name}[rank{r}]", value=values[r])
               for r in ranks]
        if self.columns is None:
            self.added += out
        return out


#: What ``diff`` compares of a big job's per-rank figures: each one's median, p90 and most.
SPREAD = ("median", "p90", "max")


def is_big(report: Report) -> bool:
    """Whether ``report`` is of a big job (its per-rank figures are distributions)."""
    across = report.environment.get("across_ranks")
    return isinstance(across, dict) and bool(across.get("figures"))


def distributions(report: Report) -> list[Metric]:
    """Each per-rank figure's median, p90 and most over the job's ranks, as metrics named
    ``name[median]``, ``name[p90]``, ``name[max]``: a big job's from its distributions, a
    job that lists every rank from its ``name[rankN]`` metrics (the same definitions), so
    that two jobs compare by what their ranks did, not by which ranks stand out."""
    found: list[tuple[Metric, int, dict[str, float]]] = []
    if is_big(report):
        for f in report.environment["across_ranks"]["figures"]:
            if isinstance(f, dict) and isinstance(f.get("name"), str):
                template = Metric(f["name"], None, str(f.get("unit") or ""),
                                  str(f.get("layer") or "run"), str(f.get("source") or ""),
                                  _better(f.get("better")), detail=bool(f.get("detail")))
                stats = {k: float(f[k]) for k in SPREAD if isinstance(f.get(k), (int, float))}
                found.append((template, int(f.get("known") or 0), stats))
    else:
        by_base: dict[str, tuple[Metric, list[float]]] = {}
        for m in report.metrics:
            match = RANKED.match(m.name)
            if match and isinstance(m.value, (int, float)) and not isinstance(m.value, bool):
                by_base.setdefault(match["base"], (m, []))[1].append(float(m.value))
        for base, (m, values) in by_base.items():
            values.sort()
            stats = {"median": statistics.median(values),
                     "p90": nearest_rank(values, 0.9),
                     "max": values[-1]}
            found.append((replace(m, name=base), len(values), stats))
    return [replace(t, name=f"{t.name}[{stat}]", value=stats[stat], samples=None,
                    samples_of="runs", reason=None,
                    description=f"the {stat} over the job's {n} ranks of {t.name}[rankN]")
            for t, n, stats in found for stat in SPREAD if stat in stats]


def _better(value: object) -> Better:
    try:
        return Better(str(value))
    except ValueError:
        return Better.NEITHER
