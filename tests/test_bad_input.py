"""Bad input: one clear line on stderr, a distinct exit code, no traceback, nothing overwritten."""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

import pytest

from tests.conftest import ROOT, WORKLOADS, assert_one_line_error

BUSY = str(WORKLOADS / "busy.py")


@pytest.mark.parametrize(
    ("args", "code", "words"),
    [
        (("run", "--plugins", "nosuch", BUSY), 6, "unknown plugin 'nosuch'"),
        (("run", "missing.py"), 3, "missing.py: no such file"),
        (("run", "-m", "no_such_module_xyz"), 3, "no module named"),
        (("run", "--timeout", "-1", BUSY), 2, "positive number of seconds"),
        (("run", "--timeout", "soon", BUSY), 2, "not a number"),
        (("run", "--repeat", "-1", BUSY), 2, "at least 0"),
        (("run",), 2, "name a workload script"),
        (("run", BUSY, "-m", "x"), 2, "not both"),
        (("run", "--bogus", BUSY), 2, "unrecognized arguments"),
        (("nosuchcommand",), 2, "invalid choice"),
        (("-p", "no:", "plugins"), 2, "-p takes"),
        (("show", "nosuch.json"), 3, "no such file"),
        (("show",), 3, "no latest run"),
    ],
)
def test_bad_arguments(perfstack, args, code, words):
    result = perfstack(*args)
    assert_one_line_error(result, code)
    assert words in result.stderr
    assert not (result.cwd / ".perfstack").exists(), "nothing may be created for bad input"


def _write(path, text):
    path.write_text(text)
    return path.name


@pytest.mark.parametrize("command", ["show", "validate"])
@pytest.mark.parametrize(
    ("content", "code", "words"),
    [
        ("{not json", 4, "not valid JSON"),
        ('{"traceEvents": []}', 4, "not a perfstack report"),
        ("[1, 2]", 4, "not a perfstack report"),
        ('{"schema": "perfstack/report", "version": 99}', 5, "version 99 is not supported"),
        ('{"schema": "perfstack/report", "version": 1, "run": {}}', 4, "does not match"),
    ],
)
def test_bad_report_files(perfstack, tmp_path, command, content, code, words):
    name = _write(tmp_path / "r.json", content)
    result = perfstack(command, name)
    assert_one_line_error(result, code)
    assert words in result.stderr
    assert (tmp_path / "r.json").read_text() == content


