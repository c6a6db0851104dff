"""Every example in the README and in each command's --help runs.

``run``, ``ab`` and ``sweep`` examples run with ``--dry-run`` (arguments parsed, files, modules,
git revisions and backends checked, nothing run: a real run of each would take minutes, and
the other tests run every command for real); the others run as written, on a real report. The
example's own file names are stand-ins, mapped to real files here.
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, WORKLOADS, Result, perfstack_env, perfstack_in

#: The README's example commands: indented lines that start with 'perfstack ' and a command
#: (not a report's 'perfstack 0.1.0', wrapped onto a line of its own) and are not the synopsis
#: (which has [optional] parts).
EXAMPLES = [
    line.strip().split("  #")[0].strip()
    for line in (ROOT / "README.md").read_text().splitlines()
    if re.match(r"    perfstack [a-z-]", line) and not re.search(r"[\[(]|\.\.\.", line)
    and line.strip() != "perfstack --version"
]
DRY = ("run", "ab", "sweep")


def _help_examples() -> list[str]:
    out = []
    for command in ("run", "show", "diff", "ab", "sweep", "validate", "env"):
        proc = subprocess.run([sys.executable, "-m", "perfstack", command, "--help"],
                              capture_output=True, text=True, env=perfstack_env(), cwd=ROOT,
                              timeout=60)
        assert proc.returncode == 0, proc.stderr
        text = re.sub(r"\s+", " ", proc.stdout)
        found = re.search(r"examples?: (.*)$", text)
        if found:
            out += [e.strip() for e in found[1].split(" | ")]
    return out


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder where the examples' stand-in names are real: scripts (in a git repository
    with a main branch), two reports of one workload, and the bundled workloads."""
    here = tmp_path_factory.mktemp("readme")
    for name in ("workload.py", "my.py", "train.py", "old.py", "new.py"):
        shutil.copy(WORKLOADS / "busy.py", here / name)
    shutil.copytree(ROOT / "workloads", here / "workloads")
    (here / "traces").mkdir()  # the folder of recorded traces the analyze examples read
    shutil.copy(ROOT / "tests/fixtures/gpu-traces/a100_nccl/rank-0.json.gz",
                here / "traces" / "rank-0.json.gz")
    git = ["git", "-C", str(here), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q", "-b", "main"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "x"], check=True)
    for name in ("base.json", "new.json"):  # as 'perfstack run' writes them: .../latest too
        proc = subprocess.run([sys.executable, "-m", "perfstack", "run", "-q", "--repeat", "2",
                               "--warmup", "0", "--plugins", "resources,pyspy", "workload.py"],
                              cwd=here, env=perfstack_env(), capture_output=True, text=True,
                              timeout=300)
        assert proc.returncode == 0, proc.stderr[-2000:]
        shutil.copy(here / ".perfstack/runs/latest/report.json", here / name)
    # report.json with its run folder's artifacts beside it, as a run writes them (the
    # Perfetto example reads them: a copy of the report alone exports no event)
    shutil.copytree(here / ".perfstack/runs/latest", here, dirs_exist_ok=True)
    return here


def _runnable(example: str) -> list[str]:
    words = shlex.split(example.replace("~/py313t/bin/python3.13t", sys.executable))
    assert words[0] == "perfstack", example
    words = words[1:]
    if words[0] in DRY:
        at = words.index("--") if "--" in words else len(words)
        words = [*words[:at], "--dry-run", *words[at:]]
    return words


def _run(sandbox: Path, example: str) -> Result:
    return perfstack_in(sandbox, *_runnable(example), timeout=300)


def test_the_readme_has_examples() -> None:
    assert len(EXAMPLES) >= 10, EXAMPLES
    assert any(e.startswith("perfstack show") for e in EXAMPLES)


@pytest.mark.parametrize("example", EXAMPLES)
def test_readme_example_runs(sandbox: Path, example: str) -> None:
    proc = _run(sandbox, example)
    allowed = (0, 1) if "--fail-on-regression" in example else (0,)
    assert proc.code in allowed, (example, proc.stdout[-1000:], proc.stderr[-2000:])
    assert "Traceback" not in proc.stderr
    if example.split()[1] in DRY:
        assert "would" in proc.stdout, proc.stdout


def test_help_examples_run(sandbox: Path) -> None:
    examples = _help_examples()
    assert len(examples) >= 4, examples
    for example in examples:
        proc = _run(sandbox, example)
        allowed = (0, 1) if "--fail-on-regression" in example else (0,)
        assert proc.code in allowed, (example, proc.stderr[-2000:])


def test_a_dry_run_checks_what_a_run_would_need_and_runs_nothing(sandbox: Path) -> None:
    runs = sandbox / ".perfstack/runs"
    before = sorted(p.name for p in runs.iterdir()) if runs.exists() else []
    proc = _run(sandbox, "perfstack run --plugins resources missing.py")
    assert proc.code == 3 and "missing.py: no such file" in proc.stderr, proc.stderr
    proc = _run(sandbox, "perfstack ab --rev main --rev nosuchrev train.py")
    assert proc.code == 2 and "nosuchrev" in proc.stderr, proc.stderr
    proc = _run(sandbox, "perfstack run --plugins resources,pyspy workload.py -- --steps 3")
    assert proc.code == 0, proc.stderr
    assert proc.stdout.splitlines()[:4] == [
        "perfstack would run: python workload.py --steps 3",
        "  pyspy: one run, first: the answer comes after it",
        "  warm-up: 1 run(s), not measured", "  baseline: 3 run(s) with no profiler"]
    # Each backend's runs, as it declared them (py-spy's GIL pass has a run of its own).
    assert "  resources: no run of its own (reads the baseline runs)" in proc.stdout
    assert "  pyspy: one run" in proc.stdout
    again = _run(sandbox, "perfstack run --plugins pyspy --pyspy-gil-run workload.py")
    assert "  pyspy: 2 runs" in again.stdout, again.stdout + again.stderr
    after = sorted(p.name for p in runs.iterdir()) if runs.exists() else []
    assert after == before  # no run folder, no report


def test_run_help_names_no_internals_and_gives_defaults() -> None:
    proc = subprocess.run([sys.executable, "-m", "perfstack", "run", "--help"],
                          capture_output=True, text=True, env=perfstack_env(), cwd=ROOT,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "backend_opt" not in proc.stdout.lower() and "::" not in proc.stdout
    text = re.sub(r"\s+", " ", proc.stdout)
    assert "--pyspy-rate RATE samples per second (default: 250)" in text, text
    assert "e.g. 100% of 2 cores" in text  # a switch's help may hold a per cent sign
