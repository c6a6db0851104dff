"""``perfstack run``: profile a workload with the chosen backends and write the report."""

from __future__ import annotations

import argparse
import importlib.machinery
import os
import sys
from pathlib import Path
from typing import Any

from perfstack import errors
from perfstack.backend import Workload, availability
from perfstack.cli import outputs
from perfstack.cli.common import (
    DEFAULT_RUNS_DIR,
    EXIT_BACKENDS_FAILED,
    EXIT_OK,
    EXIT_WORKLOAD_FAILED,
)
from perfstack.cli.runargs import build_parser, option_dest, step_window
from perfstack.cli.show import check_view_options
from perfstack.pluginmanager import BackendEntry, Plugins
from perfstack.report import Status
from perfstack.run import nodes, ranks, signals
from perfstack.run.filenames import REPORT_FILE


def require_baseline(ns: argparse.Namespace, command: str) -> None:
    """Refuse ``--repeat 0`` where the baseline runs are the thing compared (ab, sweep) or
    where a job's ranks are found in them (--nproc-per-node)."""
    if ns.repeat != 0:
        return
    if command != "run":
        raise errors.UsageError(f"perfstack {command} compares baseline runs: --repeat must be "
                                "at least 1")
    if getattr(ns, "nproc_per_node", None):
        raise errors.UsageError("--repeat 0 with --nproc-per-node: the job's ranks are found "
                                "in its baseline run; give --repeat 1 or more")


def describe_plan(workload: Workload, selected: list[BackendEntry], repeat: int, warmup: int,
                  nproc_per_node: int | None,
                  backend_options: dict[str, dict[str, Any]] | None = None,
                  answer_first: bool = False) -> list[str]:
    """The runs a session would make, one line each in the order made, and whether each
    backend can run here (``answer_first``: those with runs of their own come first)."""
    command = " ".join(workload.command())
    launcher = f" under torchrun, {nproc_per_node} processes" if nproc_per_node else ""
    unprofiled = [f"  warm-up: {warmup} run(s), not measured" if warmup else "  no warm-up run",
                  f"  baseline: {repeat} run(s) with no profiler" if repeat else
                  "  no baseline run (--repeat 0): the unprofiled time and overheads unknown"]
    first: list[str] = []
    rest: list[str] = []
    for entry in selected:
        available = availability(entry.backend)
        if available.ok:
            runs = entry.backend.run_count((backend_options or {}).get(entry.backend.name, {}))
            line = f"  {entry.backend.name}: " + (
                "no run of its own (reads the baseline runs)" if not entry.backend.own_run
                else "one run" if runs == 1 else f"{runs} runs")
        else:
            fix = f" (fix: {available.fix})" if available.fix else ""
            line = f"  {entry.backend.name}: cannot run here: {available.reason}{fix}"
        (first if answer_first and available.ok and entry.backend.own_run else rest).append(
            line + (", first: the answer comes after it" if answer_first and available.ok
                    and entry.backend.own_run else ""))
    return [f"perfstack would run: {command}{launcher}", *first, *unprofiled, *rest]


def split_workload_args(argv: list[str]) -> tuple[list[str], list[str]]:
    """Return (perfstack's arguments, the workload's): the workload's come after ``--``.

    ``--html`` takes an optional file name; a following word that does not end in .html or
    .htm is not it (``--html train.py`` names the workload, not the page)."""
    if "--" in argv:
        at = argv.index("--")
        own, rest = argv[:at], argv[at + 1:]
    else:
        own, rest = argv, []
    fixed = []
    for i, word in enumerate(own):
        following = own[i + 1] if i + 1 < len(own) else ""
        if word == "--html" and not following.lower().endswith((".html", ".htm")):
            word = "--html="  # the default file; the next word stays what it is
        fixed.append(word)
    return fixed, rest


def workload_of(ns: argparse.Namespace, args: list[str]) -> Workload:
    if ns.script and ns.module:
        raise errors.UsageError("give a script or -m MODULE, not both")
    if ns.module:
        top = ns.module.split(".")[0]
        # Find (not import) the top-level package where the workload process would look.
        if importlib.machinery.PathFinder.find_spec(top, [os.getcwd(), *sys.path[1:]]) is None:
            raise errors.InputNotFound(f"no module named {top!r} (for -m {ns.module})")
        return Workload(ns.module, args, module=True)
    if not ns.script:
        raise errors.UsageError("name a workload script, or -m MODULE (see 'perfstack run --help')")
    if not Path(ns.script).is_file():
        raise errors.InputNotFound(f"{ns.script}: no such file")
    return Workload(ns.script, args)


