"""Shared test helpers: run the real CLI in a subprocess, and validate every report it writes."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from perfstack.plugin.load import load_plugins
from perfstack.plugin.manager import Plugins
from perfstack.report.files import read_json, schema_errors
from tests import lanes
from tests.shared import made_once, make_scheduler, temp_factory

# pytest keeps each test module's rewritten asserts in __pycache__ only where Python may write
# bytecode: with PYTHONDONTWRITEBYTECODE set (as on these machines) every run rewrote all of them
# again, 2.5 s of each run's collection. The caches are git-ignored.
sys.dont_write_bytecode = False

ROOT = Path(__file__).resolve().parent.parent
WORKLOADS = ROOT / "tests" / "workloads"

#: How many more modules pytest's process may import (as tests read reports and traces in
#: it) before its heap is frozen again.
REFREEZE_AFTER_MODULES = 150
_frozen_with_modules = 0


def _freeze_heap() -> None:
    """Move every object pytest's process holds now out of the cyclic collector's reach
    (``gc.freeze``): the modules it imported (torch's from collection on, torch._dynamo's
    from the first test that imports it; 886,000 objects at the end of a run) live as long
    as the process, and each full collection walked them all again (37 of them, 14.3 s of
    one run of the suite). What a test makes afterwards is collected as before."""
    import gc

    global _frozen_with_modules
    gc.collect()
    gc.freeze()
    _frozen_with_modules = len(sys.modules)


def pytest_configure(config: pytest.Config) -> None:
    """Under pytest-xdist, each test runs on a CPU of its own (tests/lanes.py)."""
    config.pluginmanager.register(lanes, "perfstack-cpu-lanes")


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """With ``--dist loadscope`` (the suite's own), a module's tests stay together only where
    they share a module-scoped fixture (tests/shared.py)."""
    return make_scheduler(config, log) if config.getvalue("dist") == "loadscope" else None


def pytest_collection_finish(session: pytest.Session) -> None:
    """Freeze the heap once the test modules (and torch) are imported; under xdist, make this
    worker's share of the shared runs the tests ask for."""
    _freeze_heap()
    _make_shared_runs_early(session)


def _make_shared_runs_early(session: pytest.Session) -> None:
    """Make the shared runs of one CPU (``EARLY``) that the collected tests use before the
    first test, each worker its share: made when first asked for, the other worker's test
    that needed one waited for it, idle (16 s of a 310 s run)."""
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if not worker or session.config.option.collectonly:
        return
    used = {name for item in session.items for name in getattr(item, "fixturenames", ())}
    wanted = [name for name in EARLY if name in used]
    count = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    for name in wanted[int(worker.removeprefix("gw")) % count::count]:
        with lanes.one_cpu(session.config), contextlib.suppress(Exception):
            # a failure is the fixture's: its tests say it
            made_once(temp_factory(session.config), *EARLY[name])


def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    """Freeze the heap again after a test that imported many modules."""
    if len(sys.modules) - _frozen_with_modules >= REFREEZE_AFTER_MODULES:
        _freeze_heap()

#: Every process the suite starts inherits this variable (with the session's own value), so a
#: process a test leaves behind is found by its environment, wherever it was reparented.
SESSION_MARK = "PERFSTACK_TEST_SESSION"
#: The system's temporary folder as it was before the suite pointed TMPDIR into pytest's own.
SYSTEM_TMP = tempfile.gettempdir()


def _marked_processes() -> dict[int, str]:
    """Return {pid: command line} of the live processes that carry this session's mark."""
    mark = f"{SESSION_MARK}={os.environ[SESSION_MARK]}".encode()
    found: dict[int, str] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                if mark not in f.read().split(b"\0"):
                    continue
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                found[int(entry)] = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:  # gone, or a zombie
            continue
    return found


#: This machine's ceilings as perfstack measured them on the development VM (2 threads),
#: for every run of the suite (recorded by ``perfstack env --measure-ceilings``).
CEILINGS = ROOT / "tests" / "fixtures" / "ceilings" / "dev-vm-2-threads.json"


#: The suite's environment, set as the session starts (before collection: the shared runs
#: made then are hermetic too) and put back as it ends.
_hermetic = pytest.MonkeyPatch()


def pytest_sessionstart(session: pytest.Session) -> None:
    """Mark the session's processes, and point every temporary file the suite's processes
    make (torch's caches, a browser's profile, a launcher's logs) into pytest's own folders:
    nothing is left in the system's temporary folder. Runs measure ops against the machine
    ceilings recorded on the development VM (``CEILINGS``), so that no test measures the
    machine it runs on (tests/test_roofline.py runs the probe itself)."""
    if session.config.pluginmanager.has_plugin("dsession"):
        return  # pytest-xdist's controller: it runs no test, and its workers inherit its env
    _hermetic.setenv("PERFSTACK_CEILINGS", str(CEILINGS))
    _hermetic.setenv("TMPDIR", str(temp_factory(session.config).mktemp("system-tmp")))
    _hermetic.setenv(SESSION_MARK, uuid.uuid4().hex)
    # Text is laid out for the width a test asks for, else perfstack's default: not the
    # terminal pytest runs in (pytest-xdist's workers are given COLUMNS=80).
    _hermetic.delenv("COLUMNS", raising=False)
    _hermetic.delenv("LINES", raising=False)
    _hermetic.setattr(tempfile, "tempdir", None)  # re-read TMPDIR


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Put the environment back."""
    _hermetic.undo()


@pytest.fixture(autouse=True)
def _no_process_left() -> Iterator[None]:
    """Fail the test that leaves a process running (after a grace for exits under way), and
    end what it left."""
    before = set(_marked_processes())
    yield
    deadline = time.monotonic() + 5
    while (left := {p: c for p, c in _marked_processes().items() if p not in before}) \
            and time.monotonic() < deadline:
        time.sleep(0.1)
    for pid in left:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    assert not left, f"the test left processes running: {left}"


@dataclass
class Result:
    """A finished perfstack command."""

    code: int
    stdout: str
    stderr: str
    cwd: Path

    def report(self, path: str | Path | None = None) -> dict[str, Any]:
        """Return the report it wrote (default: the latest run's), checked against the schema."""
        target = Path(path) if path else self.cwd / ".perfstack/runs/latest/report.json"
        if not target.is_absolute():
            target = self.cwd / target
        data: dict[str, Any] = read_json(target)
        assert schema_errors(data) == [], schema_errors(data)
        return data


def perfstack_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """Return the environment for a perfstack subprocess: test plugins importable."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), **(extra or {})}
    env.pop("PERFSTACK_PLUGINS", None)
    return env


def ctrl_c_reaches() -> None:
    """``preexec_fn`` for a child the test will Ctrl-C: SIGINT at its default, as in a
    terminal's foreground job. A suite started in the background of a shell script (``cmd &``)
    inherits SIGINT ignored, and Python keeps an ignored SIGINT ignored: the child would never
    see the test's Ctrl-C."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)


#: Commands that read files and start no process: the tests call perfstack's command line in
#: the test's own interpreter (its exit code, stdout and stderr exactly as ``main`` gives them
#: to ``python -m perfstack``), saving an interpreter's start and perfstack's imports per call
#: (about 0.1 s, over some two hundred calls; 0.7 s for ``trend`` and ``gate``, whose change
#: point search imports scipy.stats). ``trend`` and ``gate`` search the series in the calling
#: process below ``history.trend.PARALLEL_FROM`` values, and the tests' histories are far
#: below it (the pool of workers is tested in a process of its own). Set
#: PERFSTACK_TESTS_SUBPROCESS=1 to run every command in a process of its own. Commands that
#: start runs, pools of workers or browsers, and ``-p`` plugin flags, always get a process.
IN_PROCESS = frozenset({"show", "validate", "diff", "merge", "history", "analyze", "trend",
                        "gate"})


def _in_process(folder: Path, args: tuple[str, ...], env: dict[str, str] | None) -> Result:
    """``perfstack ARGS`` run by ``perfstack.cli.main`` here, in ``folder``, with ``env`` set
    for the call; everything the command line changes in the process (the folder, the
    environment, signal handlers, the cyclic collector, the interruption record) put back."""
    import gc
    import io
    import signal

    from perfstack import signals
    from perfstack.cli.main import main

    out = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="surrogateescape")
    err = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="surrogateescape")
    saved_env = dict(os.environ)
    saved_cwd = os.getcwd()
    saved_signals = {sig: signal.getsignal(sig)
                     for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    collecting = gc.isenabled()
    os.environ.update(env or {})
    os.environ.pop("PERFSTACK_PLUGINS", None)
    os.chdir(folder)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(list(args))
            except SystemExit as exc:  # argparse's --help and the like
                code = exc.code if isinstance(exc.code, int) else 0 if exc.code is None else 1
    finally:
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)
        for sig, handler in saved_signals.items():
            signal.signal(sig, handler)
        if collecting:
            gc.enable()
        signals._received = signals._raised = None
    texts = []
    for stream in (out, err):
        stream.flush()
        raw = stream.buffer
        assert isinstance(raw, io.BytesIO)
        texts.append(raw.getvalue().decode("utf-8", errors="replace"))
    return Result(code, texts[0], texts[1], folder)


