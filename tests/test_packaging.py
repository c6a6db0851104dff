"""The wheel ships every package, and the built-in backends only through entry points."""

from __future__ import annotations

from importlib import import_module

import tomllib

from tests import house
from tests.conftest import ROOT

PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
SETUPTOOLS = PYPROJECT["tool"]["setuptools"]


def _source_dir(package: str) -> str:
    mapped = SETUPTOOLS.get("package-dir", {})
    top, _, rest = package.partition(".")
    base = mapped.get(top, top)
    return f"{base}/{rest.replace('.', '/')}" if rest else base


def test_every_package_folder_is_shipped():
    # An editable install finds unlisted sub-packages; a wheel silently drops them.
    listed = set(SETUPTOOLS["packages"])
    for top in ("perfstack", "plugins"):
        for init in (ROOT / top).rglob("__init__.py"):
            folder = init.parent.relative_to(ROOT).as_posix()
            assert any(_source_dir(p) == folder for p in listed), f"{folder} is not in packages"


def test_builtin_backends_are_entry_points_and_the_core_names_none():
    entry_points = PYPROJECT["project"]["entry-points"]["perfstack"]
    assert entry_points, "built-in backends must be registered through entry points"
    for name, target in entry_points.items():
        module = import_module(target)
        # A backend plugin provides the backend of its name; an output format, the renderer.
        provided = ([b.name for b in module.perfstack_backends()]
                    if hasattr(module, "perfstack_backends")
                    else [r.name for r in module.perfstack_renderers()])
        assert name in provided, (name, provided)
        for source in (ROOT / "perfstack").rglob("*.py"):
            assert target not in source.read_text(), f"{source} names the backend {target}"


def test_schema_is_package_data():
    assert "*.json" in SETUPTOOLS["package-data"]["perfstack_schemas"]
    assert (ROOT / "schemas" / "report.schema.json").is_file()


#: Where the core may say "torch": the torch *library* (its version and threads in the
#: environment block, the package a frame belongs to), never the torch backend.
TORCH_THE_LIBRARY = {
    "perfstack/analysis/diff/environment.py",
    "perfstack/analysis/origin.py",
    "perfstack/analysis/roofline.py",
    "perfstack/analysis/rules/__init__.py",
    "perfstack/analysis/rules/children.py",
    "perfstack/analysis/rules/threads.py",
    "perfstack/analysis/rules/time.py",
    "perfstack/analysis/view.py",
    "perfstack/history/identity.py",
    "perfstack/inprocess/devicemarks.py",
    "perfstack/inprocess/tensorkinds.py",
    "perfstack/machine/roofline/ceilingprobe.py",
    "perfstack/machine/roofline/ceilings.py",
    "perfstack/machine/cpus.py",
    "perfstack/machine/envinfo.py",
    "perfstack/machine/environment.py",
    "perfstack/inprocess/bootstrap.py",
    "perfstack/run/baseline.py",
    "perfstack/run/ceilingstep.py",
    "perfstack/run/compare/sweep.py",
    "perfstack/run/driver.py",
}


#: What the core may still say of a backend: nothing (issue 29 moved the last of it, the
#: artifact openers and the gil backend's --gil-python, into the backends). A name anywhere
#: fails the test.
KNOWN_DEBT: dict[str, set[str]] = {}


def test_the_core_code_names_no_builtin_backend():
    """No string of the core's code (comments and docstrings aside) is a built-in backend's
    name or a built-in plugin's format: what the core knows of a backend, it reads from the
    backend's declarations (primary, run_count, per_rank, options, output_file_extension)."""
    from perfstack.plugin.load import load_plugins
    from perfstack.plugin.manager import CORE_PLUGINS


    plugins = load_plugins()
    builtin = {name for name, e in plugins.backends()[0].items()
               if (e.package or "").startswith("perfstack ")}
    core_formats = {name for answer in plugins.call_each("perfstack_renderers")
                    if answer.plugin in CORE_PLUGINS for name in
                    (r.name for r in answer.result or ())}
    names = builtin | (set(plugins.renderers()) - core_formats)
    assert {"torch", "pyspy", "perftop", "html"} <= names, names
    # Words inside a string count too ("pyspy and perftop do"), for the names that are not
    # also plain words of the core's own (a resource, perf's events, an html page, the torch
    # library, where TORCH_THE_LIBRARY allows it).
    packages = {p for e in plugins.backends()[0].values() for p in e.backend.packages}
    assert {"py-spy", "nvidia-ml-py"} <= packages, packages
    plain = {"torch", "resources", "perf", "html"}
    hits = []
    for source in sorted((ROOT / "perfstack").rglob("*.py")):
        where = source.relative_to(ROOT).as_posix()
        for line, text in house.string_constants(source):
            said = house.backend_words(text, names | packages, plain)
            if text.lower() in names and text not in house.CONCEPTS and not (
                    text.lower() == "torch" and where in TORCH_THE_LIBRARY):
                said.add(text.lower())
            said -= KNOWN_DEBT.get(where, set())
            if said or any(f"--plugins {n}" in text or f"({n} does" in text or f"({n})" in text
                           for n in names - {"torch"}):
                hits.append(f"{where}:{line}: {text[:60]!r}")
    assert hits == [], hits


#: Backend names that are also words of the page's own: the torch library and its compiler's
#: parts ("dynamo's tracing", a phase of torch.compile), resources, perf's events.
PAGE_WORDS = {"torch", "dynamo", "resources", "perf"}


def test_the_html_plugin_names_no_other_backend():
    """The HTML page words its hints from the installed backends' declarations, as the text
    does: no string of it names another plugin's backend, tool or flag."""
    from perfstack.plugin.load import load_plugins

    plugins = load_plugins()
    names = set(plugins.backends()[0])
    packages = {p for e in plugins.backends()[0].values() for p in e.backend.packages}
    hits = [f"{source.name}:{line}: {text[:60]!r}"
            for source in sorted((ROOT / "plugins" / "htmlreport").rglob("*.py"))
            for line, text in house.string_constants(source)
            if house.backend_words(text, names | packages, PAGE_WORDS)]
    assert hits == [], hits


def test_every_public_name_resolves():
    """Each name of ``perfstack.__all__`` is there (the lazy ones pointed at a module that no
    longer defined them once, ``perfstack.Renderer`` after the renderers' contract moved)."""
    import perfstack

    missing = [name for name in perfstack.__all__ if not hasattr(perfstack, name)]
    assert missing == []
    assert perfstack.Renderer.__module__ == "perfstack.plugin.renderer"
