"""Timing helpers for the benchmarks: commands timed as users run them (the installed
``perfstack`` script), side by side round by round, each round's order reversed from the last
(so that drift and the machine's warm-up hit every command alike), and each command's ratio
to a reference taken within a round, then summarised as min, median and max."""

from __future__ import annotations

import argparse
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path


def perfstack_command() -> str:
    """The installed ``perfstack`` script beside this interpreter, as users call it (not
    ``python -m perfstack``); exits with a message when it is not installed."""
    script = Path(sys.executable).with_name("perfstack")
    if not script.is_file():
        raise SystemExit(f"{script}: no installed perfstack script (run scripts/install.sh)")
    return str(script)


def checkout_env(checkout: Path, links: Path) -> dict[str, str]:
    """The environment that runs another checkout's perfstack and its plugins through the
    installed script: the checkout first on PYTHONPATH, then ``links``, a folder made here in
    which ``perfstack_plugins`` names the checkout's ``plugins`` (the installed package maps
    that name to this checkout's: without it, the other core runs with these plugins)."""
    link = links / "perfstack_plugins"
    if not link.is_symlink():
        link.symlink_to(checkout.resolve() / "plugins", target_is_directory=True)
    return {**os.environ, "PYTHONPATH": f"{checkout.resolve()}{os.pathsep}{links}"}


#: The README's own command, the workload benches time by default.
README_WORKLOAD = "workloads/tiny_mlp.py"


def add_workload(parser: argparse.ArgumentParser) -> None:
    """The ``--workload`` option: a script of the repository and its arguments."""
    parser.add_argument("--workload", default=README_WORKLOAD,
                        help="the script and its arguments (default: the README's command)")


def workload_of(ns: argparse.Namespace) -> tuple[str, list[str]]:
    """The ``--workload`` given: the script's absolute path and its arguments."""
    script, *args = shlex.split(ns.workload)
    root = Path(__file__).resolve().parent.parent
    return str((root / script).resolve()), args


def time_commands(
    commands: dict[str, Sequence[str]], rounds: int, cwd: Path,
    ok: Sequence[int] = (0,),
) -> dict[str, list[float]]:
    """Run each command once per round, the order reversed every other round; return each
    command's wall times, round by round (exit codes other than ``ok`` stop the bench)."""
    times: dict[str, list[float]] = {name: [] for name in commands}
    names = list(commands)
    for n in range(rounds):
        for name in names if n % 2 == 0 else reversed(names):
            start = time.perf_counter()
            proc = subprocess.run(list(commands[name]), cwd=cwd, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.PIPE, text=True)
            times[name].append(time.perf_counter() - start)
            if proc.returncode not in ok:
                raise SystemExit(f"{name} exited {proc.returncode}: "
                                 f"{proc.stderr.strip()[-300:]}")
    return times


def spread(values: Sequence[float], fmt: str = ".2f", unit: str = "x") -> str:
    """``values`` (ratios taken within each round) as "min / median / max"."""
    return " / ".join(f"{v:{fmt}}{unit}" for v in (min(values), statistics.median(values),
                                                    max(values)))


def ratios(times: dict[str, list[float]], reference: str) -> dict[str, list[float]]:
    """Each command's time over the reference's, round by round."""
    return {name: [v / r for v, r in zip(values, times[reference], strict=True)]
            for name, values in times.items()}


def print_table(times: dict[str, list[float]], reference: str) -> None:
    """Print each command's median time with its min and max, and its ratio to the reference
    (per round: min, median, max)."""
    per_round = ratios(times, reference)
    print(f"rounds: {len(times[reference])}; ratio to {reference}, taken within each round")
    print(f"{'command':<36} {'median':>9} {'min':>9} {'max':>9}   "
          f"{'ratio min':>9} {'median':>7} {'max':>7}")
    for name, values in times.items():
        r = per_round[name]
        print(f"{name:<36} {statistics.median(values) * 1e3:7.1f}ms "
              f"{min(values) * 1e3:7.1f}ms {max(values) * 1e3:7.1f}ms   "
              f"{min(r):8.2f}x {statistics.median(r):6.2f}x {max(r):6.2f}x")


def step_figure(report: Path) -> tuple[str, float]:
    """The baseline's ``step_time`` in a report (else its ``wall_time``): its name and value."""
    import json

    metrics = {m["name"]: m for m in json.loads(report.read_text("utf-8"))["metrics"]
               if m.get("source") == "baseline"}
    name = "step_time" if "step_time" in metrics else "wall_time"
    return name, float(metrics[name]["value"])


def two_ways(rounds: int, measure: Callable[[bool], float]) -> tuple[list[float], list[float]]:
    """``measure(True)`` and ``measure(False)`` once a round, the order reversed every other
    round; each way's values, round by round."""
    first: list[float] = []
    second: list[float] = []
    for r in range(rounds):
        for which in ((True, False) if r % 2 == 0 else (False, True)):
            (first if which else second).append(measure(which))
    return first, second


def side_by_side(doc: str, figure: Callable[[str, list[str], Path, bool], tuple[str, float]],
                 ) -> tuple[str, str, int, list[float], list[float], list[float]]:
    """A bench of two ways side by side on ``--workload`` for ``--rounds`` rounds (its
    arguments parsed with ``doc``'s first line): ``figure(workload, args, folder, way)``
    measures one way once and names its figure. Returns the workload's file name, the
    figure's name, the rounds, each way's values and their ratio within each round."""
    p = argparse.ArgumentParser(description=doc.splitlines()[0])
    p.add_argument("--rounds", type=int, default=6)
    add_workload(p)
    ns = p.parse_args()
    workload, args = workload_of(ns)
    named: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        def measure(way: bool) -> float:
            name, value = figure(workload, args, Path(tmp), way)
            named.append(name)
            return value

        first, second = two_ways(ns.rounds, measure)
    ratios = [a / b for a, b in zip(first, second, strict=True)]
    return Path(workload).name, named[0], ns.rounds, first, second, ratios
