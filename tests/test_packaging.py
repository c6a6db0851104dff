"""The wheel ships every package, and the built-in backends only through entry points."""

from __future__ import annotations

from importlib import import_module

import tomllib

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
