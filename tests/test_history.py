"""The history store on real runs and real files: what each entry holds, the series, and that
neither a killed writer nor two writers at once corrupt it or leave half an entry."""

from __future__ import annotations

import copy
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from perfstack import history
from perfstack.history import location as historydb
from perfstack.report import Layer, Quantity, Row
from perfstack.report.files import load_report, save_report
from tests.conftest import ROOT, WORKLOADS, Result, assert_one_line_error, perfstack_env

FIXTURE = ROOT / "tests/fixtures/reports/v1-busy.json"


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                          text=True).stdout.strip()


def test_runs_are_remembered_with_their_commit_and_read_as_series(
        perfstack: Callable[..., Result], tmp_path: Path) -> None:
    repo = tmp_path
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "config", "user.email", "t@example.com")
    _git(repo, "config", "user.name", "t")
    script = repo / "work.py"
    script.write_text((WORKLOADS / "busy.py").read_text())
    (repo / ".gitignore").write_text(".perfstack/\n")
    _git(repo, "add", "work.py", ".gitignore")
    _git(repo, "commit", "-q", "-m", "first")
    head = _git(repo, "rev-parse", "HEAD")
    run = ("run", "--plugins", "resources", "--repeat", "1", "--warmup", "0", "-q", "work.py")
    assert perfstack(*run).code == 0
    assert perfstack(*run).code == 0
    script.write_text(script.read_text() + "\n# edited\n")  # uncommitted
    assert perfstack(*run).code == 0
    listed = perfstack("history", "--format", "json")
    assert listed.code == 0, listed.stderr
    entries = json.loads(listed.stdout)
    assert [e["commit"] for e in entries] == [head] * 3
    assert [e["branch"] for e in entries] == ["main"] * 3
    assert [e["dirty"] for e in entries] == [False, False, True]
    assert len({e["machine"] for e in entries}) == 1
    assert all(e["wall_time"] > 0 for e in entries)
    # Each entry's figures are the report's: the series agrees with the reports themselves.
    walls = [next(m["value"] for m in json.loads(Path(e["report"]).read_text())["metrics"]
                  if m["name"] == "wall_time") for e in entries]
    csv_out = perfstack("history", "--metric", "wall_time", "--format", "csv")
    lines = csv_out.stdout.strip().splitlines()
    assert lines[0] == "run,started,commit,value,unit" and len(lines) == 4
    assert [float(line.split(",")[3]) for line in lines[1:]] == walls
    text = perfstack("history", "--workload", "work.py")
    assert text.code == 0 and "dirty" in text.stdout and head[:10] in text.stdout
    assert perfstack("history", "--branch", "other", "--format", "json").stdout.strip() == "[]"


def test_old_reports_are_added_once(perfstack: Callable[..., Result], tmp_path: Path) -> None:
    copy_of = tmp_path / "old.json"
    copy_of.write_bytes(FIXTURE.read_bytes())
    first = perfstack("history", "add", str(copy_of))
    assert first.code == 0 and "added 1 of 1" in first.stderr, first.stderr
    again = perfstack("history", "add", str(copy_of))
    assert again.code == 0 and "added 0 of 1" in again.stderr
    series = json.loads(perfstack("history", "--metric", "wall_time", "--format",
                                  "json").stdout)
    assert len(series) == 1 and series[0]["value"] > 0 and series[0]["commit"] is None
    assert_one_line_error(perfstack("history", "add", "missing.json"), 3)
    (tmp_path / "bad.json").write_text("{")
    assert_one_line_error(perfstack("history", "add", str(tmp_path / "bad.json")), 4)
    assert_one_line_error(perfstack("history", "--metric", "a", "--row", "b"), 2)


def test_a_history_path_beginning_file_colon_is_a_file(perfstack: Callable[..., Result],
                                                      tmp_path: Path) -> None:
    """Issue 57: 'file:h.sqlite?mode=memory' was taken as an SQLite URI (an in-memory
    database): every entry vanished without a word, and `history --db` of the same name
    said 'no history yet'. It is a file of that name in this folder."""
    copy_of = tmp_path / "old.json"
    copy_of.write_bytes(FIXTURE.read_bytes())
    name = "file:h.sqlite?mode=memory"
    added = perfstack("history", "add", str(copy_of), "--db", name)
    assert added.code == 0 and "added 1 of 1" in added.stderr, added.stderr
    assert (tmp_path / name).is_file()
    listed = perfstack("history", "--db", name, "--format", "json")
    assert listed.code == 0 and len(json.loads(listed.stdout)) == 1, listed.stderr


