"""``perfstack trend`` (change points over the history) and ``perfstack gate`` (the newest
run against its history, for CI)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from perfstack import errors
from perfstack.cli.common import (
    EXIT_DISTURBED,
    EXIT_OK,
    EXIT_REGRESSION,
    Parser,
    percentage,
)
from perfstack.cli.history import DB_HELP, database
from perfstack.plugin.renderer import terminal_safe


def _filters(parser: Parser) -> None:
    parser.add_argument("--workload", metavar="TEXT",
                        help="workloads whose command contains TEXT (or whose id is TEXT)")
    parser.add_argument("--branch", help="runs on this git branch only")
    parser.add_argument("--machine", metavar="ID", help="this machine only (its id or a prefix)")
    parser.add_argument("--since", metavar="DATE", help="runs started on or after DATE")
    parser.add_argument("--db", metavar="FILE|URL", help=DB_HELP)


def _groups(ns: Any, top_rows: int, row_keys: list[str] | None = None) -> list[Any]:
    # Found, not imported: scipy.stats alone takes 0.6 s to import, which a history that
    # does not exist, or a filter that matches nothing, should not wait for.
    from importlib.util import find_spec

    missing = next((name for name in ("numpy", "scipy", "otava") if find_spec(name) is None),
                   None)
    if missing is not None:
        raise errors.MissingDependency(
            f"this command needs Apache Otava, numpy and scipy ({missing} is missing): "
            "pip install numpy scipy && pip install --no-deps apache-otava==0.8.0")
    from perfstack import history
    from perfstack.history import location as historydb

    location = database(ns.db)
    if not historydb.exists(location):
        raise errors.InputNotFound(f"{location}: no history yet ('perfstack run' writes it; "
                                   "'perfstack history add REPORT' adds old reports)")
    try:
        found = history.groups(location, workload=ns.workload, branch=ns.branch,
                               machine=ns.machine, since=ns.since, top_rows=top_rows,
                               row_keys=row_keys or [])
    except historydb.errors() as exc:
        raise errors.HistoryUnavailable(
            f"cannot read the history {historydb.describe(location)}: {exc}") from None
    if not found:
        raise errors.InputNotFound(f"{historydb.describe(location)}: no runs match")
    return found


def cmd_trend(argv: list[str]) -> int:
    """Find the change points of every series in the history."""
    from perfstack.cli.show import output_width
    from perfstack.history import trend
    from perfstack.render import trend as render

    parser = Parser(prog="perfstack trend",
                    description="Change points in every metric's and every top row's series "
                    "over the history, per workload and machine (never mixing machines): "
                    "where each stepped, the commits around it, its size with a 95%% "
                    "interval, and the layer and rows that moved with it.",
                    epilog="a series says 'cannot tell yet' when a step is possible but not "
                    "significant, or its runs are too few or too noisy for a step of "
                    "--min-change to show. examples: perfstack trend | perfstack trend "
                    "--workload train.py --html trend.html | perfstack trend --format json")
    _filters(parser)
    parser.add_argument("--min-change", type=percentage, default="5%", metavar="PCT",
                        help="the smallest step that counts (default: 5%%)")
    parser.add_argument("--rows", type=int, default=5, metavar="N",
                        help="rows of each layer followed (the newest run's largest; "
                        "default: 5)")
    parser.add_argument("--all", action="store_true",
                        help="list every series, not only those that changed or cannot tell")
    parser.add_argument("--format", choices=("text", "json"), default="text")
    parser.add_argument("--html", type=Path, metavar="FILE",
                        help="also write an offline HTML page with a chart per series")
    ns = parser.parse_args(argv)
    if ns.rows < 1:
        raise errors.UsageError(f"--rows {ns.rows}: give 1 or more (the metrics are followed "
                                "whatever --rows says)")
    min_change = ns.min_change
    trends = [trend.analyse(g, min_change) for g in _groups(ns, ns.rows)]
    if ns.html is not None:
        from perfstack.report.files import write_text_atomic

        write_text_atomic(ns.html, render.render_html(trends))
        print(f"perfstack: trend chart: {ns.html}", file=sys.stderr)
    if ns.format == "json":
        sys.stdout.write(json.dumps([t.to_dict() for t in trends], indent=1) + "\n")
    else:
        sys.stdout.write(terminal_safe(render.render_text(trends, output_width(), ns.all)))
    return EXIT_OK


def cmd_gate(argv: list[str]) -> int:
    """Judge the newest runs of a workload against the level before them."""
    from perfstack.cli.show import output_width
    from perfstack.history import gate
    from perfstack.render import trend as render

    parser = Parser(prog="perfstack gate",
                    description="Judge the newest runs of a workload against the level "
                    "before them (not one baseline report): when a series stepped among "
                    f"the newest {gate.RECENT} runs, the runs since the step against the "
                    "level before it; else the newest run against the runs before it since "
                    "their last change point. Exit 1 when a metric got worse by more than "
                    "--threshold, beyond the history's own noise and not the machine's "
                    f"doing; exit {EXIT_DISTURBED} when the newest run was disturbed by "
                    "other programs (run it again).",
                    epilog="example, in CI after 'perfstack run ... ': perfstack gate "
                    "--workload train.py --branch main --threshold 5%. A regression keeps "
                    f"failing for {gate.RECENT} runs unless fixed; --since DATE (after it) "
                    "accepts the new level sooner.")
    _filters(parser)
    parser.add_argument("--threshold", type=percentage, default="5%", metavar="PCT",
                        help="a change smaller than this never fails, in percent: 5%% or 5 (a "
                        "bare number under 1 is refused as ambiguous; default: 5%%)")
    parser.add_argument("--alpha", type=float, default=gate.GATE_ALPHA, metavar="P",
                        help=f"significance, shared among the series gated (default: "
                        f"{gate.GATE_ALPHA})")
    parser.add_argument("--metric", action="append", metavar="NAME",
                        help="gate on this metric or row key (repeatable; default: every "
                        "metric with a direction, higher or lower is better)")
    parser.add_argument("--format", choices=("text", "json"), default="text")
    ns = parser.parse_args(argv)
    if not 0 < ns.alpha < 1:
        raise errors.UsageError("--alpha must be between 0 and 1")
    threshold = ns.threshold
    groups = _groups(ns, top_rows=0, row_keys=ns.metric)
    if len(groups) > 1:
        names = "; ".join(f"{' '.join(g.workload)[:40]} on {g.machine[:8]}" for g in groups)
        raise errors.UsageError(f"{len(groups)} workloads or machines match ({names}): name "
                                "one with --workload or --machine")
    judged = gate.gate(groups[0], ns.metric, threshold, ns.alpha)
    disturbed = gate.disturbed_newest(groups[0])
    if ns.metric and not judged:
        raise errors.UsageError(f"no series named {', '.join(ns.metric)} in the newest run")
    if ns.format == "json":
        sys.stdout.write(json.dumps({"threshold": threshold, "alpha": ns.alpha,
                                     "rate": render.gate_rate_line(judged, ns.alpha,
                                                                   groups[0].figure),
                                     "run": groups[0].runs[-1].id, "disturbed": disturbed,
                                     "judgements": [j.to_dict() for j in judged]},
                                    indent=1) + "\n")
    else:
        sys.stdout.write(terminal_safe(render.render_gate(judged, output_width(), threshold,
                                                          disturbed, ns.alpha,
                                                          groups[0].figure)))
    if disturbed is not None:
        return EXIT_DISTURBED
    return EXIT_REGRESSION if any(j.regression for j in judged) else EXIT_OK
