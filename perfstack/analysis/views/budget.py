"""The time budget: one picture of where the wall time goes (the drill-down beside it is
perfstack.analysis.views.drilldown).

Backends contribute by convention, so the core names none of them (docs/report-format.md):

- ``budget.<part>`` metrics (unit ``%``): a share of the wall time of the run that backend
  measured. ``startup``, ``compile`` (torch.compile at work), ``interpreter``, ``native`` and
  ``idle`` partition the main thread's wall time, with ``before_sampling`` (a sampler started
  after the warm-up steps of ``--steps``: what ran before it, unsampled); ``gil_wait`` (a
  thread that wants the GIL waits) runs in parallel with it and is shown beside. The device's
  own time over the profiled steps is not a share of the wall time: it is the ``gpu_busy``
  and ``gpu_time.*`` metrics, shown as a breakdown of its own.
- ``split.<part>`` metrics (unit ``%``): how CPU time outside the interpreter divides among
  ``framework`` (dispatch, bookkeeping), ``kernels`` (compute loops, BLAS, oneDNN), ``openmp``
  (the thread pool spinning or waiting), ``os``, ``runtime`` (libc, libstdc++) and ``other``.
  When present, the ``native`` share is divided in those proportions.

Shares come from one profiled run each; seconds are the share times the baseline's median wall
time, so every line says which backend measured it.
"""

from __future__ import annotations

from perfstack.records import datarecord, field
from perfstack.report import Better, Layer, Metric, Report
from perfstack.report.units import fmt_seconds

#: part -> (title, layer), in the order the budget lists them.
PARTS: dict[str, tuple[str, str]] = {
    "before_sampling": ("before sampling: start-up and the warm-up steps", "run"),
    "startup": ("start-up and teardown: imports, interpreter", "python"),
    "compile": ("torch.compile: its import, compiling, first kernel builds", "compile"),
    "interpreter": ("interpreter: Python code (GIL held)", "python"),
    "native": ("native code called from Python (GIL released)", "framework"),
    "framework": ("framework dispatch and bookkeeping", "framework"),
    "kernels": ("CPU kernels: BLAS, oneDNN, vectorized loops", "kernel"),
    "openmp": ("OpenMP pool: spinning, waiting", "kernel"),
    "os": ("OS kernel: syscalls, page faults", "kernel"),
    "runtime": ("C/C++ runtime: malloc, memcpy", "kernel"),
    "other": ("other native code", "kernel"),
    "idle": ("waiting: sleep, I/O, locks, device sync", "run"),
    "gil_wait": ("beside: a thread that wants the GIL waits", "python"),
    "device_sync": ("beside: the host blocked in device synchronisations (share of the "
                    "profiled steps, from the trace's runtime calls)", "run"),
    # reports of perfstack 0.1 before issue 16: kernel time summed (overlaps count twice)
    "gpu_kernels": ("beside: GPU kernel time summed over the steps (older report)", "kernel"),
}
#: Parts that add up to the main thread's wall time.
MAIN_PARTS = ("before_sampling", "startup", "compile", "interpreter", "native", "idle")
#: Parts that say nothing of what bounds the workload: the headline names another (under
#: --steps, what ran before the samplers started is start-up and warm-up steps, unsampled).
UNSAMPLED_PARTS = ("before_sampling",)
SPLIT_PARTS = ("framework", "kernels", "openmp", "os", "runtime", "other")


@datarecord
class BudgetLine:
    """One line of the budget: a part of the wall time, who measured it, how."""

    part: str
    title: str
    layer: str
    share: float  # % of the wall time
    seconds: float | None  # share x the baseline's median wall time
    source: str
    depth: int = 0  # 1: a subdivision of the line above it


@datarecord
class Budget:
    """The time budget of a report; empty ``lines`` when no backend measured one."""

    wall_s: float | None
    lines: list[BudgetLine] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    #: the installed backends that measure one (they publish ``budget.*`` or ``split.*``)
    measured_by: list[str] = field(default_factory=list)

    def share(self, part: str) -> float | None:
        """Return a part's share of the wall time (%), or None when it was not measured."""
        return next((ln.share for ln in self.lines if ln.part == part), None)


def _wall(report: Report) -> float | None:
    wall = next((m for m in report.metrics if m.name == "wall_time"), None)
    return float(wall.value) if wall is not None and wall.value is not None else None


def _by_prefix(report: Report, prefix: str) -> dict[str, Metric]:
    out: dict[str, Metric] = {}
    for m in report.metrics:  # a job's ranks' own (budget.idle[rank3]) are not the job's
        if m.name.startswith(prefix) and m.value is not None and m.unit == "%" \
                and not m.name.endswith("]"):
            out.setdefault(m.name[len(prefix):], m)
    return out


