"""The core's own finding rules: what went wrong with the run itself.

These look only at the run records and the backend table (never at a particular backend),
so they hold for every workload: a crash or a hang, a baseline too noisy to judge overheads
and differences, and a backend that slowed the workload so much its timings are suspect.
"""

from __future__ import annotations

from perfstack.pluginmanager import hookimpl
from perfstack.report import Finding, Report, RunRecord, Status
from perfstack.stats import summarize

#: Baseline relative standard deviation above which differences are hard to see.
NOISE_LIMIT = 0.05
#: A backend run this many times slower than the baseline distorts what it measures.
OVERHEAD_LIMIT = 1.5


def _stack_top(record: RunRecord, lines: int = 6) -> list[str]:
    """Return the first lines of faulthandler's dump: the most recent calls come first."""
    if not record.python_stack:
        return ["no Python stack could be had (the process died before or outside Python)"]
    text = [line.rstrip() for line in record.python_stack.strip().splitlines() if line.strip()]
    return text[:lines]


def _failures(report: Report) -> list[Finding]:
    out = []
    for kind in ("signalled", "exited", "timeout"):
        # A backend's extra runs (a sweep on another interpreter) are its own to judge.
        bad = [r for r in report.run.runs
               if r.exit.status == kind and not r.exit.clean and r.role != "extra"]
        if not bad:
            continue
        first = bad[0]
        ids = ", ".join(r.id for r in bad)
        if kind == "timeout":
            title = f"the workload hung: stopped at the {report.run.timeout_s:g} s timeout"
            action = "the stack shows where it was stuck; raise --timeout if it was just slow"
        elif kind == "signalled":
            title = f"the workload crashed with {first.exit.describe()}"
            action = ("the Python stack shows the last call into native code; run it under gdb "
                      "or with PYTHONFAULTHANDLER=1 to see the native frames")
        else:
            title = f"the workload exited with status {first.exit.code}"
            action = f"see its stderr ({first.stderr}) for the error"
        if kind == "exited" and not first.python_stack:
            detail = (first.stderr_tail or "it printed nothing on stderr").splitlines()[-4:]
        else:
            detail = _stack_top(first)
        out.append(Finding(
            rule=f"run.{kind if kind != 'signalled' else 'crashed'}", title=title, layer="run",
            severity="critical", evidence=[f"runs: {ids}", *detail], action=action,
            source="perfstack"))
    return out


def _noise(report: Report) -> list[Finding]:
    wall = report.metric("wall_time")
    if wall is None or not wall.samples:
        return []
    samples = wall.samples
    if len(samples) == 1:
        return [Finding(
            rule="run.single-baseline", title="one baseline run: its noise is unknown",
            layer="run", severity="info",
            evidence=[f"baseline wall time {samples[0]:.3f} s, n=1"],
            action="use --repeat 3 or more so overheads and diffs can be judged against noise",
            source="perfstack")]
    spread = summarize(samples).relative_stdev
    if spread is None or spread <= NOISE_LIMIT:
        return []
    return [Finding(
        rule="run.noisy-baseline", title=f"the baseline varies by {spread:.0%} between runs",
        layer="run", severity="warning",
        evidence=[f"wall times: {', '.join(f'{x:.3f}' for x in samples)} s"],
        action=("differences smaller than this are noise: close other programs, run "
                "'python -m pyperf system tune', or raise --repeat"),
        source="perfstack")]


def _overheads(report: Report) -> list[Finding]:
    out = []
    for b in report.backends:
        if b.status is not Status.OK or b.overhead is None:
            continue
        if b.overhead.ratio > OVERHEAD_LIMIT:
            out.append(Finding(
                rule="run.high-overhead",
                title=f"{b.name} slowed the workload {b.overhead.ratio:.2f}x",
                layer="run", severity="warning",
                evidence=[f"{b.name} run {b.wall_s:.3f} s vs baseline median "
                          f"{b.overhead.baseline_median_s:.3f} s (n={b.overhead.baseline_n})"],
                action=(f"read {b.name}'s absolute times with care; compare shares within it, "
                        "or lower its sampling rate or detail"),
                source="perfstack"))
    return out


@hookimpl
def perfstack_findings(report: Report) -> list[Finding]:
    """Return findings about crashes, hangs, baseline noise and backend overhead."""
    return [*_failures(report), *_noise(report), *_overheads(report)]
