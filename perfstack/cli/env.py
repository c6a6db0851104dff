"""``perfstack env``: what this machine is and what perfstack can measure on it."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from perfstack import errors
from perfstack.cli.common import EXIT_OK, Parser
from perfstack.plugin.manager import Plugins


def cmd_env(plugins: Plugins, argv: list[str]) -> int:
    """Print the platform check: CPU, ISA, torch build, threads, ceilings, profilers, noise
    advice."""
    from perfstack.cli.show import output_width
    from perfstack.machine import envinfo
    from perfstack.report.files import write_text_atomic

    parser = Parser(prog="perfstack env", description="Describe this machine: CPU and ISA, "
                    "torch build and threads, profilers and their access, GPUs, free-threaded "
                    "interpreters, and pyperf's system checks with advice on reducing noise.")
    parser.add_argument("--json", action="store_true", help="print JSON instead of text")
    parser.add_argument("-o", "--output", type=Path, metavar="FILE",
                        help="write to FILE instead of stdout")
    parser.add_argument("--no-torch", action="store_true",
                        help="do not import torch (its build configuration is left out)")
    parser.add_argument("--no-system", action="store_true",
                        help="skip pyperf's system-state checks")
    parser.add_argument("--measure-ceilings", action="store_true",
                        help="measure this machine's peak FLOP/s and memory bandwidth again "
                        "(a few seconds; nothing else should run meanwhile) and cache them")
    args = parser.parse_args(argv)
    env = envinfo.gather(plugins, with_torch=not args.no_torch, with_system=not args.no_system,
                         measure_ceilings=args.measure_ceilings)
    text = (json.dumps(env, indent=2, default=str) + "\n") if args.json else \
        envinfo.render_text(env, output_width() if args.output is None else 100)
    if args.output is None:
        sys.stdout.write(text)
        return EXIT_OK
    try:
        write_text_atomic(args.output, text)
    except OSError as exc:
        raise errors.OutputError(f"cannot write {args.output}: {exc.strerror or exc}") from None
    print(f"wrote {args.output}", file=sys.stderr)
    return EXIT_OK
