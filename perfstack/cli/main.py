"""The ``perfstack`` command line: the top parser, the plugin flags, the dispatch to each
command's module, and what an error becomes (one line and its exit code,
``perfstack.cli.common``'s table, also in the README)."""

from __future__ import annotations

import argparse
import contextlib
import errno
import gc
import importlib
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
from perfstack.records import datarecord
from perfstack.report import files as reportfile

#: Commands that read reports or traces and run nothing.
READING = ("show", "diff", "validate", "analyze", "merge")


@datarecord(frozen=True)
class Command:
    """One ``perfstack`` command: where its function is (``module:function``, imported only
    when it is the one run), what the top help says of it, and whether it takes the loaded
    plugins as its first argument."""

    target: str
    said: str
    plugins: bool = True


#: Every command, in the order the help lists them: a new command is one entry here.
COMMANDS: dict[str, Command] = {
    "run": Command("perfstack.cli.run:cmd_run", "profile a workload"),
    "ab": Command("perfstack.cli.ab:cmd_ab", "compare two versions of it, runs interleaved"),
    "sweep": Command("perfstack.cli.sweep:cmd_sweep", "run it per setting of environment "
                     "variables (thread counts)"),
    "attach": Command("perfstack.cli.attach:cmd_attach", "measure a running process for a "
                      "while"),
    "capture": Command("perfstack.cli.capture:cmd_capture", "record N steps of a job run "
                       "--on-demand"),
    "analyze": Command("perfstack.cli.analyze:cmd_analyze", "a report from profiles recorded "
                       "elsewhere (traces of a cluster job)"),
    "merge": Command("perfstack.cli.analyze:cmd_merge", "join the nodes' reports of one job"),
    "show": Command("perfstack.cli.show:cmd_show", "print a report"),
    "diff": Command("perfstack.cli.diff:cmd_diff", "compare two reports"),
    # reads files against the schema: no plugin takes part
    "validate": Command("perfstack.cli.show:cmd_validate", "check report files", False),
    "plugins": Command("perfstack.cli.show:cmd_plugins", "list the backends and their "
                       "availability"),
    "env": Command("perfstack.cli.env:cmd_env", "describe this machine"),
    # the history is read and written with no plugin taking part
    "history": Command("perfstack.cli.history:cmd_history", "the runs remembered, and a "
                       "figure's series", False),
    "trend": Command("perfstack.cli.trend:cmd_trend", "change points over the history, by "
                     "layer", False),
    "gate": Command("perfstack.cli.trend:cmd_gate", "judge the newest run against its "
                    "history (for CI)", False),
}


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
    parser.add_argument("command", nargs="?", choices=list(COMMANDS),
                        help="; ".join(f"{name}: {c.said}" for name, c in COMMANDS.items()))
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
    command = COMMANDS[top.command]
    module, function = command.target.split(":")
    handler = getattr(importlib.import_module(module), function)
    if not command.plugins:
        return int(handler(top.rest))
    from perfstack.plugin.load import load_plugins

    # Reading a report loads the plugins it needs, when the plugin cache says which.
    plugins = load_plugins(disabled=disabled, modules=modules,
                           defer=top.command in ("show", "diff"))
    return int(handler(plugins, top.rest))
