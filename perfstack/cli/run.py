"""``perfstack run``: profile a workload with the chosen backends and write the report."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from perfstack import errors, signals
from perfstack.cli import outputs
from perfstack.cli.common import EXIT_BACKENDS_FAILED, EXIT_OK, EXIT_WORKLOAD_FAILED
from perfstack.cli.ondemand import arm_hook, note_captures, ondemand_armed
from perfstack.cli.runargs import build_parser
from perfstack.cli.session import prepare, split_workload_args, workload_of
from perfstack.cli.show import check_view_options
from perfstack.plugin.backend import Workload
from perfstack.plugin.manager import Plugins
from perfstack.report import Status
from perfstack.run import nodes
from perfstack.runfolder.filenames import REPORT_FILE


def _refuse_collisions(ns: argparse.Namespace, workload: Workload) -> None:
    """Outputs that would overwrite the workload or each other are refused before anything
    runs: -o onto the script, --html onto the script or the report."""
    script = None if workload.module else Path(workload.target)
    report = None if outputs.to_stdout(ns.output) else ns.output  # -o -: in the run folder
    outputs.refuse_collisions(
        [("-o", report), ("--html", outputs.html_output(ns.html, report))],
        [("the workload script", script)] if script is not None else [])


def use_job_dir(ns: argparse.Namespace, torchrun_args: list[str]) -> None:
    """``--job-dir DIR``: this node's report and run folder go to ``DIR/nodeN`` (N its node
    rank, from torchrun's options or the launcher's environment)."""
    if ns.output is not None or ns.out_dir is not None:
        raise errors.UsageError("--job-dir places the report and the run folder: give it "
                                "without -o and --out-dir")
    node = nodes.node_rank(torchrun_args, os.environ)
    if node is None:
        raise errors.UsageError("--job-dir: which node of the job is this? give --node-rank "
                                "in --torchrun-args, or run under SLURM (srun)")
    folder = ns.job_dir / f"node{node}"
    refusal = (f"{folder}: node {node} of a job already wrote there (or writes there now); "
               "give each job its own --job-dir")
    if ns.dry_run:  # writes nothing: the check alone
        if folder.exists() and (not folder.is_dir() or any(folder.iterdir())):
            raise errors.OutputError(refusal)
    else:  # taken atomically: two sessions of one node started together cannot both write
        from perfstack.runfolder.claim import claim_empty_folder

        claim_empty_folder(folder, refusal)
    ns.output, ns.out_dir = folder / REPORT_FILE, folder / "run"


def cmd_run(plugins: Plugins, argv: list[str]) -> int:
    """Profile a workload; write the report; print it unless --quiet."""
    from perfstack.cli.history import remember
    from perfstack.cli.show import print_report
    from perfstack.report.files import save_report
    from perfstack.runfolder import rundir

    backends = plugins.backends()[0]
    own, workload_args = split_workload_args(argv)
    ns = build_parser(backends).parse_args(own)
    check_view_options(ns)
    if ns.quick:
        from perfstack.cli.quick import quick_plan

        quick_plan(ns, own, backends)
    prepared = prepare(plugins, ns, own, "run")  # --ranks passed on to backends taking it
    armed = ondemand_armed(prepared, ns) if ns.on_demand else []  # (checked before any run)
    workload = workload_of(ns, workload_args)
    if ns.job_dir is not None:
        use_job_dir(ns, prepared.distributed["torchrun_args"])
    to_stdout = outputs.to_stdout(ns.output)
    if ns.output is not None and not to_stdout:
        rundir.check_writable(ns.output)
    if isinstance(ns.html, str) and ns.html:
        rundir.check_writable(Path(ns.html))
    _refuse_collisions(ns, workload)
    # The sampler's answer first (the baseline's figures do not depend on its place:
    # docs/performance.md); a torchrun job's first run starts its ranks' rendezvous.
    answer_first = not ns.nproc_per_node and not ns.baseline_first
    if ns.dry_run:
        for line in prepared.plan(workload, answer_first=answer_first):
            print(line)
        return EXIT_OK
    run_dir = prepared.run_folder()
    # -o -: the report's JSON goes to standard output, and its file stays in the run folder.
    report_path: Path = ns.output if ns.output is not None and not to_stdout \
        else run_dir / REPORT_FILE
    session = prepared.session(workload, run_dir, report_path.parent.resolve(),
                               answer_first=answer_first and not ns.on_demand)
    if ns.on_demand:
        session.runner.riders.append(arm_hook(armed, prepared, run_dir))
    report = session.execute()
    if ns.on_demand:
        note_captures(report, run_dir, armed)
    with signals.deferred():  # a second signal must not lose the report being written
        save_report(report, report_path)
        remember(report, report_path)
    if ns.out_dir is None:
        rundir.point_latest(run_dir)
    if to_stdout:
        from perfstack.report.files import report_json

        sys.stdout.write(report_json(report))
        sys.stdout.flush()
    elif not ns.quiet:
        print_report(report, plugins, top=ns.top, depth=ns.depth, full=ns.full,
                     all_frames=ns.all_frames, report_dir=report_path.parent.resolve())
    print(saved_line(report_path, run_dir), file=sys.stderr)
    if ns.html is not None:
        html_path = (report_path.with_suffix(".html") if ns.html in (True, "")
                     else Path(ns.html))
        outputs.write_html(plugins, report, report_path, html_path, ns.top, ns.depth)
        print(f"html: {html_path}", file=sys.stderr)
    if not report.run.complete:
        print("perfstack: interrupted; the report above is partial", file=sys.stderr)
        signals.note_interrupt()
        return signals.exit_code()
    if signals.pending() is not None:  # a signal while the report and history were written
        print("perfstack: interrupted once the report was written", file=sys.stderr)
        return signals.exit_code()
    if any(not r.exit.clean for r in report.run.runs if r.role != "extra"):
        print("perfstack: the workload did not finish cleanly in every run "
              "(see the findings)", file=sys.stderr)
        return EXIT_WORKLOAD_FAILED
    if ns.plugins is not None and report.backends and all(
            b.status is Status.FAILED for b in report.backends):
        print("perfstack: every backend named with --plugins failed (see the report's "
              "backends for why)", file=sys.stderr)
        return EXIT_BACKENDS_FAILED
    return EXIT_OK


def saved_line(report_path: Path, run_dir: Path | str) -> str:
    """Where the report went and its artifacts: in one line that fits 80 columns when the
    report is in its run folder (the artifacts beside it), else both paths."""
    beside = report_path.resolve().parent == Path(run_dir).resolve()
    return f"report: {report_path}  (" + ("the artifacts beside it" if beside
                                         else f"artifacts: {run_dir}") + ")"
