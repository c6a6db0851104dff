"""``perfstack sweep``: the workload under each combination of environment settings.

The Intel seed's tune shim tries a single thread, one socket and all cores; here the user
names the variables and values (``--env OMP_NUM_THREADS=1,2 --env KMP_BLOCKTIME=0,1``) and
every combination gets an ordinary ``perfstack run`` with its own report. The sweep file
(``sweep.json``, schema ``schemas/sweep.schema.json``) links those reports and holds, per
setting, the measure (the workload's own throughput when it reports or prints one, else the
wall time) with its spread, the best setting and whether it beats the runner-up beyond noise,
and oversubscription warnings.
"""

from __future__ import annotations

import itertools
import os
import re
import statistics
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from perfstack import errors
from perfstack.analysis.stats import compare
from perfstack.machine import cpus
from perfstack.records import datarecord, field
from perfstack.report import Report

SWEEP_SCHEMA = "perfstack-sweep"
SWEEP_VERSION = 1
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
#: Variables whose value is a thread count per process.


def parse_settings(specs: list[str]) -> list[tuple[str, list[str]]]:
    """Parse ``--env NAME=v1,v2`` arguments; raise UsageError with one line when malformed."""
    out: list[tuple[str, list[str]]] = []
    for spec in specs:
        name, eq, values = spec.partition("=")
        name = name.strip()
        if not eq or not _NAME.match(name):
            raise errors.UsageError(f"--env takes NAME=VALUE[,VALUE...], got {spec!r}")
        parts = [v.strip() for v in values.split(",")]
        if not parts or any(v == "" for v in parts):
            raise errors.UsageError(f"--env {name}: empty value in {values!r}")
        if name in (n for n, _ in out):
            raise errors.UsageError(f"--env {name} given twice; list its values once: "
                                    f"{name}=a,b")
        out.append((name, list(dict.fromkeys(parts))))
    if not out:
        raise errors.UsageError("perfstack sweep needs at least one --env NAME=v1,v2")
    return out


def combinations(settings: list[tuple[str, list[str]]]) -> list[dict[str, str]]:
    """Return every combination of the settings, in the order given."""
    names = [n for n, _ in settings]
    return [dict(zip(names, values, strict=True))
            for values in itertools.product(*(v for _, v in settings))]


def slug(env: dict[str, str]) -> str:
    """Return a folder name for one setting: 'OMP_NUM_THREADS-1_KMP_BLOCKTIME-0'."""
    text = "_".join(f"{k}-{v}" for k, v in env.items())
    return re.sub(r"[^A-Za-z0-9_.-]", "_", text)[:150]


@contextmanager
def environment(env: dict[str, str]) -> Iterator[None]:
    """Set ``env`` in os.environ for the duration (the driver passes it to every run)."""
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@datarecord
class Measure:
    """What a setting is judged by."""

    name: str
    unit: str
    better: str  # "higher" | "lower"
    samples: list[float] = field(default_factory=list)


def measure_of(report: Report) -> Measure | None:
    """Return the workload's throughput (reported or printed), else the baseline wall time."""
    workload = [m for m in report.metrics if m.source == "workload" and m.samples
                and m.better.value in ("higher", "lower")]
    chosen = next((m for m in workload if m.name == "throughput"), None) or \
        next(iter(workload), None)
    if chosen is None:
        printed = _printed_throughput(report)
        if printed is not None:
            return printed
        chosen = next((m for m in report.metrics if m.name == "wall_time" and m.samples), None)
    if chosen is None or not chosen.samples:
        return None
    return Measure(chosen.name, chosen.unit, chosen.better.value, list(chosen.samples))


_PRINTED = re.compile(r"throughput[:=]?\s*([0-9][0-9.,]*)\s*([A-Za-z/]*)", re.IGNORECASE)


def _printed_throughput(report: Report) -> Measure | None:
    values, unit = [], ""
    for run in report.run.runs:
        if run.role != "baseline" or not run.exit.clean:
            continue
        found = _PRINTED.findall(run.stdout_tail or "")
        if found:
            number, unit = found[-1]
            try:
                values.append(float(number.replace(",", "")))
            except ValueError:
                continue
    return Measure("throughput (printed)", unit, "higher", values) if values else None


def oversubscription(env: dict[str, str], report: Report | None,
                     processes: int = 1) -> str | None:
    """Return a warning when threads x processes exceed the usable CPUs, else None.

    Thread counts come from the setting itself (OMP_NUM_THREADS and kin) and from what torch
    said it uses in the run (its intra-op threads, recorded in the report's environment); the
    CPUs from the report's environment, else this process's (``perfstack.machine.cpus``).
    """
    torch = report.environment.get("torch") if report is not None else None
    usable = cpus.usable_cpus(report.environment if report is not None else None)
    found = cpus.oversubscription(env, torch if isinstance(torch, dict) else None,
                                  usable if usable is not None else cpus.usable_cpus(),
                                  processes)
    return f"oversubscribed: {found.describe()}" if found is not None else None


