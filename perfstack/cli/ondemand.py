"""``perfstack run --on-demand``: the workload run once with the backends that record on
demand (``Backend.capture``) armed inside it, recording nothing until ``perfstack capture``
asks (perfstack.inprocess.ondemand); the run's report lists the captures made."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from perfstack import errors
from perfstack.cli.session import Prepared, backend_options
from perfstack.plugin.backend import InProcessHook, availability
from perfstack.plugin.manager import BackendEntry
from perfstack.report import Report
from perfstack.runfolder.filenames import CAPTURES_DIR, RANK_PREFIX

#: The in-process hook that arms the rider.
ARM = "perfstack.inprocess.ondemand:arm"


def ondemand_armed(prepared: Prepared, ns: argparse.Namespace) -> list[BackendEntry]:
    """The backends to arm (those chosen that record on demand and can run here; under
    torchrun in every rank); the session is made one plain run of the workload, no
    backend's own."""
    able = [e for e in prepared.selected if e.backend.capture]
    if ns.plugins is not None:
        refused = [e.backend.name for e in prepared.selected
                   if not e.backend.capture and not e.backend.rides]
        if refused:
            raise errors.UsageError(
                f"--on-demand: {', '.join(refused)} cannot record on demand; these can: "
                + (", ".join(n for n, e in sorted(prepared.backends.items())
                             if e.backend.capture) or "none installed"))
    armed = [e for e in able if availability(e.backend).ok]
    if not armed:
        raise errors.UsageError("--on-demand: no backend that records on demand can run here "
                                "('perfstack plugins' says why)")
    prepared.selected = []  # nothing runs of its own: the one run is the job
    ns.repeat, ns.warmup = 1, 0
    return armed


def arm_hook(armed: list[BackendEntry], prepared: Prepared, run_dir: Path) -> InProcessHook:
    """The in-process hook that arms ``armed`` with their options in the job (and the line
    saying how to capture it)."""
    print(f"perfstack: on demand: {', '.join(e.backend.name for e in armed)} armed in the "
          f"workload; record N steps with 'perfstack capture {run_dir} --steps N'",
          file=sys.stderr, flush=True)
    options = backend_options(prepared.ns, armed)
    return InProcessHook(ARM, {"hooks": [
        {"backend": e.backend.name, "target": e.backend.capture,
         "options": options.get(e.backend.name, {})} for e in armed]})


def note_captures(report: Report, run_dir: Path, armed: list[BackendEntry]) -> None:
    """Say in the run's report what was armed and each capture made (its steps, its folder,
    a torchrun job's ranks in it)."""
    made: dict[int, dict[str, Any]] = {}
    for done_file in sorted(run_dir.glob(f"baseline-*/**/{CAPTURES_DIR}/*/done.json")):
        try:
            done = json.loads(done_file.read_text("utf-8"))
        except (OSError, ValueError):
            continue
        ident = done.get("id")
        if not isinstance(ident, int):
            continue
        one = made.setdefault(ident, {"id": ident, "steps": done.get("steps"),
                                      "folder": str(done_file.parent), "ranks": []})
        rank = done_file.parent.parent.parent.name
        if rank.startswith(RANK_PREFIX):
            one["ranks"].append(int(rank[len(RANK_PREFIX):]))
    captures = [{k: v for k, v in c.items() if v != []} for _, c in sorted(made.items())]
    report.environment["on_demand"] = {"armed": [e.backend.name for e in armed],
                                       "captures": captures}
