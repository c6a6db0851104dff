"""Start-up and imports: a run whose time goes before the workload's own code (imports,
interpreter set-up) or after it (teardown), and the imports that cost the most."""

from __future__ import annotations

from perfstack.analysis.rules.time import share_of
from perfstack.report import Finding, Layer, Report

#: Share of the wall time (%) in start-up and imports from which it is a finding.
STARTUP_SHARE = 100 / 3


#: A teardown this share of the wall time (%) or more is named in the start-up finding.
TEARDOWN_SHARE = 10.0


def _slowest_imports(report: Report, top: int = 3) -> list[str]:
    """The modules whose import took most of a sampler's samples: per package, its outermost
    ``<module>`` row (inclusive share), largest first."""
    from perfstack.analysis.origin import module_of, origin, workload_dir

    home = workload_dir(report)
    best: dict[str, tuple[str, float, str]] = {}  # library -> its largest import
    for row in report.layers.get(Layer.PYTHON, []):
        share = row.values.get("total_share")
        file = row.attrs.get("file")
        if row.attrs.get("function") != "<module>" or share is None or share.value is None \
                or not isinstance(file, str):
            continue
        where = origin(file, home)
        if where.ours:
            continue
        value = float(share.value)
        if value > best.get(where.library, ("", 0.0, ""))[1]:
            best[where.library] = (module_of(file) or where.library, value, where.path)
    ranked = sorted(best.values(), key=lambda b: -b[1])[:top]
    # The module imported names it better than its library ('torch._dynamo', not 'torch').
    return [f"import {module}: {value:.0f}% of the samples ({path})"
            for module, value, path in ranked]


def _late_imports(report: Report, top: int = 3) -> list[str]:
    """Imports made inside the workload's own functions (a sampler files them under the
    function, with the library call that imported), largest first, as evidence lines."""
    from perfstack.analysis.origin import short_key, workload_dir

    home = workload_dir(report)
    found: list[tuple[float, str]] = []
    for row in report.layers.get(Layer.PYTHON, []):
        late, function, file = (row.attrs.get(k) for k in ("late_imports", "function", "file"))
        if not isinstance(late, list) or not isinstance(function, str) \
                or not isinstance(file, str):
            continue
        line = row.attrs.get("line")
        caller = short_key(function, file, line if isinstance(line, int) else None, home)
        for item in late:
            if not isinstance(item, dict) or not isinstance(item.get("seconds"), (int, float)):
                continue
            via = item.get("via")
            how = "an import statement in it"
            if isinstance(via, dict):
                at = via.get("line")
                how = "when it called " + short_key(str(via.get("function")),
                                                    str(via.get("file")),
                                                    at if isinstance(at, int) else None, home)
            found.append((float(item["seconds"]),
                          f"import {item.get('module')} inside {caller}: "
                          f"{float(item['seconds']):.2f} s, {how} ({row.source})"))
    return [text for _, text in sorted(found, key=lambda f: -f[0])[:top]]


def startup(report: Report) -> list[Finding]:
    """A run whose wall time goes mostly before or after the workload's own code (start-up and
    imports past STARTUP_SHARE, teardown past TEARDOWN_SHARE), with the imports that cost most."""
    share = share_of(report, "budget.startup")
    if share is None or share[0] < STARTUP_SHARE:
        return []
    wall = report.metric("wall_time")
    seconds = (f" ({share[0] / 100 * float(wall.value):.2f} s of {float(wall.value):.2f} s)"
               if wall is not None and wall.value else "")
    late = _late_imports(report)
    teardown = report.metric("teardown_time")
    after = ([f"the process ran on {float(teardown.value):.2f} s after the script returned "
              "(teardown: atexit handlers, threads and worker pools joined; teardown_time)"]
             if teardown is not None and teardown.value is not None and wall is not None
             and wall.value and float(teardown.value) >= TEARDOWN_SHARE / 100 * float(
                 wall.value) else [])
    return [Finding(
        rule="time.startup",
        title=f"start-up and imports take {share[0]:.0f}% of the run{seconds}",
        layer="python", severity="warning",
        # An import made inside the workload's own function is the most actionable: first.
        evidence=[*late, f"{share[0]:.1f}% of the main thread's wall time before the "
                  f"workload's own code ran or after it ended: imports, interpreter set-up and "
                  f"teardown (budget.startup, from {share[1]})", *after,
                  *_slowest_imports(report)],
        action=(("an import made inside your own function runs the first time that call is "
                 "made (a one-time cost of the process, not of each step); "
                 if late else "")
                + "measure each import with 'python -X importtime script.py 2> imports.log'; "
                "import heavy modules only where needed, or keep one process alive for many "
                "tasks (a server, a notebook) instead of starting one per task; for a "
                "benchmark, profile more steps (the start-up is a fixed cost)"),
        source="perfstack")]
