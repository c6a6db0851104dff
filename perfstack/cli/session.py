"""The session a command line asks for, built once for ``run``, ``sweep`` and ``ab``: the
workload and its arguments, the backends chosen and their options, the torchrun options, the
run folder, the options of each run and the progress lines; then as many sessions as the
command makes (one, one per setting, one per side)."""

from __future__ import annotations

import argparse
import importlib.machinery
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from perfstack import errors
from perfstack.cli.common import DEFAULT_RUNS_DIR
from perfstack.cli.runargs import option_dest, step_window
from perfstack.plugin.backend import Workload, availability
from perfstack.plugin.manager import BackendEntry, HookResult, Plugins
from perfstack.records import datarecord, field
from perfstack.run import nodes
from perfstack.run.phases import answers_first
from perfstack.runfolder import ranks

if TYPE_CHECKING:
    from rich.console import Console

    from perfstack.run.driver import Session
    from perfstack.run.options import RunOptions


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
        early = answer_first and available.ok and answers_first(entry)
        (first if early else rest).append(
            line + (", first: the answer comes after it" if early else ""))
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


def select_backends(ns: argparse.Namespace,
                    backends: dict[str, BackendEntry]) -> list[BackendEntry]:
    """Return the backends --plugins names (default: every one that is not opt-in, the quick
    ones first, so that the answer comes as soon as a sampler is in)."""
    if ns.plugins is None:
        order = sorted(backends, key=lambda name: (not backends[name].backend.quick, name))
        return [backends[name] for name in order if not backends[name].backend.opt_in]
    words = [n.strip() for n in ns.plugins.split(",") if n.strip()]
    refused = {w[1:] for w in words if w.startswith("-")}
    names = [w for w in words if not w.startswith("-")]
    if not names:
        raise errors.UsageError("--plugins needs at least one backend name")
    for name in [*names, *refused]:
        if name not in backends:
            raise errors.UnknownPlugin(name, sorted(backends))
    chosen = [backends[name] for name in dict.fromkeys(names) if name not in refused]
    # A backend that costs nothing and reads the baseline runs rides along, unless refused.
    chosen += [e for name, e in sorted(backends.items()) if e.backend.rides
               and not e.backend.own_run and name not in names and name not in refused]
    return chosen


def riding(ns: argparse.Namespace, entry: BackendEntry) -> bool:
    """Whether a selected backend rides along: --plugins was given and did not name it."""
    if ns.plugins is None or not entry.backend.rides:
        return False
    return entry.backend.name not in {n.strip() for n in ns.plugins.split(",")}


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


@datarecord
class Prepared:
    """What one command line asks of its sessions: the backends chosen, their options, the
    torchrun options; each session is then made with :meth:`session`."""

    plugins: Plugins
    ns: argparse.Namespace
    backends: dict[str, BackendEntry]
    #: plugins whose backends could not be listed (said in the report of a default choice)
    failures: list[HookResult]
    selected: list[BackendEntry]
    distributed: dict[str, Any] = field(default_factory=dict)
    _err: Console | None = None

    @property
    def err(self) -> Console:
        """The console of the progress lines (standard error)."""
        if self._err is None:
            from rich.console import Console

            self._err = Console(stderr=True, highlight=False)
        return self._err

    def options(self, answer_first: bool = False) -> RunOptions:
        """The options of every run of a session."""
        from perfstack.run.options import RunOptions

        ns = self.ns
        return RunOptions(repeat=ns.repeat, warmup=ns.warmup, timeout_s=ns.timeout,
                          kill_grace_s=ns.kill_grace, collect_timeout_s=ns.collect_timeout,
                          backend_options=backend_options(ns, self.selected),
                          steps=step_window(ns), keep_going=ns.keep_going,
                          answer_first=answer_first,
                          riding=frozenset(e.backend.name for e in self.selected
                                           if riding(ns, e)), **self.distributed)

    def plan(self, workload: Workload, answer_first: bool = False) -> list[str]:
        """The runs one session would make (``--dry-run``)."""
        return describe_plan(workload, self.selected, self.ns.repeat, self.ns.warmup,
                             getattr(self.ns, "nproc_per_node", None),
                             backend_options(self.ns, self.selected), answer_first=answer_first)

    def run_folder(self) -> Path:
        """The session's run folder: --out-dir, taken, or a new one under the runs folder."""
        from perfstack.runfolder import rundir

        return (rundir.use_out_dir(self.ns.out_dir) if self.ns.out_dir is not None
                else rundir.new_run_dir(DEFAULT_RUNS_DIR))

    def session(self, workload: Workload, folder: Path, report_dir: Path, *,
                side: str = "", cwd: str | None = None,
                answer_first: bool = False) -> Session:
        """A session of the workload writing into ``folder`` (its report in ``report_dir``);
        ``side`` labels its progress lines when two sessions' runs interleave (ab)."""
        from perfstack.cli.progress import PlainProgress, TerminalProgress, stderr_is_terminal
        from perfstack.run.driver import Session

        progress = (TerminalProgress(self.err, side) if stderr_is_terminal()
                    else PlainProgress(side=side))
        return Session(workload, self.selected, self.plugins, folder, report_dir,
                       self.options(answer_first), progress,
                       plugin_failures=self.failures if self.ns.plugins is None else [],
                       cwd=cwd)


def prepare(plugins: Plugins, ns: argparse.Namespace, own: list[str],
            command: str) -> Prepared:
    """Check a parsed command line of ``command`` (run, sweep, ab) and choose its backends;
    a bad one is a UsageError (or UnknownPlugin) before anything runs."""
    require_baseline(ns, command)
    backends, failures = plugins.backends()
    selected = select_backends(ns, backends) if command != "sweep" or ns.plugins else []
    distributed = (distributed_options(ns, own, backends)
                   if hasattr(ns, "nproc_per_node") else {})
    return Prepared(plugins, ns, backends, failures, selected, distributed)
