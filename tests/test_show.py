"""perfstack show and validate on real reports."""

from __future__ import annotations

import pytest

from perfstack.report import SCHEMA_VERSION
from tests.conftest import WORKLOADS

ONCE = ("--repeat", "1", "--warmup", "0")


@pytest.fixture
def ran(perfstack):
    result = perfstack("-p", "tests.testplugins.probe", "run", "-q", *ONCE,
                       "--plugins", "probe,resources", str(WORKLOADS / "busy.py"))
    assert result.code == 0, result.stderr
    return result


def test_show_defaults_to_the_latest_run(perfstack, ran):
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


def test_show_to_a_file_and_top(perfstack, ran, tmp_path):
    result = perfstack("show", ".perfstack/runs/latest/report.json", "--top", "2", "--full",
                       "-o", "out.txt")
    assert result.code == 0, result.stderr
    text = (tmp_path / "out.txt").read_text()
    assert "from resources (10 rows)" in text
    hardware = text[text.index("Hardware:"):text.index("Backends")]
    assert "user CPU time" in hardware and "peak resident memory" not in hardware


def test_a_plugin_adds_a_format(perfstack, ran):
    result = perfstack("-p", "tests.testplugins.keys_renderer", "show", "--format", "keys")
    assert result.code == 0, result.stderr
    assert "hardware\trusage.user_s" in result.stdout.splitlines()
    # Without the plugin the format does not exist: a usage error, not a crash.
    assert perfstack("show", "--format", "keys").code == 2


def test_validate(perfstack, ran):
    result = perfstack("validate", ".perfstack/runs/latest/report.json")
    assert result.code == 0, result.stderr
    assert f"valid perfstack/report v{SCHEMA_VERSION}" in result.stdout
