"""The command line of a profiling session: ``perfstack run``'s parser, and the options
``run``, ``ab`` and ``sweep`` share (backends, repeats, time limits, steps, and every
backend's own options, checked as the backend declares them)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from perfstack import errors
from perfstack.cli.common import DEFAULT_RUNS_DIR, Parser
from perfstack.cli.show import add_view_options
from perfstack.plugin.backend import Option, StepWindow
from perfstack.plugin.manager import BackendEntry
from perfstack.report import Layer


def whole_number(minimum: int) -> Any:
    """An argparse type: a whole number of at least ``minimum``."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}, got {value}")
        return value

    return parse


def seconds(text: str) -> float:
    """The argparse type of a time in seconds: a positive, finite number."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds, got {text}")
    return value


def _checked(opt: Option) -> Any:
    """The argparse type of a backend option: converted and checked as the option says."""
    def parse(text: str) -> Any:
        try:
            return opt.parse(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    parse.__name__ = opt.name  # argparse names the type in some messages
    return parse


def step_window(ns: argparse.Namespace) -> StepWindow | None:
    """The --steps window, or None; --warmup-steps alone is a usage error."""
    if ns.steps is None:
        if ns.warmup_steps is not None:
            raise errors.UsageError("--warmup-steps needs --steps N")
        return None
    return StepWindow(2 if ns.warmup_steps is None else ns.warmup_steps, ns.steps)


def option_dest(backend: str, name: str) -> str:
    """The argparse destination of backend ``backend``'s option ``name``."""
    return f"backend_opt::{backend}::{name}"


def add_session_options(parser: Parser, backends: dict[str, BackendEntry]) -> None:
    """Add the options of a profiling session (shared by run and ab): backends, repeats,
    time limits and every backend's own options."""
    parser.add_argument("--plugins", metavar="A,B",
                        help="backends to run (default: every one available here, except "
                        "opt-in analyses; with it, those that cost no run ride along unless "
                        "refused with -NAME); "
                        f"installed: {', '.join(sorted(backends)) or 'none'}")
    parser.add_argument("--repeat", type=whole_number(0), default=3, metavar="N",
                        help="baseline runs, for overheads and noise (default: 3; 0: none, a "
                        "quick look whose unprofiled time and overheads are unknown)")
    parser.add_argument("--warmup", type=whole_number(0), default=1, metavar="N",
                        help="unmeasured runs first, to warm caches (default: 1)")
    parser.add_argument("--timeout", type=seconds, metavar="S",
                        help="stop any single run after S seconds (default: no limit)")
    parser.add_argument("--kill-grace", type=seconds, default=5.0, metavar="S",
                        help="after a timeout, seconds between SIGTERM and SIGKILL (default: 5)")
    parser.add_argument("--steps", type=whole_number(1), metavar="N",
                        help="end every run (baseline and backends) cleanly after --warmup-steps "
                        "+ N steps (perfstack.step() or optimizer steps); the backends "
                        "measure these N: a long training job costs its steps, not its length")
    parser.add_argument("--warmup-steps", type=whole_number(0), default=None, metavar="K",
                        help="with --steps, steps to run before the measured ones (default: 2)")
    parser.add_argument("--keep-going", action="store_true",
                        help="run every backend even when the workload failed without a "
                        "profiler (by default they are skipped: they would profile the failure)")
    parser.add_argument("--collect-timeout", type=seconds, default=600.0, metavar="S",
                        help="a backend whose collect step takes longer fails, and the others "
                        "go on (default: 600)")
    add_backend_options(parser, backends)


def add_backend_options(parser: Parser, backends: dict[str, BackendEntry]) -> None:
    """Each backend's own options, as ``--<backend>-<option>`` flags in a group a backend."""
    for name, entry in sorted(backends.items()):
        if not entry.backend.options:
            continue
        group = parser.add_argument_group(f"{name} backend options")
        for opt in entry.backend.options:
            flag = f"--{name}-{opt.name.replace('_', '-')}"
            dest = option_dest(name, opt.name)
            if opt.flag:
                group.add_argument(flag, dest=dest, action="store_true",
                                   help=opt.help.replace("%", "%%"))
            else:
                shown = "" if opt.default is None else f" (default: {opt.default})"
                metavar = ("|".join(str(c) for c in opt.choices) if opt.choices
                           else opt.name.upper())
                group.add_argument(flag, dest=dest, type=_checked(opt), default=opt.default,
                                   choices=opt.choices, metavar=metavar,
                                   help=opt.help.replace("%", "%%") + shown)