def _refuse_collisions(ns: argparse.Namespace, workload: Workload) -> None:
    """Outputs that would overwrite the workload or each other are refused before anything
    runs: -o onto the script, --html onto the script or the report."""
    script = None if workload.module else Path(workload.target)
    report = None if outputs.to_stdout(ns.output) else ns.output  # -o -: in the run folder
    outputs.refuse_collisions(
        [("-o", report), ("--html", outputs.html_output(ns.html, report))],
        [("the workload script", script)] if script is not None else [])


def select_backends(ns: argparse.Namespace,
                    backends: dict[str, BackendEntry]) -> list[BackendEntry]:
    """Return the backends --plugins names (default: every one that is not opt-in, the quick
    ones first, so that the answer comes as soon as a sampler is in)."""
    if ns.plugins is None:
        order = sorted(backends, key=lambda name: (not backends[name].backend.quick, name))
        return [backends[name] for name in order if not backends[name].backend.opt_in]
    names = [n.strip() for n in ns.plugins.split(",") if n.strip()]
    if not names:
        raise errors.UsageError("--plugins needs at least one backend name")
    for name in names:
        if name not in backends:
            raise errors.UnknownPlugin(name, sorted(backends))
    return [backends[name] for name in dict.fromkeys(names)]


def backend_options(ns: argparse.Namespace, selected: list[BackendEntry]) -> dict[str, Any]:
    """Return each selected backend's options, by backend name, as parsed."""
    out: dict[str, dict[str, Any]] = {}
    for entry in selected:
        name = entry.backend.name
        out[name] = {o.name: getattr(ns, option_dest(name, o.name)) for o in entry.backend.options}
    return out


def _nodes(torchrun_args: list[str]) -> int:
    """The job's number of nodes from torchrun's --nnodes (N, or MIN:MAX: the most)."""
    for i, arg in enumerate(torchrun_args):
        value = None
        if arg == "--nnodes":
            value = torchrun_args[i + 1] if i + 1 < len(torchrun_args) else None
        elif arg.startswith("--nnodes="):
            value = arg.split("=", 1)[1]
        if value is not None:
            last = value.split(":")[-1]
            if last.isdigit() and int(last) > 0:
                return int(last)
            raise errors.UsageError(f"--torchrun-args: --nnodes {value} is not a number of "
                                    "nodes")
    return 1


def distributed_options(ns: argparse.Namespace, own: list[str],
                 backends: dict[str, BackendEntry]) -> dict[str, Any]:
    """Return the torchrun options of RunOptions; check --ranks; pass it on to every backend
    with a ``ranks`` option."""
    import shlex

    if ns.nproc_per_node is None:
        if ns.ranks != "0" or ns.torchrun_args or getattr(ns, "job_dir", None) is not None:
            raise errors.UsageError("--ranks, --torchrun-args and --job-dir need "
                                    "--nproc-per-node")
        return {}
    spec = ns.ranks.strip()
    try:
        named = ranks.parse(spec)
    except ValueError as exc:
        raise errors.UsageError(str(exc)) from None
    try:
        extra = shlex.split(ns.torchrun_args)
    except ValueError as exc:
        raise errors.UsageError(f"--torchrun-args: {exc}") from None
    if not extra and (slurm := nodes.slurm_rendezvous(os.environ)) is not None:
        extra = slurm  # a node of a SLURM job: its nodes, this node, the first host
        print("perfstack: a SLURM job of several nodes: torchrun " + " ".join(extra),
              file=sys.stderr)
    world = ns.nproc_per_node * _nodes(extra)
    if named is not None and any(r >= world for r in named):
        raise errors.UsageError(f"--ranks {spec}: the job has ranks 0 to {world - 1}")
    # Every backend with a "ranks" option takes the session's --ranks, unless it was given
    # its own (--NAME-ranks).
    for name, entry in backends.items():
        if not any(o.name == "ranks" for o in entry.backend.options):
            continue
        if not any(a.startswith(f"--{name}-ranks") for a in own):
            setattr(ns, option_dest(name, "ranks"), spec)
    return {"nproc_per_node": ns.nproc_per_node, "ranks": spec, "torchrun_args": extra}


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
        from perfstack.run.claim import claim_empty_folder

        claim_empty_folder(folder, refusal)
    ns.output, ns.out_dir = folder / REPORT_FILE, folder / "run"