def test_truncated_gzip_is_not_a_report(perfstack, tmp_path):
    data = gzip.compress(json.dumps({"schema": "perfstack/report"}).encode())
    (tmp_path / "r.json.gz").write_bytes(data[: len(data) // 2])
    assert_one_line_error(perfstack("show", "r.json.gz"), 4)


def test_bad_input_never_overwrites_an_existing_report(perfstack, tmp_path):
    (tmp_path / "keep.json").write_text("precious")
    for args in (("run", "-o", "keep.json", "missing.py"),
                 ("run", "-o", "keep.json", "--plugins", "nosuch", BUSY),
                 ("run", "-o", "keep.json", "--timeout", "0", BUSY)):
        result = perfstack(*args)
        assert result.code in (2, 3, 6)
        assert (tmp_path / "keep.json").read_text() == "precious"


def test_unwritable_output_is_refused_before_running(perfstack, tmp_path):
    (tmp_path / "afile").write_text("x")
    result = perfstack("run", "-o", "afile/report.json", BUSY)
    assert_one_line_error(result, 7)


def test_a_big_report_reads_as_a_small_one_and_bad_big_files_are_refused(perfstack, tmp_path,
                                                                         tiny_report):
    """Above 2 MB reports are parsed by msgspec, below by the standard library: the same
    report, the same data; NaN, a cut file and a number beyond a float are one line, exit 4."""
    from perfstack.report.files import BIG_JSON, read_json

    data = json.loads(tiny_report.read_text())
    padded = dict(data, environment={**data["environment"], "pad": "x" * BIG_JSON})
    big = tmp_path / "big.json"
    big.write_text(json.dumps(padded, indent=1))
    assert big.stat().st_size > BIG_JSON
    assert read_json(big) == json.loads(big.read_text())
    assert perfstack("validate", "big.json").code == 0
    text = big.read_text()
    for name, bad in (("nan.json", text.replace('"value": ', '"value": NaN, "x": ', 1)),
                      ("cut.json", text[: len(text) // 2]),
                      ("far.json", text.replace('"value": ', '"value": 1e999, "x": ', 1))):
        (tmp_path / name).write_text(bad)
        result = perfstack("show", name)
        assert_one_line_error(result, 4)
        assert "not valid JSON" in result.stderr


def test_an_output_is_never_an_input_or_another_output(perfstack, tmp_path):
    """One rule for every command: -o or --html naming an input (a trace, a report, the
    workload's script) or each other is one line, exit 2, and every file is as it was."""
    import shutil

    trace = tmp_path / "rank-0.json.gz"
    shutil.copy(ROOT / "tests/fixtures/gpu-traces/mi250_rocm/rank-0.json.gz", trace)
    folder = tmp_path / "job"
    folder.mkdir()
    shutil.copy(trace, folder / "rank-1.json.gz")
    for name in ("a.json", "b.json"):
        shutil.copy(ROOT / "tests/fixtures/reports/v1-busy.json", tmp_path / name)
    script = tmp_path / "A.py"
    shutil.copy(WORKLOADS / "busy.py", script)
    shutil.copy(WORKLOADS / "busy.py", tmp_path / "B.py")
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    cases = [
        ("analyze", str(trace), "-o", str(trace)),
        ("analyze", str(folder), "-o", str(folder / "rank-1.json.gz")),
        ("analyze", str(trace), "-o", "r.json", "--html", "r.json"),
        ("analyze", str(trace), "-o", "r.html", "--html"),  # the page beside: the report
        ("merge", "a.json", "b.json", "-o", "b.json"),
        ("merge", "a.json", "b.json", "-o", "m.json", "--html", "m.json"),
        ("ab", "A.py", "B.py", "-o", "A.py"),
        ("show", "a.json", "-o", "a.json"),
        ("diff", "a.json", "b.json", "--force", "-o", "b.json"),
        ("run", "-o", "A.py", "A.py"),
        ("run", "--html=A.py", "A.py"),
    ]
    for args in cases:
        result = perfstack(*args)
        assert_one_line_error(result, 2)
        assert "name another file" in result.stderr or "same file" in result.stderr, (
            args, result.stderr)
    after = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    assert after == before


def test_a_fifo_named_like_a_trace_is_refused_before_it_is_opened(perfstack, tmp_path):
    """A FIFO nobody writes to, named like a trace, in a folder or by name: one line, exit 4,
    at once (reading it would block for ever)."""
    import os

    job = tmp_path / "job"
    job.mkdir()
    os.mkfifo(job / "rank-0.pt.trace.json")
    for target in ("job", "job/rank-0.pt.trace.json"):
        result = perfstack("analyze", target, timeout=30)
        assert_one_line_error(result, 4)
        assert "not a regular file" in result.stderr


def test_dangling_links_and_link_loops_in_a_folder_are_passed_over(perfstack, tmp_path):
    """A link to nothing and a loop of two links beside a real trace: analyze once stopped
    at them (exit 3, or an internal error on the loop). It reads the trace; a broken link
    named like the job's traces is said to be left out."""
    import os
    import shutil

    job = tmp_path / "job"
    job.mkdir()
    shutil.copy(ROOT / "tests/fixtures/gpu-traces/mi250_rocm/rank-0.json.gz",
                job / "rank-0.json.gz")
    os.symlink("gone.txt", job / "notes.txt")
    os.symlink("loop-b", job / "loop-a")
    os.symlink("loop-a", job / "loop-b")
    result = perfstack("analyze", "job", "-o", "report.json", timeout=120)
    assert result.code == 0, result.stderr
    assert json.loads((tmp_path / "report.json").read_text())["run"]["analyzed"]
    os.symlink("gone.json.gz", job / "rank-1.json.gz")
    result = perfstack("analyze", "job", "-o", "again.json", timeout=120)
    assert "rank-1.json.gz" in result.stderr and "not read" in result.stderr
    assert (tmp_path / "again.json").is_file()


def test_a_trace_named_twice_is_read_once(perfstack, tmp_path):
    """Issue 57: 'analyze DIR DIR/rank-0.json.gz' read rank 0 as two profiling cycles (its
    device time doubled, a straggler of itself). Named by its folder, by name and through a
    link, it is one file, read once: the report is the folder's alone."""
    import os
    import shutil

    job = tmp_path / "job"
    job.mkdir()
    shutil.copy(ROOT / "tests/fixtures/gpu-traces/mi250_rocm/rank-0.json.gz",
                job / "rank-0.json.gz")
    alone = perfstack("analyze", "job", "-o", "alone.json", timeout=120)
    assert alone.code == 0, alone.stderr
    os.symlink(job / "rank-0.json.gz", tmp_path / "link.json.gz")
    twice = perfstack("analyze", "job", "job/rank-0.json.gz", "link.json.gz", "-o",
                      "twice.json", timeout=120)
    assert twice.code == 0, twice.stderr
    one, two = (json.loads((tmp_path / f"{n}.json").read_text()) for n in ("alone", "twice"))
    assert len(two["run"]["analyzed"]) == 1
    figures = {m["name"]: m["value"] for m in one["metrics"]}
    assert figures and {m["name"]: m["value"] for m in two["metrics"]} == figures


def test_names_that_are_not_utf8_are_written_escaped(tmp_path):
    """Issue 57: a script whose file name is not UTF-8, reporting a metric whose name is not
    either, made the HTML writer and the history write internal errors (exit 70), and so did
    `history --workload $'\\xff'`. The byte is written as \\xff; the run is found by it."""
    import subprocess
    import sys

    from tests.conftest import perfstack_env

    name = os.fsdecode(b"odd\xff.py")
    (tmp_path / name).write_text(
        "import os\nimport perfstack\n"
        "perfstack.report_metric(os.fsdecode(b'rate\\xff'), 1.0, 'x/s')\n")
    env = perfstack_env({"PERFSTACK_HISTORY": str(tmp_path / "h.sqlite")})
    run = subprocess.run(
        [sys.executable, "-m", "perfstack", "run", "-q", "--repeat", "1", "--warmup", "0",
         "--plugins", "resources", "--html", "page.html", "-o", "r.json", name],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    page = (tmp_path / "page.html").read_bytes()
    page.decode("utf-8")  # valid UTF-8 throughout
    assert b"odd\\xff.py" in page
    found = subprocess.run(
        [sys.executable, "-m", "perfstack", "history", "--workload", os.fsdecode(b"\xff"),
         "--format", "json"], cwd=tmp_path, env=env, capture_output=True, timeout=60)
    assert found.returncode == 0, found.stderr
    assert len(json.loads(found.stdout)) == 1


def test_a_trace_whose_name_is_not_utf8_analyzes_to_html(perfstack, tmp_path):
    """Issue 70: `perfstack analyze TRACE --html` of a trace named with a byte that is not
    UTF-8 was an internal error (70, UnicodeEncodeError) where the text path worked: the
    page shows the byte as \xe9 and links the file by its own bytes (%E9)."""
    import shutil

    from tests.conftest import ROOT

    name = os.fsdecode(b"tr\xe9ce.json.gz")
    shutil.copy(ROOT / "tests/fixtures/gpu-traces/mi250_rocm/rank-0.json.gz", tmp_path / name)
    result = perfstack("analyze", name, "-q", "-o", "r.json", "--html", "page.html")
    assert result.code == 0, result.stderr
    page = (tmp_path / "page.html").read_bytes()
    page.decode("utf-8")  # valid UTF-8 throughout
    assert b"tr\\xe9ce.json.gz" in page and b'href="./tr%E9ce.json.gz"' in page


def test_merge_refuses_a_report_twice_and_other_workloads_unless_forced(perfstack, tmp_path):
    """A node report given twice (by one path or a copy) would count its ranks twice; reports
    of different workloads are not one job unless --force says so."""
    import shutil

    from tests.conftest import ROOT

    busy = ROOT / "tests/fixtures/reports/v1-busy.json"
    shutil.copy(busy, tmp_path / "copy.json")
    other = ROOT / "tests/fixtures/reports/ab_work/base.json.gz"
    for args, words in (((str(busy), str(busy)), "same report"),
                        ((str(busy), "copy.json"), "same report"),
                        ((str(busy), str(other)), "different workloads")):
        result = perfstack("merge", *args, "-o", "m.json")
        assert_one_line_error(result, 2)
        assert words in result.stderr, result.stderr
        assert not (tmp_path / "m.json").exists()
    forced = perfstack("merge", str(busy), str(other), "--force", "-o", "m.json", "-q")
    assert forced.code == 0, forced.stderr


@pytest.mark.parametrize("url", ["postgresql://u:secret@127.0.0.1:99999/x",
                                 "postgresql://u@[::1/x", "postgresql://u@127.0.0.1:abc/x"])
def test_a_malformed_history_url_is_one_line_without_its_password(perfstack, url):
    result = perfstack("history", "--db", url)
    assert_one_line_error(result, 2)
    assert "not a PostgreSQL URL" in result.stderr and "secret" not in result.stderr
    run = perfstack("run", "--plugins", "resources", "--repeat", "1", "--warmup", "0", "-q",
                    BUSY, env={"PERFSTACK_HISTORY": url})
    assert run.code == 0 and "not added to the history" in run.stderr, run.stderr


def test_a_full_stdout_and_a_path_that_is_not_utf8(perfstack, tmp_path):
    """history printing to a full device is an output error (exit 7), not the history's (10);
    a report path that is not UTF-8 (bytes a file system allows) is written, said, and kept
    in the history."""
    import os
    import subprocess
    import sys

    from tests.conftest import perfstack_env

    assert perfstack("run", "--plugins", "resources", "--repeat", "1", "--warmup", "0", "-q",
                     BUSY).code == 0
    with open("/dev/full", "w") as full:
        proc = subprocess.run([sys.executable, "-m", "perfstack", "history"], cwd=tmp_path,
                              env=perfstack_env(), stdout=full, stderr=subprocess.PIPE,
                              text=True, timeout=60)
    assert proc.returncode == 7, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr
    odd = os.fsdecode(b"r\xff.json")
    result = perfstack("run", "--plugins", "resources", "--repeat", "1", "--warmup", "0", "-q",
                       "-o", odd, BUSY)
    assert result.code == 0, result.stderr
    assert (tmp_path / odd).is_file() and "report: " in result.stderr
    listed = perfstack("history", "--format", "json")
    assert listed.code == 0 and "r\\\\xff.json" in listed.stdout, listed.stdout[-300:]


def test_analyze_whose_reader_failed_says_so_in_its_exit(perfstack, tmp_path):
    """A trace nested 100,000 deep: the reader fails; the report is written and says why, and
    the exit is 9 with one line naming the reader, not 0."""
    depth = 100_000
    (tmp_path / "deep.pt.trace.json").write_text(
        '{"traceEvents":[' + "[" * depth + "]" * depth + "]}")
    result = perfstack("analyze", "deep.pt.trace.json", "-q", "-o", "r.json")
    assert result.code == 9, result.stderr
    assert "the torch reader failed" in result.stderr and "Traceback" not in result.stderr
    report = result.report("r.json")
    assert [b["status"] for b in report["backends"] if b["name"] == "torch"] == ["failed"]


def test_analyze_names_a_rank_it_could_not_read(perfstack, tmp_path):
    """A job folder whose rank-1 trace was cut off (half a gzip): the report of rank 0 is
    written, a critical finding names the file left out, and the exit is 9, not 0. A file
    named like nothing that was read (notes.json) is not called a rank."""
    import shutil

    job = tmp_path / "job"
    job.mkdir()
    trace = ROOT / "tests/fixtures/gpu-traces/mi250_rocm/rank-0.json.gz"
    shutil.copy(trace, job / "rank-0.json.gz")
    (job / "rank-1.json.gz").write_bytes(trace.read_bytes()[:2000])
    (job / "notes.json").write_text('{"note": "not a trace"}')
    result = perfstack("analyze", "job", "-q", "-o", "r.json")
    assert result.code == 9, result.stderr
    assert "rank-1.json.gz" in result.stderr and "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 2, result.stderr  # the line, report:
    report = result.report("r.json")
    left = [f for f in report["findings"] if f["rule"] == "analyze.files-left-out"]
    assert len(left) == 1 and left[0]["severity"] == "critical"
    assert "rank-1.json.gz" in left[0]["evidence"][0] and "notes.json" not in str(left)
    shown = perfstack("show", "r.json", env={"COLUMNS": "80"})
    assert "not read" in shown.stdout
    # Only the readable rank named: a report of it, exit 0.
    alone = perfstack("analyze", "job/rank-0.json.gz", "-q", "-o", "r0.json")
    assert alone.code == 0, alone.stderr


def test_a_gzip_bomb_is_refused_in_bounded_time(perfstack, tmp_path):
    """A small .gz that decompresses to far more than any trace a profiler writes (one long
    string: 96 MiB from about 100 kB): one line, exit 4, read no further than its bound."""
    import gzip
    import time

    bomb = tmp_path / "bomb.pt.trace.json.gz"
    with gzip.open(bomb, "wb", compresslevel=9) as fh:
        fh.write(b'{"traceEvents": [{"name": "')
        block = b"x" * (1 << 20)
        for _ in range(96):
            fh.write(block)
        fh.write(b'"}]}')
    assert bomb.stat().st_size < 1 << 20
    start = time.monotonic()
    result = perfstack("analyze", str(bomb), "-q", "-o", "r.json", timeout=120)
    assert_one_line_error(result, 4)
    assert "decompresses to more than" in result.stderr
    assert time.monotonic() - start < 60
    assert not (tmp_path / "r.json").exists()


def test_garbage_inside_trace_events_is_a_failed_reader_not_a_cut_trace(perfstack, tmp_path):
    """Text that is not JSON between two events (2 MiB of it, from a 2 kB gzip): the reader
    stops at it, at once, and says so: bad input, one line, exit 4 (as a file with no
    traceEvents is), not exit 0 with a report of a trace 'cut short'."""
    import gzip

    event = ('{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 1, "dur": 2, "pid": 1, '
             '"tid": 1}')
    with gzip.open(tmp_path / "junk.pt.trace.json.gz", "wt") as fh:
        fh.write('{"traceEvents": [' + event + ", " + "x" * (2 << 20) + ", " + event + "]}")
    result = perfstack("analyze", "junk.pt.trace.json.gz", "-q", "-o", "r.json")
    assert_one_line_error(result, 4)
    assert "not JSON inside traceEvents" in result.stderr


def test_one_event_larger_than_any_trace_event_is_refused(tmp_path, monkeypatch):
    """An event still open after the bound (64 MiB; 1 MiB here) is garbage, not a longer read:
    the reader raises instead of holding it whole; one cut by the file's end is a cut trace."""
    from perfstack_plugins.torchprof import reader as trace

    monkeypatch.setattr(trace, "MAX_EVENT", 1 << 20)
    event = '{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 1, "dur": 2}'
    big = tmp_path / "big.json"
    big.write_text('{"traceEvents": [' + event + ', {"name": "' + "a" * (3 << 20) + ", "
                   + event + "]}")  # a string never closed: it runs to the file's end
    with pytest.raises(trace.TraceError, match="over 1 MiB"):
        list(trace.TraceReader(big))
    cut = tmp_path / "cut.json"
    cut.write_text('{"traceEvents": [' + event + ', {"name": "' + "a" * (1 << 19))
    reader = trace.TraceReader(cut)
    assert len(list(reader)) == 1 and reader.truncated


def test_a_fifo_output_is_written_when_read_and_refused_when_never_read(tmp_path, monkeypatch):
    """-o onto a FIFO: with a reader the report goes through it; with none, the write gives up
    after a bounded wait (5 s; 0.2 s here) with one line instead of blocking for ever, deaf to
    Ctrl-C. A device is written through, never replaced by a file."""
    import stat
    import threading

    from perfstack.report import files as reportfile

    monkeypatch.setattr(reportfile, "FIFO_WAIT_S", 0.2)
    fifo = tmp_path / "out.fifo"
    os.mkfifo(fifo)
    with pytest.raises(reportfile.OutputError, match="a FIFO that nothing reads"):
        reportfile.write_json_atomic(fifo, {"a": 1})
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()))
    reader.start()
    reportfile.write_json_atomic(fifo, {"a": 1})
    reader.join(10)
    assert got == [b'{"a":1}'] and stat.S_ISFIFO(fifo.stat().st_mode)
    reportfile.write_json_atomic(Path("/dev/null"), {"a": 1})
    assert stat.S_ISCHR(Path("/dev/null").stat().st_mode)


def test_a_signal_while_waiting_for_a_fifo_reader_ends_the_wait(tmp_path):
    """Issue 57: `run -o FIFO` with no reader, SIGTERM while the report waits for one: the
    signal was postponed (nothing half-written) and then lost: exit 7 after the whole wait,
    'a FIFO that nothing reads'. It ends the wait and the run exits as signalled, 143."""
    import signal
    import subprocess
    import sys
    import time

    from tests.conftest import perfstack_env

    fifo = tmp_path / "out.fifo"
    os.mkfifo(fifo)
    script = tmp_path / "w.py"
    script.write_text("print('hello')\n")
    proc = subprocess.Popen(
        [sys.executable, "-m", "perfstack", "run", "-q", "--repeat", "1", "--warmup", "0",
         "--plugins", "resources", "-o", str(fifo), str(script)], cwd=tmp_path,
        env=perfstack_env({"PERFSTACK_HISTORY": "off"}), stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)
    time.sleep(1.2)  # by then it waits for a reader (had it not, the signal ends it anyway)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, err
    assert "nothing reads" not in err


def _has_trace_open(pid: int) -> bool:
    """Whether ``pid`` or a child of it has a ``.json.gz`` open."""
    pids = [pid]
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and int((entry / "stat").read_text().rsplit(")", 1)[1]
                                            .split()[1]) == pid:
                pids.append(int(entry.name))
        except (OSError, IndexError, ValueError):
            continue
    for one in pids:
        try:
            if any(os.readlink(fd).endswith(".json.gz")
                   for fd in Path(f"/proc/{one}/fd").iterdir()):
                return True
        except OSError:
            continue
    return False


@pytest.mark.parametrize(("sig", "code"), [("SIGTERM", 143), ("SIGHUP", 129)])
def test_a_signal_during_analyze_stops_it(tmp_path, sig, code):
    """SIGTERM or SIGHUP while analyze reads a job's traces: it stops at once with the signal's
    code (it read on and wrote a full report, exit 0), and what it writes says it is partial.
    The signal is sent once the process or a worker of its pool has a trace open, so the test
    does not depend on the machine's speed."""
    import gzip
    import signal
    import subprocess
    import sys
    import time

    from tests.conftest import perfstack_env

    job = tmp_path / "job"
    job.mkdir()
    # Six ranks of the recorded trace, each its own (one rank in six headers is a job perfstack
    # refuses, once it has read the headers: quickly now), 150 MB of JSON: read by workers.
    raw = gzip.decompress((ROOT / "tests/fixtures/gpu-traces/a100_negq/rank-0.json.gz")
                          .read_bytes())
    for rank in range(6):
        (job / f"rank-{rank}.json.gz").write_bytes(gzip.compress(
            raw.replace(b'"rank": 0', f'"rank": {rank}'.encode(), 1), compresslevel=1))
    proc = subprocess.Popen([sys.executable, "-m", "perfstack", "analyze", "job", "-q", "-o",
                             "r.json"], cwd=tmp_path, env=perfstack_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        if _has_trace_open(proc.pid):  # it, or a worker of its pool
            break
        time.sleep(0.005)
    proc.send_signal(getattr(signal, sig))
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == code, err
    assert "Traceback" not in err
    # Stopped while its workers read (as Ctrl-C stops it): the report of the ranks read so far,
    # said to be partial, or none when no rank was read yet; never one that claims the job.
    if (tmp_path / "r.json").exists():
        import json

        assert not json.loads((tmp_path / "r.json").read_text())["run"]["complete"]
        assert "the report is of the ranks read so far" in err, err
