"""The house's guards (issue 54): no import circle among ``perfstack/`` and ``plugins/``
(counting imports under ``TYPE_CHECKING`` and inside functions), no module over 400 lines and
no function over 80 without a line saying why, and a core that names no backend. Each guard is
also shown to fail on a fault planted in a copy of a few files."""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from tests import house
from tests.conftest import ROOT

TOPS = ("perfstack", "plugins")


def test_no_import_circle():
    assert house.circles(house.import_graph(ROOT, TOPS)) == []


def test_every_import_keeps_to_the_floors_of_the_architecture_page():
    """docs/architecture.md's table gives each room its floor; no module imports a room above
    its own (under TYPE_CHECKING and inside functions too), and every module is in a room.
    Shown to fail: a room put a floor lower than what it imports."""
    table = (ROOT / "docs" / "architecture.md").read_text()
    rooms = house.floors(table)
    assert rooms["perfstack/run/"] > rooms["perfstack/report/"], rooms
    assert house.imports_up(ROOT, TOPS, rooms) == []
    lowered = {**rooms, "perfstack/run/": 1}
    assert any(line.startswith("perfstack.run.") for line in
               house.imports_up(ROOT, TOPS, lowered))


def test_a_planted_circle_is_found_even_under_type_checking(tmp_path: Path):
    for name in ("hookspecs.py", "errors.py", "__init__.py"):
        shutil.copy(ROOT / "perfstack" / name, tmp_path / name)
    (tmp_path / "__init__.py").write_text("")
    errors = tmp_path / "errors.py"
    errors.write_text(errors.read_text() + "\nfrom typing import TYPE_CHECKING\n"
                      "if TYPE_CHECKING:\n    from pkg.hookspecs import hookspec\n")
    hookspecs = tmp_path / "hookspecs.py"
    hookspecs.write_text(hookspecs.read_text()
                         + "\n\ndef _late() -> None:\n    from pkg import errors  # noqa\n")
    package = tmp_path / "root" / "pkg"
    shutil.copytree(tmp_path, package, ignore=shutil.ignore_patterns("root"))
    assert house.circles(house.import_graph(tmp_path / "root", ["pkg"])) == [
        ["pkg.errors", "pkg.hookspecs"]]


def test_relative_imports_count(tmp_path: Path):
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "sub" / "__init__.py").write_text("from . import a\n")
    (package / "sub" / "a.py").write_text("def f():\n    from ..sub import b\n")
    (package / "sub" / "b.py").write_text("from pkg.sub import a\n")
    assert house.circles(house.import_graph(tmp_path, ["pkg"])) == [
        ["pkg.sub", "pkg.sub.a", "pkg.sub.b"]]  # importing from pkg.sub runs its __init__


def test_no_long_module_or_function_without_a_reason():
    assert house.too_long(ROOT, TOPS) == []


def test_a_planted_long_function_is_found_and_a_reason_lets_it_be(tmp_path: Path):
    body = "".join(f"    x{i} = {i}\n" for i in range(85))
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "m.py").write_text(f"def f():\n{body}")
    assert house.too_long(tmp_path, ["pkg"]) == ["pkg/m.py:1: f of 86 lines"]
    why = "# long: one table, read top to bottom\n"
    (tmp_path / "pkg" / "m.py").write_text(f"{why}def f():\n{body}")
    assert house.too_long(tmp_path, ["pkg"]) == []
    (tmp_path / "pkg" / "m.py").write_text("x = 1\n" * 401)
    assert house.too_long(tmp_path, ["pkg"]) == ["pkg/m.py:1: module of 401 lines"]


def test_backend_words_split_on_hyphens_and_flags():
    names = {"pyspy", "torch", "nvml", "py-spy", "nvidia-ml-py"}
    assert house.backend_words("run with py-spy", names, set()) == {"py-spy"}
    assert house.backend_words("use --torch-stack", names, {"torch"}) == {"torch"}
    assert house.backend_words("the torch library", names, {"torch"}) == set()
    assert house.backend_words("pip install nvidia-ml-py", names, set()) == {"nvidia-ml-py"}
    assert house.backend_words("a spy in python", names, set()) == set()