def _write_html(plugins: Plugins, report: Any, report_path: Path, html_path: Path, top: int,
                depth: int) -> None:
    from perfstack.report.files import write_text_atomic

    # The format that writes .html pages (the html plugin's; another plugin may provide it).
    found = next((r for r in plugins.renderers().values()
                  if r.output_file_extension in (".html", ".htm")), None)
    if found is None:
        raise errors.UsageError("--html: no installed output format writes HTML (is the html "
                                "plugin disabled?)")
    write_text_atomic(html_path, found.render(report, plugins.render_options(
        top=top, depth=depth, report_dir=report_path.parent.resolve(),
        output_dir=html_path.parent.resolve())))


def cmd_run(plugins: Plugins, argv: list[str]) -> int:
    """Profile a workload; write the report; print it unless --quiet."""
    from rich.console import Console

    from perfstack.cli.history import remember
    from perfstack.cli.progress import PlainProgress, TerminalProgress
    from perfstack.cli.show import print_report
    from perfstack.report.files import save_report
    from perfstack.run import rundir
    from perfstack.run.driver import Session
    from perfstack.run.options import RunOptions

    backends, failures = plugins.backends()
    own, workload_args = split_workload_args(argv)
    ns = build_parser(backends).parse_args(own)
    check_view_options(ns)
    if ns.quick:
        from perfstack.cli.quick import quick_plan

        quick_plan(ns, own, backends)
    require_baseline(ns, "run")
    workload = workload_of(ns, workload_args)
    selected = select_backends(ns, backends)
    distributed = distributed_options(ns, own, backends)  # --ranks to backends taking it
    if ns.job_dir is not None:
        use_job_dir(ns, distributed["torchrun_args"])
    to_stdout = outputs.to_stdout(ns.output)
    if ns.output is not None and not to_stdout:
        rundir.check_writable(ns.output)
    if isinstance(ns.html, str) and ns.html:
        rundir.check_writable(Path(ns.html))
    _refuse_collisions(ns, workload)
    if ns.dry_run:
        for line in describe_plan(workload, selected, ns.repeat, ns.warmup, ns.nproc_per_node,
                                  backend_options(ns, selected),
                                  answer_first=bool(ns.quick) and not ns.nproc_per_node):
            print(line)
        return EXIT_OK
    if ns.out_dir is not None:
        run_dir = rundir.use_out_dir(ns.out_dir)
    else:
        run_dir = rundir.new_run_dir(DEFAULT_RUNS_DIR)
    # -o -: the report's JSON goes to standard output, and its file stays in the run folder.
    report_path: Path = ns.output if ns.output is not None and not to_stdout \
        else run_dir / REPORT_FILE
    err = Console(stderr=True, highlight=False)
    progress = TerminalProgress(err) if err.is_terminal else PlainProgress()
    options = RunOptions(repeat=ns.repeat, warmup=ns.warmup, timeout_s=ns.timeout,
                         kill_grace_s=ns.kill_grace, collect_timeout_s=ns.collect_timeout,
                         backend_options=backend_options(ns, selected),
                         steps=step_window(ns), keep_going=ns.keep_going,
                         answer_first=bool(ns.quick) and not distributed, **distributed)
    session = Session(workload, selected, plugins, run_dir, report_path.parent.resolve(),
                      options, progress, plugin_failures=failures if ns.plugins is None else [])
    report = session.execute()
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
    print(f"report: {report_path}  (artifacts: {run_dir})", file=sys.stderr)
    if ns.html is not None:
        html_path = (report_path.with_suffix(".html") if ns.html in (True, "")
                     else Path(ns.html))
        _write_html(plugins, report, report_path, html_path, ns.top, ns.depth)
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
