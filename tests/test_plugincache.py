"""Reading a report loads only the plugins it needs, from a plugin cache that is never stale.

Each test has a cache folder of its own (PERFSTACK_CACHE_DIR) and runs the real command line.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from perfstack.plugin.cache import Manifest, Provided
from tests.conftest import ROOT, perfstack_env

PLUGIN = '''
from perfstack import hookimpl
from perfstack.plugin.renderer import Renderer


class Loud(Renderer):
    name = "{name}"

    def render(self, report, options):
        return "LOUD " + report.run.command[0] + "\\n"


@hookimpl
def perfstack_renderers():
    return [Loud()]
'''


def _cli(cwd: Path, *args: str, importtime: bool = False) -> subprocess.CompletedProcess[str]:
    env = perfstack_env({"PERFSTACK_CACHE_DIR": str(cwd / "cache"),
                         "PYTHONPATH": f"{ROOT}{os.pathsep}{cwd / 'lib'}"})
    flags = ["-X", "importtime"] if importtime else []
    return subprocess.run([sys.executable, *flags, "-m", "perfstack", *args], cwd=cwd,
                          env=env, capture_output=True, text=True, timeout=120)


def _imported(stderr: str) -> set[str]:
    return {line.rsplit("|", 1)[1].strip() for line in stderr.splitlines()
            if line.startswith("import time:") and "|" in line}


@pytest.fixture
def work(tmp_path: Path, tiny_report: Path) -> Path:
    (tmp_path / "lib").mkdir()
    (tmp_path / "report.json").write_bytes(tiny_report.read_bytes())
    return tmp_path


def test_show_with_a_valid_cache_imports_no_plugin_and_prints_the_same(work: Path) -> None:
    first = _cli(work, "show", "report.json")  # no cache yet: every plugin, then the cache
    assert first.returncode == 0, first.stderr
    assert list((work / "cache").glob("plugins-*.json"))
    second = _cli(work, "show", "report.json", importtime=True)
    assert second.returncode == 0, second.stderr
    assert second.stdout == first.stdout
    assert not [m for m in _imported(second.stderr) if m.startswith("perfstack_plugins")]
    # A format a plugin provides loads the plugins; --format's choices come from the cache.
    html = _cli(work, "show", "report.json", "--format", "html", "-o", "r.html")
    assert html.returncode == 0, html.stderr
    assert "<html" in (work / "r.html").read_text()
    bad = _cli(work, "show", "report.json", "--format", "nope")
    assert bad.returncode == 2 and "html" in bad.stderr  # the choices are listed
    # diff, too, reads its formats from the cache.
    same = _cli(work, "diff", "report.json", "report.json", importtime=True)
    assert same.returncode == 0, same.stderr
    assert not [m for m in _imported(same.stderr) if m.startswith("perfstack_plugins")]


def test_a_plugin_that_replaces_a_core_format_is_loaded_for_it(work: Path) -> None:
    (work / "lib/loud.py").write_text(PLUGIN.format(name="text"))
    for _ in range(2):  # without the cache, then with it
        shown = _cli(work, "-p", "loud", "show", "report.json")
        assert shown.returncode == 0, shown.stderr
        assert shown.stdout.startswith("LOUD "), shown.stdout[:200]


def test_an_edited_plugin_is_seen_at_once(work: Path) -> None:
    module = work / "lib/loud.py"
    module.write_text(PLUGIN.format(name="shout"))
    assert _cli(work, "-p", "loud", "show", "report.json", "--format", "shout").returncode == 0
    time.sleep(0.01)  # a new modification time, even on a coarse clock
    module.write_text(PLUGIN.format(name="yell"))
    os.utime(module, ns=(time.time_ns(), time.time_ns() + 10**9))
    renamed = _cli(work, "-p", "loud", "show", "report.json", "--format", "yell")
    assert renamed.returncode == 0, renamed.stderr
    assert renamed.stdout.startswith("LOUD ")
    assert _cli(work, "-p", "loud", "show", "report.json", "--format", "shout").returncode == 2


def test_a_broken_cache_is_ignored_and_written_again(work: Path) -> None:
    assert _cli(work, "show", "report.json").returncode == 0
    (cache,) = (work / "cache").glob("plugins-*.json")
    cache.write_text('{"key": [1, ')
    again = _cli(work, "show", "report.json")
    assert again.returncode == 0 and "Where the time goes" in again.stdout, again.stderr
    assert json.loads(cache.read_text())["plugins"]


def test_an_unwritable_cache_folder_only_costs_time(work: Path) -> None:
    (work / "cache").write_text("a file where the folder would be")
    shown = _cli(work, "show", "report.json")
    assert shown.returncode == 0 and not shown.stderr.strip(), shown.stderr


def test_a_later_plugins_renderer_wins() -> None:
    manifest = Manifest([Provided("perfstack.render.text", ["text"]),
                         Provided("loud", ["text", "loud"], ["loud"],
                                  {"strace": ["kernel"]}),
                         Provided("other", [], [], {"perf": ["hardware", "kernel"]})])
    assert manifest.renderer_provider("text") == "loud"
    assert manifest.renderer_provider("markdown") is None
    assert manifest.renderer_names() == ["loud", "text"]
    assert manifest.renderer_names(diffs=True) == ["loud"]
    assert manifest.layer_providers() == {"hardware": ["perf"], "kernel": ["perf", "strace"]}


def test_the_cache_keeps_a_few_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """One file per interpreter and plugin choices, the oldest pruned; the current folder
    (``python -m`` puts it first on sys.path) is no part of the file's name."""
    from perfstack.cachedir import CACHE_ENV
    from perfstack.plugin import cache as plugincache

    monkeypatch.setenv(CACHE_ENV, str(tmp_path))
    manifest = Manifest([Provided("perfstack.render.text", ["text"])])
    for n in range(plugincache.KEEP + 3):
        plugincache.write({"skip": [f"p{n}"]}, manifest)
    assert len(list(tmp_path.glob("plugins-*.json"))) == plugincache.KEEP
    assert plugincache.read({"skip": [f"p{plugincache.KEEP + 2}"]}) is not None
    monkeypatch.syspath_prepend(str(tmp_path / "elsewhere"))
    name = plugincache.cache_file({"skip": []})
    monkeypatch.setattr(sys, "path", [str(tmp_path / "another"), *sys.path[1:]])
    assert plugincache.cache_file({"skip": []}) == name