def test_no_history_yet_is_one_line(perfstack: Callable[..., Result]) -> None:
    assert_one_line_error(perfstack("history"), 3)
    off = perfstack("history", env={history.HISTORY_ENV: "off"})
    assert off.code == 2 and "off" in off.stderr


def _variants(folder: Path, count: int, rows: int, tag: str) -> list[Path]:
    """``count`` distinct real reports of ``rows`` rows each (the fixture, its rows repeated
    with distinct keys), written to files."""
    base = load_report(FIXTURE)
    paths = []
    for i in range(count):
        report = copy.deepcopy(base)
        report.run.started = f"2026-11-22T10:{i // 60:02d}:{i % 60:02d}+00:00"
        report.layers[Layer.KERNEL] = [
            Row(f"{tag}-{i}-{k}", f"row {k}", "bench", {"time": Quantity(k * 1e-3, "s")})
            for k in range(rows)]
        path = folder / f"{tag}-{i}.json"
        save_report(report, path)
        paths.append(path)
    return paths


WRITER = """
import sys
from pathlib import Path

from perfstack import history
from perfstack.history import location as historydb
from perfstack.report.files import load_report
db = sys.argv[1]
loaded = [(Path(name), load_report(Path(name))) for name in sys.argv[2:]]
print("ready", flush=True)  # from here on the writer only adds: a kill lands in an add
for path, report in loaded:
    history.add(db, report, path)
    print("added", path, flush=True)
"""


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Where the history lives: an SQLite file, or a database on a throwaway PostgreSQL
    server; the same tests run against both."""
    if request.param == "sqlite":
        return str(tmp_path / "history.sqlite")
    return str(request.getfixturevalue("postgres_db"))


def _writer(db: str, reports: list[Path]) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-c", WRITER, str(db), *map(str, reports)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=ROOT)


def _complete(db: str, rows: int) -> list[int]:
    """Every run in the database has all of its rows: return the runs' row counts."""
    assert history.integrity(db) == "ok"
    with historydb.connect(db) as con:
        history.ensure_schema(con)  # a writer killed before it made the tables left none
        counts = [n for (n,) in con.execute(
            "SELECT COUNT(x.key) FROM runs r LEFT JOIN rows x ON x.run_id = r.id "
            "AND x.source = 'bench' GROUP BY r.id").fetchall()]
    assert all(n == rows for n in counts), counts
    return counts


def test_a_killed_writer_leaves_no_half_entry(tmp_path: Path, store: str) -> None:
    """SIGKILL at two moments of a stream of adds (each about 0.05 s on SQLite, more on
    PostgreSQL, most of it in its transaction): what is in the database is whole, and the
    next writer goes on."""
    db = store
    reports = _variants(tmp_path, 5, 10_000, "k")
    done = 0
    for delay in (0.03, 0.14):
        proc = _writer(db, reports)
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        done = len(_complete(db, 10_000))
    proc = _writer(db, reports)  # adds what is missing; the rest were added whole already
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    assert len(_complete(db, 10_000)) == 5 >= done


def test_two_writers_at_once(tmp_path: Path, store: str) -> None:
    db = store
    mine = _variants(tmp_path, 10, 3_000, "a")
    theirs = _variants(tmp_path, 10, 3_000, "b")
    writers = [_writer(db, mine), _writer(db, theirs)]
    for proc in writers:
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
    assert len(_complete(db, 3_000)) == 20
    assert len(history.runs(db)) == 20


