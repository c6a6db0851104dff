"""Imports made inside the workload's own calls are named with the call that made them."""

from __future__ import annotations

from typing import Any

from perfstack_plugins.lateimports import LateImports, module_name
from perfstack_plugins.pyspy import frame_key

from perfstack.analysis import rules
from perfstack.report.files import load_report
from tests.conftest import ROOT

HOME = "/w"
SITE = "/venv/lib/python3.11/site-packages"
FRAMES: list[dict[str, Any]] = [
    {"name": "<module>", "file": f"{HOME}/train.py", "line": 1},            # 0
    {"name": "main", "file": f"{HOME}/train.py", "line": 20},               # 1
    {"name": "SGD.__init__", "file": f"{SITE}/torch/optim/sgd.py", "line": 29},  # 2
    {"name": "_find_and_load", "file": "<frozen importlib._bootstrap>", "line": 1},  # 3
    {"name": "<module>", "file": f"{SITE}/torch/_dynamo/__init__.py", "line": 1},  # 4
    {"name": "<module>", "file": f"{SITE}/sympy/__init__.py", "line": 1},  # 5
]


def _late(*samples: tuple[list[int], float]) -> LateImports:
    late = LateImports(FRAMES, lambda i: str(FRAMES[i]["file"]).startswith(HOME), frame_key)
    for stack, weight in samples:
        late.add(stack, weight)
    return late


def test_an_import_inside_a_function_is_filed_under_it_with_the_call() -> None:
    """main() calls SGD(), which imports torch._dynamo (which imports sympy): all of it is
    torch._dynamo's import, made by main's call to SGD.__init__."""
    late = _late(([0, 1, 2, 3, 4], 0.5), ([0, 1, 2, 3, 4, 3, 5], 0.25))
    assert late.of(frame_key(FRAMES[1])) == [{
        "module": "torch._dynamo", "seconds": 0.75,
        "via": {"function": "SGD.__init__", "file": f"{SITE}/torch/optim/sgd.py", "line": 29}}]


def test_top_level_imports_are_ordinary_start_up() -> None:
    late = _late(([0, 3, 4], 1.0), ([3, 4], 1.0))
    assert dict(late.by_caller) == {}


def test_an_import_statement_in_the_function_has_no_call_to_name() -> None:
    late = _late(([0, 1, 3, 5], 0.1))
    assert late.of(frame_key(FRAMES[1])) == [{"module": "sympy", "seconds": 0.1, "via": None}]


def test_module_names() -> None:
    assert module_name(f"{SITE}/torch/_dynamo/__init__.py") == "torch._dynamo"
    assert module_name("/usr/lib/python3.11/json/decoder.py") == "json.decoder"
    assert module_name("/somewhere/else/tool.py") == "tool"


def test_the_start_up_finding_names_the_late_import_and_its_caller() -> None:
    """A real run of the bundled tiny_mlp (tests/fixtures/reports/README.md): harness.main
    creates its SGD optimizer, whose constructor imports torch._dynamo, about 1 s on the
    2-CPU VM; the start-up finding says so first, with the call that made it."""
    report = load_report(ROOT / "tests/fixtures/reports/late_import.json.gz")
    [startup] = [f for f in rules.perfstack_findings(report) if f.rule == "time.startup"]
    late = startup.evidence[0]  # first: the most actionable
    assert late.startswith("import torch._dynamo inside main (harness.py:81): "), late
    assert "when it called SGD.__init__ (torch/optim/sgd.py:29)" in late
    assert "one-time cost" in startup.action
    # The slowest imports name the module whose import it was, not only its library.
    assert any(e.startswith("import torch._dynamo: ") and e.endswith(
        "(torch/_dynamo/__init__.py)") for e in startup.evidence[2:]), startup.evidence