def perfstack_in(folder: Path, *args: str, env: dict[str, str] | None = None,
                 timeout: float = 120) -> Result:
    """Run ``perfstack ARGS`` in ``folder``; return its exit code and output. For a run that
    several tests read (a module- or session-scoped fixture); a test of its own uses the
    ``perfstack`` fixture. A command in IN_PROCESS runs in this interpreter."""
    if args and args[0] in IN_PROCESS and not os.environ.get("PERFSTACK_TESTS_SUBPROCESS"):
        return _in_process(folder, args, env)
    proc = subprocess.run([sys.executable, "-m", "perfstack", *args], cwd=folder,
                          env=perfstack_env(env), capture_output=True, text=True,
                          timeout=timeout)
    return Result(proc.returncode, proc.stdout, proc.stderr, folder)


@pytest.fixture
def perfstack(tmp_path: Path) -> Callable[..., Result]:
    """Run ``perfstack ARGS`` in a fresh folder; return its exit code and output."""

    def run(*args: str, env: dict[str, str] | None = None, timeout: float = 120) -> Result:
        return perfstack_in(tmp_path, *args, env=env, timeout=timeout)

    return run


@pytest.fixture
def plugins() -> Plugins:
    """A fresh plugin manager, as perfstack loads it (entry points included)."""
    return load_plugins()