def test_workload_strings_never_act_in_a_terminal_or_a_spreadsheet(
        perfstack: Callable[..., Result], tmp_path: Path) -> None:
    """A workload's command (its name, its arguments) and a metric's name are the workload's
    words: in the history's table, trend and gate they reach the terminal with their escape
    sequences shown as \\xNN, never acted on; in CSV a cell that would start a formula
    (=HYPERLINK...) is text, as OWASP advises."""
    report = load_report(FIXTURE)
    report.run.command = ["python", "=HYPERLINK(\"http://x\",\"y\").py", "\x1b]0;pwned\x07"]
    report.metrics[0].name = "\x1b[2Jwall"
    report.environment["repository"] = {"commit": "ab" * 20, "dirty": False,
                                        "branch": '=HYPERLINK("http://x","y")'}
    db = tmp_path / "h.sqlite"
    for i in range(3):
        path = tmp_path / f"r{i}.json"
        save_report(report, path)
        history.add(db, report, path)
    text = perfstack("history", "--db", str(db), env={"COLUMNS": "200"})
    assert text.code == 0, text.stderr
    assert "\x1b" not in text.stdout and "\x07" not in text.stdout
    assert "\\x1b]0;pwned\\x07" in text.stdout
    for command in (("trend", "--db", str(db), "--all"), ("gate", "--db", str(db))):
        out = perfstack(*command)
        assert out.code in (0, 1), out.stderr
        assert "\x1b" not in out.stdout, command
    csv_out = perfstack("history", "--db", str(db), "--format", "csv")
    cells = [c for line in csv_out.stdout.splitlines() for c in line.split(",")]
    assert not [c for c in cells if c.lstrip('"').startswith(("=", "+", "@"))], cells
    assert "'=HYPERLINK" in csv_out.stdout  # the branch, as text


def test_a_history_of_a_newer_schema_is_refused_and_left_as_it_was(
        perfstack: Callable[..., Result], tmp_path: Path) -> None:
    """A history a newer perfstack wrote (schema 99): reading it is one line, exit 5, and
    neither a read nor a run writes its older version over the newer one (the run's report is
    still written, the history left alone, with a warning)."""
    import sqlite3

    db = tmp_path / "h.sqlite"
    report = load_report(FIXTURE)
    save_report(report, tmp_path / "r.json")
    history.add(db, report, tmp_path / "r.json")
    with sqlite3.connect(db) as con:
        con.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")

    def contents() -> list[Any]:
        with sqlite3.connect(db) as con:
            tables = con.execute("SELECT name, sql FROM sqlite_master WHERE type = 'table' "
                                 "ORDER BY name").fetchall()
            return [*tables, *(con.execute(f"SELECT * FROM {t}").fetchall()
                               for t, _ in tables if not t.startswith("sqlite_"))]

    before = contents()
    for command in (("history", "--db", str(db)), ("trend", "--db", str(db)),
                    ("gate", "--db", str(db))):
        result = perfstack(*command)
        assert_one_line_error(result, 5)
        assert "newer perfstack" in result.stderr
    run = perfstack("run", "--plugins", "resources", "--repeat", "1", "--warmup", "0", "-q",
                    str(WORKLOADS / "busy.py"), env={history.HISTORY_ENV: str(db)})
    assert run.code == 0 and "newer perfstack" in run.stderr, run.stderr
    with sqlite3.connect(db) as con:
        assert con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone() \
            == ("99",)
    assert contents() == before


def _read_only(folder: Path, *args: str) -> Result:
    """Run ``perfstack ARGS`` with ``folder`` mounted read-only (a mount namespace of its own:
    even root cannot write there, as on a read-only mount or another user's share)."""
    script = f'mount --bind -o ro "{folder}" "{folder}" && exec "$@"'
    proc = subprocess.run(["unshare", "--mount", "sh", "-c", script, "sh", sys.executable,
                           "-m", "perfstack", *args], cwd=folder, env=perfstack_env(),
                          capture_output=True, text=True, timeout=120)
    return Result(proc.returncode, proc.stdout, proc.stderr, folder)


