"""Call a function right after a module is first imported, without importing it: how code
that runs inside the workload (the bootstrap, an in-process hook) reaches into a library the
workload may or may not use, at no cost when it does not. Standard library only."""

from __future__ import annotations

import contextlib
import importlib.util
import sys
from collections.abc import Callable
from typing import Any


class AfterImport:
    """A one-shot import hook: calls ``then(module)`` right after ``name`` is first imported.
    Insert it at the front of ``sys.meta_path`` (``when_imported`` does)."""

    def __init__(self, name: str, then: Callable[[Any], None]) -> None:
        self.name, self.then = name, then

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        """Find the module as the other finders would, and wrap its loader."""
        if fullname != self.name:
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(fullname)
        loader = getattr(spec, "loader", None)
        if spec is None or loader is None or not hasattr(loader, "exec_module"):
            return spec
        original = loader.exec_module

        def exec_module(module: Any) -> None:
            original(module)
            with contextlib.suppress(Exception):  # the workload runs even if it cannot be set
                self.then(module)

        loader.exec_module = exec_module
        return spec


def when_imported(name: str, then: Callable[[Any], None]) -> None:
    """Call ``then(module)`` once ``name`` is imported: now if it already is, else right after
    its first import. A ``then`` that raises is ignored: the workload runs without it."""
    module = sys.modules.get(name)
    if module is not None:
        with contextlib.suppress(Exception):
            then(module)
        return
    sys.meta_path.insert(0, AfterImport(name, then))