def backend(report: dict[str, Any], name: str) -> dict[str, Any]:
    """Return the named backend's entry of a report."""
    found = [b for b in report["backends"] if b["name"] == name]
    assert found, f"no backend {name} in {[b['name'] for b in report['backends']]}"
    return found[0]


def overhead_of(entry: dict[str, Any]) -> dict[str, Any] | None:
    """A backend entry's overhead, or None where the report says it is unknown because other
    programs' load moved between the runs (a suite run beside other work): a test's verdict
    on an overhead must not depend on the machine's load."""
    found = entry.get("overhead")
    if found is None:
        assert str(entry.get("overhead_note")).startswith("unknown"), entry
    return found if isinstance(found, dict) else None


def two_rank_job(folder: Path, edit: Callable[[dict[str, Any]], None],
                 name: str = "rank-1.json.gz") -> Path:
    """A job folder of two ranks from the recorded A100 trace (tests/fixtures/gpu-traces/
    a100_nccl): rank 0 as recorded, rank 1 (written as ``name``) the same trace with its rank
    set to 1 and ``edit`` applied to its JSON. Returns the folder."""
    import gzip
    import json
    import shutil

    trace = ROOT / "tests" / "fixtures" / "gpu-traces" / "a100_nccl" / "rank-0.json.gz"
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copy(trace, folder / "rank-0.json.gz")
    with gzip.open(trace, "rt", encoding="utf-8") as fh:
        data = json.load(fh)
    data["distributedInfo"]["rank"] = 1
    edit(data)
    with gzip.open(folder / name, "wt", encoding="utf-8", compresslevel=1) as fh:
        json.dump(data, fh)  # (level 1: the default 9 took a second a trace)
    return folder


def slow_host(data: dict[str, Any], factor: float) -> None:
    """Make a recorded trace's host ``factor`` times slower, as a slow host is: every event
    starts that much later from the trace's first one (what follows a longer host step starts
    later), the host's events (ops, step ranges, runtime calls) last that much longer, and
    the device's kernels and copies as long as before (its device waits for its host)."""
    events = [e for e in data["traceEvents"] if isinstance(e.get("ts"), (int, float))]
    origin = min(e["ts"] for e in events)
    for e in events:
        e["ts"] = origin + (e["ts"] - origin) * factor
        if e.get("cat") not in ("kernel", "gpu_memcpy", "gpu_memset") and \
                isinstance(e.get("dur"), (int, float)):
            e["dur"] *= factor