def test_a_new_pane_is_its_four_stem_files_and_one_registration_line(monkeypatch):
    """A pane named 'probe', written as its four stem modules (view, words, text and
    markdown, HTML) and added to PANES, shows in every format with nothing else changed."""
    import sys
    import types

    from perfstack.analysis import panes
    from perfstack.plugin.load import load_plugins
    from perfstack.report.files import load_report

    def module(name: str, **attrs: object) -> None:
        monkeypatch.setitem(sys.modules, name, types.ModuleType(name))
        for key, value in attrs.items():
            setattr(sys.modules[name], key, value)

    module("perfstack.analysis.panes.probe",
           view=lambda report, top, full: {"runs": len(report.run.runs)})
    module("perfstack.render.words.probe", line=lambda v: f"probe saw {v['runs']} runs")
    said = sys.modules["perfstack.render.words.probe"].line  # type: ignore[attr-defined]
    module("perfstack.render.panes.probe",
           text=lambda page, v: (page.section("Probe"), page.add("  " + said(v))),
           markdown=lambda v: ["", "### Probe", "", f"- {said(v)}"])
    plugins = load_plugins()
    html = plugins.renderers()["html"]
    home = sys.modules[type(html).__module__].__package__  # the html format's package
    module(f"{home}.panes.probe", TAB="Probe", AFTER="pane-ops",
           pane=lambda v, page: f"<p id='probe'>{said(v)}</p>" if v else None,
           overview=lambda v, page: f"<p id='probe-overview'>{said(v)}</p>",
           WITHIN="pane-kernels",
           within=lambda v, page: f"<p id='probe-within'>{len(page.report.run.runs)}</p>")
    monkeypatch.setattr(panes, "PANES", (*panes.PANES, "probe"))

    report = load_report(ROOT / "tests/fixtures/reports/v1-busy.json")
    runs = len(report.run.runs)
    options = plugins.render_options()
    for name in ("text", "markdown", "html"):
        drawn = plugins.renderers()[name].render(report, options)
        assert f"probe saw {runs} runs" in drawn, name
    page = html.render(report, options)
    tabs = page[page.index("<nav"):page.index("</nav>")]
    assert tabs.index(">Ops<") < tabs.index(">Probe<") < tabs.index(">Kernels<")

    def pane_of(marker: str) -> str:  # the id of the <main> a marker is drawn in
        start = page.rindex('<main class="pane" id="', 0, page.index(marker))
        return page[start:].split('"')[3]

    assert pane_of("id='probe'") == "pane-probe"
    assert pane_of("id='probe-overview'") == "pane-overview"
    assert pane_of(f"id='probe-within'>{runs}<") == "pane-kernels"
    # In the text the pane comes last of the panes: after the ranks', before the drill-down.
    text = plugins.renderers()["text"].render(report, options)
    assert text.index("probe saw") < text.index("Backends")