def build_parser(backends: dict[str, BackendEntry]) -> Parser:
    """Return the parser of ``perfstack run``, with every backend's own options."""
    # The example names two installed backends that run by default (none installed: a
    # placeholder), so it is true of this installation: one that costs no run of its own,
    # then one that sees Python, as a first look would want.
    shown = [n for n, e in sorted(backends.items(), key=lambda kv: (
        kv[1].backend.own_run, Layer.PYTHON not in kv[1].backend.layers, kv[0]))
        if not e.backend.opt_in][:2] or ["NAME"]
    parser = Parser(
        prog="perfstack run",
        description="Run the workload once with no profiler (the baseline, --repeat times) and "
        "once per backend, then write one layered report. Workload arguments go after --.",
        epilog=f"example: perfstack run --plugins {','.join(shown)} workloads/tiny_mlp.py -- "
        "--num-batches 50",
    )
    parser.add_argument("script", nargs="?", help="the workload script")
    parser.add_argument("-m", dest="module", metavar="MODULE", help="run a module, as python -m")
    dist = parser.add_argument_group("distributed (torchrun)")
    dist.add_argument("--nproc-per-node", type=whole_number(1), metavar="N",
                      help="launch the workload through torchrun (torch.distributed.run) with N "
                      "processes; each rank gets its own folder and report rows")
    dist.add_argument("--ranks", default="0", metavar="0|all|0,3",
                      help="ranks the per-rank backends profile (default: 0); also the "
                      "--NAME-ranks option of a backend that has one, unless that is given")
    dist.add_argument("--torchrun-args", default="", metavar="'ARGS'",
                      help="more torchrun options, e.g. '--nnodes 2 --node-rank 0 "
                      "--master-addr host0' (default: --standalone; under SLURM with several "
                      "nodes, its nodes, this node and the first host's static rendezvous)")
    dist.add_argument("--job-dir", type=Path, metavar="DIR",
                      help="a multi-node job's folder on a shared file system: this node "
                      "writes DIR/nodeN/report.json and its run folder DIR/nodeN/run (N from "
                      "--node-rank or SLURM); then 'perfstack merge DIR'")
    parser.add_argument("-o", "--output", type=Path, metavar="FILE",
                        help="report path (default: report.json in the run folder; .gz compresses; "
                        "-: also print the report's JSON on standard output instead of the text)")
    parser.add_argument("--out-dir", type=Path, metavar="DIR",
                        help=f"run folder for artifacts (default: {DEFAULT_RUNS_DIR}/<timestamp>)")
    parser.add_argument("-q", "--quiet", action="store_true",
                        help="do not print the report at the end")
    parser.add_argument("--html", nargs="?", const=True, default=None, metavar="FILE",
                        help="also write the HTML report (default: report.html beside the "
                             "report)")
    parser.add_argument("--quick", action="store_true",
                        help="a first answer after one run of the workload: the quick backends "
                        "(a sampler, and those reading the baseline) instead of --plugins, "
                        "the sampler's run first and its answer said at once, then one "
                        "baseline run and no warm-up")
    parser.add_argument("--on-demand", action="store_true",
                        help="run the workload once, recording nothing, with the named "
                        "backends that can record on demand (--plugins; default: every one) "
                        "armed inside it: 'perfstack capture' then records N steps of it as "
                        "often as asked while it runs (steps: perfstack.step() or optimizer "
                        "steps)")
    parser.add_argument("--baseline-first", action="store_true",
                        help="make the warm-up and baseline runs before every backend's (by "
                        "default the sampler runs first, so that its answer comes after one "
                        "run of the workload)")
    parser.add_argument("--dry-run", action="store_true",
                        help="check the arguments and say which runs would be made and which "
                        "backends can run here; run nothing, write nothing")
    add_view_options(parser)
    add_session_options(parser, backends)
    return parser
