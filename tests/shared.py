"""What the suite makes once and its xdist workers share: a real run that several tests read is
made by the first worker that needs it, and the others wait for it and read the same files; the
tests of a module with a module-scoped fixture run on one worker, which makes it once."""

from __future__ import annotations

import ast
import fcntl
import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest


def temp_factory(config: pytest.Config) -> pytest.TempPathFactory:
    """pytest's own TempPathFactory (``tmp_path_factory``), for a hook that runs outside
    any fixture."""
    factory: pytest.TempPathFactory = getattr(config, "_tmp_path_factory")  # noqa: B009
    return factory


def made_once(factory: pytest.TempPathFactory, name: str,
              make: Callable[[Path], Any]) -> Any:
    """Return ``make(folder)``, made once for the whole run: by this process when it runs
    alone, else by the first xdist worker to ask, in a folder all of them see, its result
    (JSON) kept beside it for the others. ``make`` writes only into ``folder``; a failed
    ``make`` raises in every worker that asks (each tries it again: a failure is not kept)."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return make(factory.mktemp(name))
    return made_once_in(factory.getbasetemp().parent / "shared", name, make)


def made_once_in(root: Path, name: str, make: Callable[[Path], Any]) -> Any:
    """``made_once`` in the folder ``root``, which every process that asks sees."""
    root.mkdir(exist_ok=True)
    folder, done = root / name, root / f"{name}.json"
    with open(root / f"{name}.lock", "ab") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if done.exists():
            return json.loads(done.read_text())
        shutil.rmtree(folder, ignore_errors=True)  # a failed try's leavings
        folder.mkdir()
        result = make(folder)
        tmp = done.with_suffix(".part")
        tmp.write_text(json.dumps(result))
        tmp.replace(done)
        return result


def shares_module_fixtures(path: Path) -> bool:
    """Whether a test module defines a module-scoped fixture (a real run its tests share)."""
    try:
        tree = ast.parse(path.read_text("utf-8"))
    except (OSError, SyntaxError, UnicodeDecodeError):
        return True  # not read: kept whole, as loadscope would
    return any(isinstance(kw.value, ast.Constant) and kw.value.value == "module"
               for node in ast.walk(tree) if isinstance(node, ast.Call)
               for kw in node.keywords if kw.arg == "scope")


def make_scheduler(config: pytest.Config, log: Any) -> Any:
    """pytest-xdist's loadscope, finer: the tests of a module that shares module-scoped
    fixtures go to one worker together (each fixture made once), every other test on its own
    (the workers stay busy to the end). The largest groups are handed out first."""
    from xdist.scheduler import LoadScopeScheduling

    root = config.rootpath
    shared: dict[str, bool] = {}

    class SharedFixtureScheduling(LoadScopeScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            module = nodeid.split("::", 1)[0]
            if module not in shared:
                shared[module] = shares_module_fixtures(root / module)
            return module if shared[module] else nodeid

    return SharedFixtureScheduling(config, log)