def summarize_setting(env: dict[str, str], report: Report | None, report_path: str | None,
                      failure: str | None = None, processes: int = 1) -> dict[str, Any]:
    """Return the sweep entry of one setting."""
    entry: dict[str, Any] = {"env": env, "report": report_path, "status": "ok"}
    if failure is not None or report is None:
        entry["status"] = "failed"
        entry["reason"] = failure or "no report"
        return entry
    if any(not r.exit.clean for r in report.run.runs if r.role in ("baseline", "warmup")):
        entry["status"] = "failed"
        entry["reason"] = "the workload did not finish cleanly"
    measure = measure_of(report)
    if measure is None or not measure.samples:
        entry["measure"] = None
        entry["reason"] = entry.get("reason") or "no throughput and no wall time measured"
    else:
        med = statistics.median(measure.samples)
        entry["measure"] = {
            "name": measure.name, "unit": measure.unit, "better": measure.better,
            "median": med, "samples": measure.samples,
            "spread_pct": (100 * (max(measure.samples) - min(measure.samples)) / med
                           if med else None),
        }
    warning = oversubscription(env, report, processes)
    if warning:
        entry["warning"] = warning
    return entry


def best_of(entries: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Return the best setting and whether it beats the runner-up beyond noise."""
    scored = [e for e in entries if e["status"] == "ok" and e.get("measure")]
    names = {e["measure"]["name"] for e in scored}
    if not scored or len(names) != 1:
        return None
    higher = scored[0]["measure"]["better"] == "higher"
    ranked = sorted(scored, key=lambda e: e["measure"]["median"], reverse=higher)
    best = ranked[0]
    out: dict[str, Any] = {"env": best["env"], "median": best["measure"]["median"],
                           "unit": best["measure"]["unit"], "measure": best["measure"]["name"]}
    if len(ranked) > 1:
        runner = ranked[1]
        result = compare(runner["measure"]["samples"], best["measure"]["samples"])
        out["runner_up"] = runner["env"]
        out["change_vs_runner_up"] = result.change
        out["significant"] = result.significant
        out["reason"] = result.reason
    return out


def document(started: str, command: list[str], settings: list[tuple[str, list[str]]],
             entries: list[dict[str, Any]], complete: bool) -> dict[str, Any]:
    """Return the sweep document (schemas/sweep.schema.json) of the settings run so far:
    ``complete`` is False while the sweep goes on or after it was interrupted."""
    import perfstack

    return {
        "schema": SWEEP_SCHEMA, "version": SWEEP_VERSION,
        "perfstack_version": perfstack.__version__, "started": started,
        "command": command, "variables": [{"name": n, "values": v} for n, v in settings],
        "complete": complete, "settings": entries, "best": best_of(entries),
    }


def render(doc: dict[str, Any]) -> str:
    """Return the sweep as a plain table, the best setting and the warnings."""
    lines = [f"sweep of {' '.join(doc['command'])}", ""]
    rows = []
    for e in doc["settings"]:
        m = e.get("measure")
        value = (f"{m['median']:.4g} {m['unit']}".strip() + f"  ±{m['spread_pct']:.1f}% "
                 f"(n={len(m['samples'])}, {m['name']})") if m else e.get("reason", "n/a")
        setting = ", ".join(f"{k}={v}" for k, v in e["env"].items())
        rows.append((setting, e["status"], value, e.get("warning", "")))
    width = max(len(r[0]) for r in rows) if rows else 10
    for setting, status, value, warning in rows:
        lines.append(f"  {setting:<{width}}  {status:<6}  {value}")
        if warning:
            lines.append(f"  {'':<{width}}  warning: {warning}")
    best = doc.get("best")
    lines.append("")
    if best:
        setting = ", ".join(f"{k}={v}" for k, v in best["env"].items())
        verdict = ""
        if "runner_up" in best:
            runner = ", ".join(f"{k}={v}" for k, v in best["runner_up"].items())
            verdict = (f"; {100 * best['change_vs_runner_up']:+.1f}% vs {runner}: "
                       f"{best['reason']}")
        lines.append(f"best: {setting} ({best['median']:.4g} {best['unit']}){verdict}")
    else:
        lines.append("best: none could be chosen (no setting measured cleanly)")
    return "\n".join(lines) + "\n"