def _who(providers: dict[str, list[str]] | None, prefix: str) -> str:
    """' (--plugins a, b)' for the installed backends that publish ``prefix`` metrics."""
    names = (providers or {}).get(prefix) or []
    return f" (--plugins {','.join(names)})" if names else ""


def time_budget(report: Report, providers: dict[str, list[str]] | None = None) -> Budget:
    """Compose the budget from every backend's ``budget.*`` and ``split.*`` metrics.

    ``providers`` (metric name prefix -> installed backends that publish it, from their
    ``Backend.publishes``) lets a note say which backend would fill a missing part."""
    wall = _wall(report)
    shares = _by_prefix(report, "budget.")
    split = _by_prefix(report, "split.")
    budget = Budget(wall, measured_by=sorted({
        b for prefix in ("budget.", "split.") for b in (providers or {}).get(prefix) or []}))

    def line(part: str, share: float, source: str, depth: int = 0) -> None:
        title, layer = PARTS.get(part, (part, "run"))
        seconds = wall * share / 100 if wall is not None else None
        budget.lines.append(BudgetLine(part, title, layer, share, seconds, source, depth))

    for part in MAIN_PARTS:
        m = shares.get(part)
        if m is None:
            continue
        line(part, float(m.value or 0.0), m.source)
        if part == "native" and split:
            total = sum(float(split[p].value or 0.0) for p in split)
            for sub in [p for p in SPLIT_PARTS if p in split] + [
                    p for p in split if p not in SPLIT_PARTS]:
                value = float(split[sub].value or 0.0)
                if total and value:
                    line(sub, float(m.value or 0.0) * value / total,
                         f"{m.source} + {split[sub].source}", depth=1)
    for part in [p for p in shares if p not in MAIN_PARTS]:
        line(part, float(shares[part].value or 0.0), shares[part].source)
    if not any(ln.part in MAIN_PARTS for ln in budget.lines):
        if split:
            budget.notes.append("only the CPU-time split outside the interpreter was measured; "
                                "a Python sampler gives the wall-time budget"
                                + _who(providers, "budget."))
            for sub, m in split.items():
                title, layer = PARTS.get(sub, (sub, "kernel"))
                budget.lines.append(BudgetLine(sub, f"{title} (% of native CPU time)", layer,
                                               float(m.value or 0.0), None, m.source))
        elif budget.lines:
            budget.notes.append("no backend split the main thread's wall time"
                                + _who(providers, "budget."))
    elif "native" in shares and not split:
        budget.notes.append("native code is not split into framework and kernels"
                            + _who(providers, "split."))
    if budget.lines and wall is None:
        budget.notes.append("no baseline wall time: shares only")
    synced = _device_sync(report)
    if budget.lines and synced is not None:  # what a sampler sees as native code running
        title, layer = PARTS["device_sync"]
        budget.lines.append(BudgetLine(
            "device_sync", f"{title}: {fmt_seconds(synced[1])} a step", layer, synced[0],
            None, synced[2]))
    return budget


def _device_sync(report: Report) -> tuple[float, float, str] | None:
    """The host's time blocked in device synchronisations a profiled step (``gpu_sync_time``),
    as a share of the step and in seconds a step, with its source; None where not measured."""
    from perfstack.analysis.panes.steps import step_view
    from perfstack.analysis.stats import median

    m = report.metric("gpu_sync_time")
    steps = step_view(report)
    if m is None or not m.samples or steps is None or steps.median <= 0:
        return None
    blocked = median([float(v) for v in m.samples])
    return 100 * blocked / steps.median, blocked, m.source


def hardware_beside(report: Report) -> list[Metric]:
    """The hardware picture next to the tree: CPU use, IPC, GPU utilisation and power, as the
    metrics themselves (an unknown one with its reason)."""
    out: list[Metric] = []
    seen: set[str] = set()
    for names in (("cpu_utilisation", "cpus_utilized"), ("ipc",)):
        # CPU use as resources measures it over the baseline runs, else as perf does
        m = next((x for name in names for x in report.metrics if x.name == name), None)
        if m is not None:
            seen.add(m.name)
            out.append(m)
    if "ipc" not in seen:  # not derived: say why when the counter could not count
        row = next((r for r in report.layers.get(Layer.HARDWARE, [])
                    if r.key.endswith("instructions") and "value" in r.values
                    and r.values["value"].value is None), None)
        if row is not None:
            out.append(Metric("ipc", None, "", "hardware", row.source, Better.HIGHER,
                              reason=row.values["value"].reason or "not counted"))
    out += [m for m in report.metrics if m.name.startswith("gpu")
            and m.name.endswith(("_util_gpu_mean", "_power_w_mean"))]
    return out