def test_a_new_command_is_one_entry(monkeypatch: pytest.MonkeyPatch,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    """A command added to ``perfstack.cli.main.COMMANDS`` (here one that counts its
    arguments) is listed by the top help and run, with nothing else changed."""
    from perfstack.cli import main

    commands = {**main.COMMANDS, "count": main.Command("builtins:len", "count the arguments",
                                                       plugins=False)}
    monkeypatch.setattr(main, "COMMANDS", commands)
    assert main.main(["count", "a", "b", "c"]) == 3
    assert main.main([]) == 0  # the top help
    assert "count: count the arguments" in " ".join(capsys.readouterr().out.split())


def test_the_plugin_apis_old_paths_give_the_same_objects() -> None:
    """The plugin API is one room (perfstack/plugin/); the paths plugins were written against
    before it (``perfstack.backend``, ``perfstack.hookspecs``, ``perfstack.hookmark``,
    ``perfstack.render.base``) still import the same objects, every public name of them."""
    import importlib

    for old, new in (("perfstack.backend", "perfstack.plugin.backend"),
                     ("perfstack.hookspecs", "perfstack.plugin.spec"),
                     ("perfstack.hookmark", "perfstack.plugin.mark"),
                     ("perfstack.render.base", "perfstack.plugin.renderer")):
        was, now = importlib.import_module(old), importlib.import_module(new)
        defined = [n for n, v in vars(now).items() if not n.startswith("_")
                   and getattr(v, "__module__", None) == new]
        assert defined, new
        for name in defined:  # every class and function of the room, at the old path too
            assert getattr(was, name) is getattr(now, name), (old, name)
        for name in [n for n in vars(was) if not n.startswith("_")]:
            assert getattr(was, name) is getattr(now, name), (old, name)
    from perfstack import Backend, hookimpl
    from perfstack.backend import Backend as OldBackend
    from perfstack.hookmark import hookimpl as old_hookimpl

    assert Backend is OldBackend and hookimpl is old_hookimpl


def test_the_backend_name_guard_is_case_blind() -> None:
    """A backend's name in any case is caught (``PySpy``, ``MEMRAY``, ``--Torch-stack``);
    the concepts spelt as such (the GIL, oneDNN) are not the backends of the same letters."""
    names = {"pyspy", "memray", "torch", "gil", "onednn"}
    assert house.backend_words("run PySpy, then MEMRAY", names, set()) == {"pyspy", "memray"}
    assert house.backend_words("pass --Torch-stack", names, {"torch"}) == {"torch"}
    assert house.backend_words("holding the GIL in oneDNN's kernels", names, set()) == set()
    assert house.backend_words("the Gil backend", names, set()) == {"gil"}


def test_docstrings_name_only_modules_and_names_that_exist() -> None:
    """A docstring's ``perfstack.x.y`` (or ``perfstack_plugins.x.y``), and the README's and
    docs/' too, is a module or a name in one: a module that moved leaves no map pointing at
    where it was (the package docstrings named a dozen; docs/plugins.md still named
    ``perfstack.render.DiffRenderer``). Shown to fail on a name that is not there."""
    assert house.stale_references(ROOT, TOPS) == []
    assert house.stale_doc_references(ROOT) == []  # the README and docs/ too
    assert house.resolves("perfstack.report.Report")
    assert house.resolves("perfstack_plugins.pyspy.sampler")
    assert not house.resolves("perfstack.render.DiffRenderer")
    assert not house.resolves("perfstack.run.rundir")


def _doc_modules(heading: str) -> list[str]:
    """The first column of the table under the line of docs/plugins.md that starts with
    ``heading``: a module or room a row."""
    lines = (ROOT / "docs" / "plugins.md").read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(heading))
    rows = []
    for line in lines[start + 1:]:
        if line.startswith("| `"):
            rows.append(line.split("`")[1])
        elif rows and not line.startswith("|"):
            break
    assert rows, heading
    return rows


#: docs/plugins.md's two lists: the stable surface (modules), and the rooms of the tool's
#: own the built-in plugins also use.
STABLE = _doc_modules("The stable surface a plugin is written against")
BUILT_IN_ROOMS = _doc_modules("The rest of `perfstack` is the tool's own")


def _outside(targets: dict[str, set[str]], rooms: list[str]) -> list[str]:
    """'module -> target' for each perfstack module imported that is neither of the stable
    surface nor in one of ``rooms``."""
    return sorted(f"{m} -> {t}" for m, found in targets.items() for t in found
                  if t.startswith("perfstack") and t not in STABLE
                  and not any(t == room or t.startswith(room + ".") for room in rooms))


