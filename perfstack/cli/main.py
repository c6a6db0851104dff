"""The ``perfstack`` command line: the top parser, the plugin flags, the dispatch to each
command's module, and what an error becomes (one line and its exit code,
``perfstack.cli.common``'s table, also in the README)."""

from __future__ import annotations

import argparse
import contextlib
import errno
import gc
import os
import sys
from collections.abc import Sequence

import perfstack
from perfstack import errors, signals
from perfstack.cli.common import (
    EXIT_CODES,
    EXIT_INTERNAL,
    EXIT_OK,
    EXIT_OUTPUT,
    EXIT_USAGE,
    Parser,
)
from perfstack.report import files as reportfile

#: Commands that read reports or traces and run nothing.
READING = ("show", "diff", "validate", "analyze", "merge")


def _top_parser() -> Parser:
    parser = Parser(
        prog="perfstack",
        description="Run a Python or PyTorch workload under every profiler that matters "
        "and get one layered report: Python → framework → kernel → hardware.",
    )
    parser.add_argument("--version", action="version", version=f"perfstack {perfstack.__version__}")
    parser.add_argument("-p", dest="plugin_flags", action="append", default=[],
                        metavar="MODULE|no:NAME",
                        help="load the plugin module MODULE, or disable the plugin NAME with "
                        "no:NAME (repeatable), as pytest's -p")
    commands = ["run", "ab", "sweep", "attach", "capture", "analyze", "merge", "show", "diff",
                "validate", "plugins", "env", "history", "trend", "gate"]
    parser.add_argument("command", nargs="?", choices=commands,
                        help="run: profile a workload; ab: compare two versions of it, runs "
                        "interleaved; sweep: run it per setting of "
                        "environment variables (thread counts); attach: measure a running "
                        "process for a while; capture: record N steps of a job run "
                        "--on-demand; analyze: a report from "
                        "profiles recorded elsewhere (traces of a cluster job); merge: join "
                        "the nodes' reports of one job; show: print a report; "
                        "diff: compare two reports; validate: check report files; plugins: "
                        "list the backends and their availability; env: describe this "
                        "machine; history: the runs remembered, and a figure's series; trend: "
                        "change points over the history, by layer; gate: judge the newest "
                        "run against its history (for CI)")
    parser.add_argument("rest", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    return parser


def _plugin_flags(flags: Sequence[str]) -> tuple[list[str], list[str]]:
    """Split -p values into (modules to load, names to disable)."""
    load, disable = [], []
    for flag in flags:
        if flag.startswith("no:") and flag[3:].strip():
            disable.append(flag[3:].strip())
        elif all(part.isidentifier() for part in flag.split(".")):
            load.append(flag)
        else:
            raise errors.UsageError(f"-p takes MODULE or no:NAME, got {flag!r}")
    return load, disable


def console() -> None:
    """The ``perfstack`` command (and ``python -m perfstack``): ``main()``, then exit with its
    code, a late Ctrl-C unable to change it (``signals.exit_with``)."""
    signals.exit_with(main)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the perfstack command line; return its exit code."""
    args = list(sys.argv[1:] if argv is None else argv)
    signals.install()  # SIGTERM and SIGHUP stop a session as Ctrl-C does
    if signals.pending() is not None:  # came while the command was still being imported
        print("perfstack: interrupted before it began: nothing was run", file=sys.stderr)
        return signals.exit_code()
    reportfile.stop_waiting = lambda: signals.pending() is not None
    try:
        code = _dispatch(args)
        sys.stdout.flush()  # a full disk shows here, while it can still be reported
        return code
    except errors.PerfstackError as exc:
        if signals.pending() is not None:  # it ended a wait a signal cut short: the signal
            print(f"perfstack: interrupted ({exc})", file=sys.stderr)
            return signals.exit_code()
        print(f"perfstack: error: {exc}", file=sys.stderr)
        return EXIT_CODES.get(type(exc), EXIT_USAGE)
    except KeyboardInterrupt:
        signals.note_interrupt()
        print("perfstack: interrupted", file=sys.stderr)
        return signals.exit_code()
    except BrokenPipeError:
        # `perfstack show | head`: the reader went away; that is not our error.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_OK
    except OSError as exc:
        if exc.errno not in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO):
            return _internal_error(exc)
        with contextlib.suppress(OSError):  # nothing more can go to that output
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        print(f"perfstack: error: cannot write the output: {exc.strerror}", file=sys.stderr)
        return EXIT_OUTPUT
    except Exception as exc:
        return _internal_error(exc)


def _internal_error(exc: BaseException) -> int:
    """A bug of ours: one line, the traceback saved to a file for the report."""
    import tempfile
    import traceback

    fd, path = tempfile.mkstemp(prefix="perfstack-crash-", suffix=".txt")
    with os.fdopen(fd, "w") as fh:
        fh.write(traceback.format_exc())
    print(f"perfstack: internal error: {type(exc).__name__}: {exc} "
          f"(traceback saved to {path}; please report it)", file=sys.stderr)
    return EXIT_INTERNAL


def _dispatch(argv: list[str]) -> int:
    top = _top_parser().parse_args(argv)
    if top.command is None:
        _top_parser().print_help()
        return EXIT_OK
    modules, disabled = _plugin_flags(top.plugin_flags)
    if top.command in READING:
        # A short process that builds a large acyclic tree of objects from a report: the
        # cyclic collector would walk it again and again as it grows (2.5x the time of a
        # 20,000-row load), and finds nothing to free. Reference counting still frees memory.
        gc.disable()
    if top.command == "history":  # reads and writes the history: no plugin takes part
        from perfstack.cli.history import cmd_history

        return cmd_history(top.rest)
    if top.command in ("trend", "gate"):
        from perfstack.cli import trend

        return (trend.cmd_trend if top.command == "trend" else trend.cmd_gate)(top.rest)
    if top.command == "validate":  # reads files against the schema: no plugin takes part
        from perfstack.cli.show import cmd_validate

        return cmd_validate(None, top.rest)
    from perfstack.pluginload import load_plugins

    # Reading a report loads the plugins it needs, when the plugin cache says which.
    plugins = load_plugins(disabled=disabled, modules=modules,
                           defer=top.command in ("show", "diff"))
    if top.command == "run":
        from perfstack.cli.run import cmd_run

        return cmd_run(plugins, top.rest)
    if top.command == "ab":
        from perfstack.cli.ab import cmd_ab

        return cmd_ab(plugins, top.rest)
    if top.command == "sweep":
        from perfstack.cli.sweep import cmd_sweep

        return cmd_sweep(plugins, top.rest)
    if top.command == "attach":
        from perfstack.cli.attach import cmd_attach

        return cmd_attach(plugins, top.rest)
    if top.command == "capture":
        from perfstack.cli.capture import cmd_capture

        return cmd_capture(plugins, top.rest)
    if top.command == "diff":
        from perfstack.cli.diff import cmd_diff

        return cmd_diff(plugins, top.rest)
    if top.command in ("analyze", "merge"):
        from perfstack.cli import analyze

        return (analyze.cmd_analyze if top.command == "analyze" else analyze.cmd_merge)(
            plugins, top.rest)
    if top.command == "env":
        from perfstack.cli.env import cmd_env

        return cmd_env(plugins, top.rest)
    from perfstack.cli import show

    handler = {"show": show.cmd_show, "validate": show.cmd_validate,
               "plugins": show.cmd_plugins}[top.command]
    return handler(plugins, top.rest)