def test_a_history_on_a_read_only_mount_is_read(tmp_path: Path) -> None:
    """A history on a read-only mount: history, trend and gate read it as it is, without a
    write lock, and it stays byte for byte as it was; an older schema, which only a write could
    bring up to date, is one line."""
    import shutil
    import sqlite3

    if shutil.which("unshare") is None or os.geteuid() != 0:
        pytest.skip("needs root and unshare to mount a folder read-only")
    shared = tmp_path / "shared"
    shared.mkdir()
    db = shared / "h.sqlite"
    report = load_report(FIXTURE)
    save_report(report, tmp_path / "r.json")
    history.add(db, report, tmp_path / "r.json")
    with sqlite3.connect(db) as con:  # a copy as it would be shared: no WAL or index beside it
        con.execute("PRAGMA journal_mode=DELETE")
    before = sorted((p.name, p.read_bytes()) for p in shared.iterdir())
    listed = _read_only(shared, "history", "--db", str(db), "--format", "json")
    assert listed.code == 0, listed.stderr
    assert [e["workload"] for e in json.loads(listed.stdout)] == \
        [history.workload_of(report)[0]]
    for command in ("trend", "gate"):
        result = _read_only(shared, command, "--db", str(db))
        assert "Traceback" not in result.stderr and "cannot" not in result.stderr, \
            result.stderr
        assert result.code != 10, result.stderr
    assert sorted((p.name, p.read_bytes()) for p in shared.iterdir()) == before
    # A history left in WAL mode (the default perfstack writes) reads the same.
    with sqlite3.connect(db) as con:
        con.execute("PRAGMA journal_mode=WAL")
    for leftover in ("h.sqlite-wal", "h.sqlite-shm"):
        (shared / leftover).unlink(missing_ok=True)
    assert _read_only(shared, "history", "--db", str(db)).code == 0
    with sqlite3.connect(db) as con:
        con.execute("PRAGMA journal_mode=DELETE")
        con.execute("UPDATE meta SET value = '3' WHERE key = 'schema_version'")
    result = _read_only(shared, "history", "--db", str(db))
    assert_one_line_error(result, 10)
    assert "read-only" in result.stderr and "older schema (3)" in result.stderr
    assert sorted(p.name for p in shared.iterdir()) == ["h.sqlite"]


HOLDER = """
import sqlite3, sys, time
con = sqlite3.connect(sys.argv[1], isolation_level=None)
con.execute("BEGIN EXCLUSIVE")
print("locked", flush=True)
time.sleep(60)
"""


def test_a_wait_for_the_lock_is_said_and_a_signal_ends_it(tmp_path: Path) -> None:
    """Another process holds the SQLite history's write lock: a read does not wait for it (a
    history in WAL mode is read beside a writer); an add says it waits and Ctrl-C ends the wait
    at once (130); a run's SIGTERM while it waits to add itself ends it at once too (143), with
    its report written whole and the history's entry said to be skipped."""
    from tests.conftest import ctrl_c_reaches, perfstack_env

    db = tmp_path / "h.sqlite"
    env = perfstack_env({history.HISTORY_ENV: str(db)})
    once = [sys.executable, "-m", "perfstack", "run", "-q", "--repeat", "1", "--warmup", "0",
            "--plugins", "resources"]
    subprocess.run([*once, "-o", "first.json", str(WORKLOADS / "busy.py")], cwd=tmp_path,
                   env=env, check=True, capture_output=True)
    save_report(load_report(tmp_path / "first.json"), tmp_path / "copy.json")
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(db)], stdout=subprocess.PIPE,
                              text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        read = subprocess.run([sys.executable, "-m", "perfstack", "history", "--format", "json"],
                              cwd=tmp_path, env=env, capture_output=True, text=True, timeout=30)
        assert read.returncode == 0 and len(json.loads(read.stdout)) == 1, read.stderr
        assert "waiting" not in read.stderr
        for args, sig, code in (([sys.executable, "-m", "perfstack", "history", "add",
                                  "copy.json"], signal.SIGINT, 130),
                                ([*once, "-o", "r.json", str(WORKLOADS / "busy.py")],
                                 signal.SIGTERM, 143)):
            proc = subprocess.Popen(args, cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True,
                                    preexec_fn=ctrl_c_reaches)
            assert proc.stderr is not None
            waiting = proc.stderr.readline()
            while "waiting for the history" not in waiting and waiting:
                waiting = proc.stderr.readline()
            assert "another process holds its lock" in waiting, waiting
            sent = time.monotonic()
            proc.send_signal(sig)
            _, err = proc.communicate(timeout=30)
            assert proc.returncode == code and time.monotonic() - sent < 5, (code, err)
        assert "not added to the history" in err and "interrupted once the report" in err
        assert load_report(tmp_path / "r.json").run.complete
    finally:
        holder.kill()
        holder.wait()
    assert len(history.runs(db)) == 1  # the first run; the interrupted one was not added


def test_a_signal_in_a_deferred_window_is_postponed_not_lost(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    from perfstack import signals

    monkeypatch.setattr(signals, "_received", None)  # this process's record, put back after
    with signals.deferred():
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.05)
        assert signals.pending() == signal.SIGTERM  # recorded, not acted on, inside
    with pytest.raises(signals.Terminated):
        signals.raise_pending()
    assert signals.pending() is None


