"""perfstack show and validate on real reports."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from perfstack.report import SCHEMA_VERSION, Layer
from tests.conftest import ROOT, WORKLOADS, Result, perfstack_env, perfstack_in

ONCE = ("--repeat", "1", "--warmup", "0")


@pytest.fixture(scope="module")
def ran(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One real run in a folder of its own, read by the tests below; returns the folder."""
    folder = tmp_path_factory.mktemp("show")
    result = perfstack_in(folder, "-p", "tests.testplugins.probe", "run", "-q", *ONCE,
                          "--plugins", "probe,resources", str(WORKLOADS / "busy.py"))
    assert result.code == 0, result.stderr
    return folder


@pytest.fixture
def perfstack(ran: Path) -> Callable[..., Result]:
    """``perfstack ARGS`` in the shared run's folder."""
    def run(*args: str, env: dict[str, str] | None = None) -> Result:
        return perfstack_in(ran, *args, env=env)
    return run


def test_show_defaults_to_the_latest_run(perfstack):
    result = perfstack("show")
    assert result.code == 0, result.stderr
    text = result.stdout
    # What ran, the answer, the findings, the budget, the layers, the backends, the metrics.
    order = ["$ python", "Answer", "Findings", "Where the time goes", "Layers", "Backends",
             "Metrics"]
    positions = [text.index(word) for word in order]
    assert positions == sorted(positions)
    assert "busy.py" in text and "every run exited 0" in text
    # The single baseline is called out: its noise is unknown.
    assert "one baseline run" in text
    # An empty layer names what would fill it (nothing installed feeds framework yet).
    layers = text[text.index("Layers"):text.index("Backends")]
    framework = next(line for line in layers.splitlines() if "Framework" in line)
    assert "not measured" in framework and "--plugins" in framework
    assert "\x1b[" not in text  # no colour codes when stdout is not a terminal


def test_show_to_a_file_and_top(perfstack, ran):
    result = perfstack("show", ".perfstack/runs/latest/report.json", "--top", "2", "--full",
                       "-o", "out.txt")
    assert result.code == 0, result.stderr
    text = (ran / "out.txt").read_text()
    assert "from resources (11 rows)" in text
    hardware = text[text.index("Hardware:"):text.index("Backends")]
    assert "user CPU time" in hardware and "peak resident memory" not in hardware


def test_a_raw_output_says_how_it_opens_as_its_backend_declares(perfstack):
    """The probe plugin declares how its file opens (``Backend.openers``): shown beside it
    where the plugin is installed; where it is not, the file is listed with no opener."""
    shown = perfstack("-p", "tests.testplugins.probe", "show")
    assert shown.code == 0, shown.stderr
    line = next(ln for ln in shown.stdout.splitlines() if "probe inprocess:" in ln)
    assert line.endswith("inprocess.json  (any JSON viewer)"), line
    plain = perfstack("show")
    line = next(ln for ln in plain.stdout.splitlines() if "probe inprocess:" in ln)
    assert line.endswith("inprocess.json"), line


def test_a_plugin_adds_a_format(perfstack):
    result = perfstack("-p", "tests.testplugins.keys_renderer", "show", "--format", "keys")
    assert result.code == 0, result.stderr
    assert "hardware\trusage.user_s" in result.stdout.splitlines()
    # Without the plugin the format does not exist: a usage error, not a crash.
    assert perfstack("show", "--format", "keys").code == 2


def test_validate(perfstack):
    result = perfstack("validate", ".perfstack/runs/latest/report.json")
    assert result.code == 0, result.stderr
    assert f"valid perfstack/report v{SCHEMA_VERSION}" in result.stdout


def test_a_report_perfstack_wrote_is_read_back_without_the_validator(tmp_path: Path) -> None:
    """save_report checks a small report against the schema as it writes it and remembers its
    bytes; reading those exact bytes back skips the validator (its import alone is ~20 ms of
    show). Any change to the file, or validate, checks it again."""
    import json


    cache = tmp_path / "cache"
    env = {"PERFSTACK_CACHE_DIR": str(cache)}
    wrote = perfstack_in(tmp_path, "-p", "tests.testplugins.probe", "run", "-q", *ONCE, "--plugins",
                      "probe,resources", "-o", "mine.json", str(WORKLOADS / "busy.py"), env=env)
    assert wrote.code == 0, wrote.stderr
    [memo] = cache.glob(f"checked-reports-v{SCHEMA_VERSION}-*.txt")
    assert len(memo.read_text().split()) == 1
    probe = ("import sys; from pathlib import Path; from perfstack.report.files import "
             "load_report; load_report(Path(sys.argv[1])); print('jsonschema_rs' in sys.modules,"
             " 'jsonschema' in sys.modules)")

    def validator_loaded(name: str) -> bool:
        out = subprocess.run([sys.executable, "-c", probe, name], cwd=wrote.cwd, check=True,
                             env=perfstack_env(env), capture_output=True, text=True).stdout
        return "True" in out

    assert not validator_loaded("mine.json")
    data = json.loads((wrote.cwd / "mine.json").read_text())
    data["run"]["complete"] = "yes"  # the wrong type: the schema refuses it
    (wrote.cwd / "edited.json").write_text(json.dumps(data, indent=1))
    edited = perfstack_in(tmp_path, "show", "edited.json", env=env)
    assert edited.code == 4 and "does not match the report schema" in edited.stderr
    (wrote.cwd / "copy.json").write_bytes((wrote.cwd / "mine.json").read_bytes() + b" ")
    assert validator_loaded("copy.json")
    assert perfstack_in(tmp_path, "validate", "mine.json", env=env).code == 0
    # A cache folder that cannot be written: the report is still written, and checked on read.
    blocked = tmp_path / "blocked"
    blocked.write_text("a file where the folder would be")
    again = perfstack_in(tmp_path, "-p", "tests.testplugins.probe", "run", "-q", *ONCE, "--plugins",
                      "probe,resources", "-o", "other.json", str(WORKLOADS / "busy.py"),
                      env={"PERFSTACK_CACHE_DIR": str(blocked)})
    assert again.code == 0, again.stderr
    shown = perfstack_in(tmp_path, "show", "other.json",
                         env={"PERFSTACK_CACHE_DIR": str(blocked)})
    assert shown.code == 0, shown.stderr


def test_a_control_character_in_a_name_is_escaped_before_it_is_measured(tmp_path: Path) -> None:
    """py-spy can read a function's name half-written (a NUL inside it, seen on a real run of
    the README's workload): the tables and findings escape it as \\x00 and are laid out on
    the escaped text, so no line passes the terminal's width."""
    from perfstack.report.files import load_report, save_report

    report = load_report(ROOT / "tests/fixtures/reports/rules/tiny_ops.json.gz")
    for i, row in enumerate(report.layers[Layer.PYTHON][:5]):
        if "function" in row.attrs:  # as py-spy's frame gave it: the file half-written
            row.attrs["function"] = f"_return_type{i}"
            row.attrs["file"] = "InvokeQuant.__init__\x00cision"
    save_report(report, tmp_path / "r.json")
    for columns in ("80", "60"):
        shown = perfstack_in(tmp_path, "show", "--full", "r.json", env={"COLUMNS": columns})
        assert shown.code == 0, shown.stderr
        assert "\x00" not in shown.stdout and "\\x00" in shown.stdout
        assert max(map(len, shown.stdout.splitlines())) <= int(columns)
