"""Finding and checking Python interpreters other than the one perfstack runs on.

Used by ``perfstack env`` and by backends that compare interpreters (the ``gil`` backend runs
the workload under a free-threaded build). A free-threaded build is confirmed, never assumed
from its name: it must report ``Py_GIL_DISABLED`` and ``sys._is_gil_enabled() == False`` when
started with ``PYTHON_GIL=0``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

from perfstack.records import datarecord

#: Names a free-threaded CPython installs itself under.
FREE_THREADED_NAMES = ("python3.13t", "python3.14t", "python3.15t")

_PROBE = (
    "import json, platform, sys, sysconfig; print(json.dumps({"
    "'version': platform.python_version(), 'implementation': platform.python_implementation(),"
    "'free_threaded': bool(sysconfig.get_config_var('Py_GIL_DISABLED')),"
    "'gil_enabled': getattr(sys, '_is_gil_enabled', lambda: True)(),"
    "'executable': sys.executable}))"
)


@datarecord(frozen=True)
class Interpreter:
    """A Python interpreter as it describes itself."""

    path: str
    version: str
    implementation: str
    free_threaded: bool  # built with --disable-gil
    gil_enabled: bool  # at run time, started with PYTHON_GIL=0

    @property
    def label(self) -> str:
        """A short name for tables: 'CPython 3.13.5t' for a free-threaded build."""
        return f"{self.implementation} {self.version}{'t' if self.free_threaded else ''}"


def cache_dir() -> Path:
    """Return where perfstack caches what it builds (``scripts/build-free-threaded.sh``)."""
    if "PERFSTACK_CACHE" in os.environ:
        return Path(os.environ["PERFSTACK_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "perfstack"


def describe(path: str, timeout_s: float = 30.0) -> Interpreter | None:
    """Run ``path`` once and return what it says it is, or None when it does not run."""
    env = {**os.environ, "PYTHON_GIL": "0"}
    env.pop("PYTHONPATH", None)
    try:
        proc = subprocess.run([path, "-I", "-c", _PROBE], capture_output=True, text=True,
                              timeout=timeout_s, env=env)
        data = json.loads(proc.stdout)
        return Interpreter(path, str(data["version"]), str(data["implementation"]),
                           bool(data["free_threaded"]), bool(data["gil_enabled"]))
    except (OSError, subprocess.TimeoutExpired, ValueError, KeyError, TypeError):
        return None


def free_threaded_candidates() -> list[str]:
    """Return paths that may be free-threaded interpreters: on PATH, then perfstack's cache."""
    found = [p for name in FREE_THREADED_NAMES if (p := shutil.which(name))]
    cached = cache_dir() / "python3.13t" / "bin" / "python3.13t"
    if cached.is_file():
        found.append(str(cached))
    unique: dict[str, str] = {}
    for path in found:
        unique.setdefault(os.path.realpath(path), path)
    return list(unique.values())


def find_free_threaded() -> list[Interpreter]:
    """Return the confirmed free-threaded interpreters on this machine (GIL really off)."""
    out = []
    for path in free_threaded_candidates():
        info = describe(path)
        if info is not None and info.free_threaded and not info.gil_enabled:
            out.append(info)
    return out