def test_a_database_server_that_never_answers_does_not_hold_a_signal(tmp_path: Path) -> None:
    """A PostgreSQL history whose server accepts and never answers: a run's SIGTERM while it
    waits to add itself ends the wait at once (143, the report whole, the entry skipped and
    said), not after the driver's 30 s timeout with exit 0."""
    import socket
    import threading

    from tests.conftest import perfstack_env

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(4)
    accepted: list[socket.socket] = []
    threading.Thread(target=lambda: accepted.append(server.accept()[0]), daemon=True).start()
    url = f"postgresql://nobody@127.0.0.1:{server.getsockname()[1]}/none"
    proc = subprocess.Popen(
        [sys.executable, "-m", "perfstack", "run", "-q", "--repeat", "1", "--warmup", "0",
         "--plugins", "resources", "-o", "r.json", str(WORKLOADS / "busy.py")], cwd=tmp_path,
        env=perfstack_env({history.HISTORY_ENV: url}), stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        while line and "baseline-1: exit 0" not in line:
            line = proc.stderr.readline()
        deadline = time.monotonic() + 10
        while not accepted and time.monotonic() < deadline:  # it is connecting: it waits
            time.sleep(0.02)
        assert accepted, "the run never connected"
        sent = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
        server.close()
        for con in accepted:
            con.close()
    assert proc.returncode == 143 and time.monotonic() - sent < 5, (proc.returncode, err)
    assert "not added to the history" in err and "SIGTERM came while waiting" in err
    assert load_report(tmp_path / "r.json").run.complete


def test_a_run_measured_otherwise_is_a_series_of_its_own_and_torch_is_not_the_machine(
        ) -> None:
    """One script, run whole, with --steps 3, and with --steps 2 --torch-stack, once sat in
    one series (101.6 -> 71.4 -> 23.1 s); and a torch workload and a plain one on one machine
    had two machine ids."""
    from perfstack.history.identity import fingerprint, machine_facts, workload_of

    whole = load_report(FIXTURE)
    steps = copy.deepcopy(whole)
    steps.run.steps = {"warmup": 2, "measured": 3}
    stacked = copy.deepcopy(steps)
    stacked.run.steps = {"warmup": 2, "measured": 2}
    stacked.backends[0].options = {"stack": True}
    keys = {workload_of(r)[1] for r in (whole, steps, stacked)}
    assert len(keys) == 3
    assert workload_of(whole)[0] == list(whole.run.command)  # a plain run keeps its key
    shown = workload_of(stacked)[0][-1]
    assert shown.startswith("(measured with --steps 2 --warmup-steps 2 --") and "-stack" in shown
    with_torch = copy.deepcopy(whole)
    with_torch.environment["torch"] = {"version": "2.13.0+cpu", "git_version": "abc"}
    plain = copy.deepcopy(whole)
    plain.environment.pop("torch", None)
    assert fingerprint(machine_facts(with_torch)) == fingerprint(machine_facts(plain))


def test_an_analysed_job_is_one_series_however_its_files_are_named(tmp_path: Path,
                                                                    monkeypatch) -> None:
    """A job's traces, named through a linked folder, relatively, or as links to files, are
    keyed by where they really are (each folder resolved once, not each rank's path): the
    same series as named plainly, the same paths as ``os.path.realpath`` gives."""
    from perfstack.history.identity import workload_of

    job = tmp_path / "job"
    job.mkdir()
    for rank in range(3):
        (job / f"rank-{rank}.json.gz").write_bytes(b"")
    (tmp_path / "via").symlink_to(job, target_is_directory=True)
    (job / "rank-9.json.gz").symlink_to(job / "rank-2.json.gz")
    report = load_report(FIXTURE)
    report.run.command = []
    named = {"plain": [str(job / f"rank-{r}.json.gz") for r in range(3)],
             "linked": [str(tmp_path / "via" / f"rank-{r}.json.gz") for r in (0, 1, 9)],
             "relative": [f"via/rank-{r}.json.gz" for r in (0, 1, 2)]}
    monkeypatch.chdir(tmp_path)
    keys = set()
    for paths in named.values():
        report.run.analyzed = [{"path": p, "backend": "torch"} for p in paths]
        shown, key = workload_of(report)
        assert shown[2:] == sorted({os.path.realpath(p) for p in paths}), shown
        keys.add(key)
    assert len(keys) == 1