def assert_one_line_error(result: Result, code: int) -> None:
    """Bad input: the given exit code, one line on stderr, no traceback, nothing on stdout."""
    assert result.code == code, (result.code, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("perfstack: error: "), lines
    assert "Traceback" not in result.stderr


@pytest.fixture(scope="session")
def free_threaded_python(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A free-threaded CPython 3.13, built once per machine by scripts/build-free-threaded.sh,
    which ``scripts/install.sh --tests`` runs before the suite: here it finds the cached
    interpreter and returns at once (where the set-up was skipped, it builds it now).
    """
    return str(made_once(tmp_path_factory, "free-threaded",
                         lambda _: _script_says("build-free-threaded.sh", 1800)))


def _script_says(name: str, timeout: float) -> str:
    """Run one of scripts/ (a set-up that installs or builds once per machine); return the
    last line it prints (the path of what it made or found)."""
    proc = subprocess.run([str(ROOT / "scripts" / name)], capture_output=True, text=True,
                          timeout=timeout)
    assert proc.returncode == 0, proc.stderr[-3000:]
    path = proc.stdout.strip().splitlines()[-1]
    assert Path(path).exists(), proc.stdout
    return path


#: The backends of the shared tiny_mlp report: one of each layer that runs on a machine with no
#: GPU (oneDNN's verbose log, read end to end by tests/test_onednn.py, adds a run and no layer;
#: perf stat's counters, run live by tests/test_linuxperf.py, a run and rows beside
#: resources' in the hardware layer).
TINY_PLUGINS = "torch,pyspy,perftop,resources"


@pytest.fixture(scope="session")
def tiny_report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One real report of the bundled tiny_mlp workload, profiled by six backends (the torch
    one with Python stacks, so ops link to their functions), with its HTML page beside it
    (report.html); shared by the tests that read a whole report. Returns the report's path."""
    return Path(made_once(tmp_path_factory, *EARLY["tiny_report"]))


def _tiny_report(cwd: Path) -> str:
    proc = subprocess.run(
        [sys.executable, "-m", "perfstack", "run", "-q", "--plugins", TINY_PLUGINS,
         "--repeat", "1", "--warmup", "0", "--torch-stack", "--html", "-o", "report.json",
         str(ROOT / "workloads/tiny_mlp.py"),
         "--", "--num-batches", "40"],
        cwd=cwd, env=perfstack_env(), capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return str(cwd / "report.json")


@pytest.fixture(scope="session")
def markup_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One real run (torch, py-spy) of tests/workloads/markup_names.py, whose op and function
    names hold <script>, pipes and markdown, with --html; returns its report's path (the page
    is beside it, report.html). Read by the HTML and markdown tests."""
    return Path(made_once(tmp_path_factory, *EARLY["markup_run"]))


def _markup_run(cwd: Path) -> str:
    proc = subprocess.run(
        [sys.executable, "-m", "perfstack", "run", "--plugins", "torch,pyspy", "--repeat", "0",
         "--warmup", "0", "-q", "--html", "-o", "report.json", str(WORKLOADS / "markup_names.py")],
        cwd=cwd, env=perfstack_env(), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "html: report.html" in proc.stderr
    return str(cwd / "report.json")


#: The two example projects in examples/ (third-party plugins).
EXAMPLES = (ROOT / "examples" / "perfstack-tracemalloc", ROOT / "examples" / "perfstack-oskit")


@pytest.fixture(scope="session")
def example_plugins(tmp_path_factory: pytest.TempPathFactory) -> str:
    """pip-install both example projects (real wheel builds) into a folder of their own;
    returns the PYTHONPATH that finds them (and the tests' own plugins)."""
    return str(made_once(tmp_path_factory, *EARLY["example_plugins"]))


def _example_plugins(target: Path) -> str:
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps",
         "--no-build-isolation", "--target", str(target), *map(str, EXAMPLES)],
        capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert list(target.glob("perfstack_tracemalloc-0.1.0.dist-info"))
    assert list(target.glob("perfstack_oskit-0.1.0.dist-info"))
    return f"{ROOT}:{target}"


#: The shared runs of one CPU that xdist's workers make before their first test (the fixture,
#: its folder and its maker), the longest first.
EARLY: dict[str, tuple[str, Callable[[Path], Any]]] = {
    "tiny_report": ("tiny", _tiny_report), "markup_run": ("markup", _markup_run),
    "example_plugins": ("site", _example_plugins)}


@pytest.fixture(scope="session")
def ddp_job(tmp_path_factory: pytest.TempPathFactory, example_plugins: str) -> Result:
    """One real job of two gloo ranks under torchrun (tests/workloads/ddp_straggler.py: rank 1
    does five times the work of rank 0 each step), every rank profiled, ended by --steps 4
    --warmup-steps 2; its backends one of each kind: torch (in-process, per rank), py-spy
    (attached to each rank, as any attaching plugin is), resources (reading the baseline) and
    the example rusage wrapper (a third party's, around the whole job).
    Read by the distributed, steps and example-plugin tests; a torchrun job costs seconds of
    imports per rank and run, so they share one."""
    def job(folder: Path) -> dict[str, Any]:
        return {**vars(_ddp_job(folder, example_plugins)), "cwd": str(folder)}

    done = made_once(tmp_path_factory, "ddp", job)
    return Result(**{**done, "cwd": Path(done["cwd"])})


def _ddp_job(folder: Path, example_plugins: str) -> Result:
    result = perfstack_in(
        folder, "run", "--nproc-per-node", "2", "--ranks", "all",
        "--plugins", "torch,pyspy,resources,rusage", "--steps", "4", "--warmup-steps", "2",
        "--repeat", "1",
        "--warmup", "0", "-q", "--timeout", "150", str(WORKLOADS / "ddp_straggler.py"),
        env={"PYTHONPATH": example_plugins}, timeout=300)
    assert result.code == 0, result.stderr
    return result


@pytest.fixture(scope="session")
def chromium(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A headless Chromium and its chromedriver (Debian's packages, installed once per machine
    when root, by scripts/install-chromium.sh); returns the browser's path."""
    return str(made_once(tmp_path_factory, "chromium",
                         lambda _: _script_says("install-chromium.sh", 900)))


@pytest.fixture(scope="session")
def postgres_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A throwaway PostgreSQL server (Debian's package, installed when missing by
    scripts/install-postgresql.sh): a cluster made with initdb in a temporary folder, listening
    on a free loopback port, stopped at the end of the session. Returns the URL of its
    maintenance database."""
    import pwd
    import shutil
    import socket

    bin_dir = Path(made_once(tmp_path_factory, "postgresql",
                             lambda _: _script_says("install-postgresql.sh", 900)))
    # Not under pytest's own temporary folders: they are closed to other users. Removed at
    # the end of the session.
    folder = Path(tempfile.mkdtemp(prefix="perfstack-pg-", dir=SYSTEM_TMP))
    as_user: list[str] = []
    if os.geteuid() == 0:  # initdb refuses root: the package's own user runs the server
        pw = pwd.getpwnam("postgres")
        os.chown(folder, pw.pw_uid, pw.pw_gid)
        as_user = ["runuser", "-u", "postgres", "--"]
    data = folder / "data"
    subprocess.run([*as_user, str(bin_dir / "initdb"), "-D", str(data), "-U", "postgres",
                    "--auth=trust", "-E", "UTF8", "--no-sync"], check=True,
                   capture_output=True, timeout=300)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    options = f"-p {port} -k {folder} -c listen_addresses=127.0.0.1"
    # A service of the whole session, stopped below: not one of the processes a test must
    # not leave behind.
    unmarked = {k: v for k, v in os.environ.items() if k != SESSION_MARK}
    started = subprocess.run([*as_user, str(bin_dir / "pg_ctl"), "-D", str(data), "-o",
                              options, "-l", str(folder / "server.log"), "-w", "start"],
                             capture_output=True, text=True, timeout=120, env=unmarked)
    assert started.returncode == 0, started.stderr + (folder / "server.log").read_text()
    try:
        yield f"postgresql://postgres@127.0.0.1:{port}/postgres"
    finally:
        subprocess.run([*as_user, str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "fast",
                        "-w", "stop"], capture_output=True, timeout=120)
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def postgres_db(postgres_server: str, request: pytest.FixtureRequest) -> str:
    """A new, empty database on the session's PostgreSQL server; returns its URL."""
    import re

    import pg8000.dbapi

    name = "t_" + re.sub(r"\W", "_", request.node.name.lower())[:50]
    con = pg8000.dbapi.connect(user="postgres", host="127.0.0.1",
                               port=int(postgres_server.rsplit(":", 1)[1].split("/")[0]),
                               database="postgres")
    con.autocommit = True
    con.cursor().execute(f"DROP DATABASE IF EXISTS {name}")
    con.cursor().execute(f"CREATE DATABASE {name}")
    con.close()
    return postgres_server.rsplit("/", 1)[0] + "/" + name