def test_plugins_import_the_stable_surface_and_the_rooms_the_doc_names() -> None:
    """plugins/ imports nothing of perfstack but what docs/plugins.md names (the stable
    surface, and the tool's rooms the built-in plugins use); the example projects, written
    as a third party's, only the stable surface. Shown to fail on planted imports."""
    import ast
    import importlib

    for name in STABLE:
        importlib.import_module(name)  # each module of the surface exists
    graph = {m: t for m, t in house.import_graph(ROOT, TOPS).items() if m.startswith("plugins")}
    assert _outside(graph, BUILT_IN_ROOMS) == []
    planted = {**graph, "plugins.resources": {*graph["plugins.resources"],
                                              "perfstack.run.driver", "perfstack.history.store",
                                              "perfstack.cli.common"}}
    assert _outside(planted, BUILT_IN_ROOMS) == [
        "plugins.resources -> perfstack.cli.common", "plugins.resources -> perfstack.history.store",
        "plugins.resources -> perfstack.run.driver"]
    never = ("perfstack.run", "perfstack.cli", "perfstack.history")  # given, never imported
    assert not any(r == n or r.startswith(n + ".") for r in BUILT_IN_ROOMS for n in never)
    examples: dict[str, set[str]] = {}
    for path in sorted((ROOT / "examples").rglob("*.py")):
        found = examples.setdefault(str(path.relative_to(ROOT)), set())
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                found.add(node.module)
            elif isinstance(node, ast.Import):
                found |= {a.name for a in node.names}
    assert sum(len(f) for f in examples.values()) > 4, examples
    assert _outside(examples, []) == []
    assert _outside({"example": {"perfstack.analysis.view"}}, []) == [
        "example -> perfstack.analysis.view"]


def test_every_format_shows_the_panes_in_the_order_of_the_list():
    """The text, the markdown and the HTML page are loops over ``PANES``: on a recorded H200
    run with seven panes, each format draws them in the list's order, each pane once, after
    the answer and before the backends (the overview and the Kernels tab keep it too)."""
    from perfstack.analysis.panes import PANES, homes
    from perfstack.analysis.view import build
    from perfstack.plugin.load import load_plugins
    from perfstack.render.text.grid import Page
    from perfstack.report.files import load_report

    report = load_report(ROOT / "tests/fixtures/gpu-runs/recheck/resnet/report.json.gz")
    view = build(report, full=True)
    shown = [stem for stem in PANES if view.panes.get(stem) is not None]
    assert len(shown) >= 7, shown
    titles: dict[str, tuple[str, str]] = {}  # stem -> (text title, markdown heading)
    for stem, home in homes("perfstack.render.panes", view.panes):
        page = Page(300, False)
        home.text(page, view.panes[stem])
        heading = next(ln for ln in home.markdown(view.panes[stem]) if ln.startswith("### "))
        titles[stem] = (page.lines[0], heading)
    assert list(titles) == shown
    plugins = load_plugins()
    options = plugins.render_options()
    text = plugins.renderers()["text"].render(report, replace(options, width=300, full=True))
    markdown = plugins.renderers()["markdown"].render(report, options)
    for drawn, which in ((text, 0), (markdown, 1)):
        at = [drawn.index(titles[stem][which]) for stem in shown]
        assert at == sorted(at), (which, shown)
        assert all(drawn.count(titles[stem][which]) == 1 for stem in shown)
        assert drawn.index("Backends") > at[-1]
    page = plugins.renderers()["html"].render(report, options)
    overview = page[page.index('id="pane-overview"'):page.index('id="pane-python"')]
    ids = {"memory": 'id="memory"', "device": 'id="device"', "steps": 'id="steps"'}
    at = [overview.index(ids[stem]) for stem in shown if stem in ids]
    assert len(at) == 3 and at == sorted(at)
    kernels = page[page.index('id="pane-kernels"'):]
    at = [kernels.index(i) for i in ('id="device-k"', 'id="streams"', 'id="kernel-view"')]
    assert at == sorted(at)
