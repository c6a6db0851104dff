"""Every hook is documented and tested, as datasette insists for its own hooks."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest

from perfstack.plugin import spec as hookspecs

HOOKS = sorted(name for name in dir(hookspecs) if name.startswith("perfstack_"))
TESTS = Path(__file__).parent


def test_there_are_hooks():
    assert {"perfstack_backends", "perfstack_findings", "perfstack_renderers",
            "perfstack_environment"} <= set(HOOKS)


@pytest.mark.parametrize("hook", HOOKS)
def test_hook_is_documented(hook):
    doc = inspect.getdoc(getattr(hookspecs, hook)) or ""
    assert len(doc.split()) >= 25, f"{hook} needs a docstring that explains it"
    assert ":return:" in doc, f"{hook}'s docstring must state its return contract"
    params = inspect.signature(getattr(hookspecs, hook)).parameters
    for param in params:
        assert f":param {param}:" in doc, f"{hook} does not document its parameter {param}"


@pytest.mark.parametrize("hook", HOOKS)
def test_hook_has_a_test(hook):
    # A hook is tested when a test plugin implements it, or a test calls it.
    sources = [p.read_text() for p in TESTS.rglob("*.py") if p.name != "test_hookspecs.py"]
    assert any(re.search(rf"\b{hook}\b", text) for text in sources), f"{hook} has no test"


def test_backend_protocol_is_documented():
    from perfstack.plugin.backend import Backend

    for method in ("check", "launch", "attach", "collect"):
        assert inspect.getdoc(getattr(Backend, method)), method


def test_plugin_guide_matches_the_hookspecs():
    """docs/plugins.md carries the hook reference generated from these docstrings, verbatim."""
    from perfstack.plugin.hookdoc import hook_reference

    guide = (Path(__file__).parent.parent / "docs" / "plugins.md").read_text()
    assert hook_reference() in guide, "run: python -m perfstack.plugin.hookdoc --write"
