"""perfstack show --format markdown: findings first, tables, and workload names escaped."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from perfstack.report.files import read_json
from tests.conftest import Result


def test_markdown_escapes_workload_markup(markup_run: Path,
                                         perfstack: Callable[..., Result]) -> None:
    """Op and function names with <script>, pipes and markdown stay text in every cell."""
    report = read_json(markup_run)
    names = [r["name"] for layer in report["layers"].values() for r in layer]
    assert any("<script>" in n for n in names), "the workload must really produce markup names"
    shown = perfstack("show", str(markup_run), "--format", "markdown", "-o", "report.md")
    assert shown.code == 0, shown.stderr
    text = (shown.cwd / "report.md").read_text()
    assert text.startswith("## perfstack:")
    assert text.index("### Findings") < text.index("<summary>Backends") \
        < text.index("<summary>Metrics")
    assert "<script>" not in text and "&lt;script&gt;" in text
    columns = None
    for line in text.splitlines():  # an escaped pipe never splits a cell
        if not line.startswith("|"):
            columns = None
            continue
        count = line.replace("\\|", "").count("|")
        columns = columns or count
        assert count == columns, line
    assert "\\*\\*bold\\*\\*" in text
