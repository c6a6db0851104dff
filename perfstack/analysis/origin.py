"""Whose code a Python frame is: the workload's own, or a library's, and how to show its path.

The report leads with the workload's own code; library frames fold into their package
(``torch``, ``importlib``, the standard library), as pyinstrument does. Paths are shown
relative to the workload's folder (``train.py:12``) or inside their package
(``torch/nn/modules/module.py:1739``), never as absolute virtual-environment paths.
"""

from __future__ import annotations

import os
import re

from perfstack.records import datarecord
from perfstack.report import Report

_PERFSTACK = os.path.dirname(os.path.abspath(__file__)).removesuffix(
    os.sep + "analysis")
_SITE = re.compile(r"[/\\](?:site|dist)-packages[/\\]")
_STDLIB = re.compile(r"[/\\]lib[/\\](?:python|pypy)\d[\d.]*t?[/\\]")
#: torch.compile's inductor writes the code it generates under its cache folder
#: (``/tmp/torchinductor_<user>/`` unless TORCHINDUCTOR_CACHE_DIR says otherwise): torch's
#: code made for the workload, not the workload's own.
_INDUCTOR = re.compile(r"[/\\](torchinductor_[^/\\]+[/\\].*)$")
#: The library the generated code is folded into.
GENERATED = "torch.compile (generated)"


@datarecord(frozen=True)
class Origin:
    """Where a frame's code comes from."""

    ours: bool  # the workload's own code
    library: str  # "" for ours; else the package ("torch"), "importlib", or "stdlib"
    path: str  # the path to show: relative to the workload's folder, or inside the package


def workload_dir(report: Report) -> str | None:
    """Return the folder of the workload's script (absolute), or the run's cwd for ``-m``."""
    command = report.run.command
    cwd = report.run.cwd or "."
    if len(command) >= 3 and command[1] == "-m":
        return os.path.normpath(cwd)
    if len(command) >= 2:
        return os.path.dirname(os.path.normpath(os.path.join(cwd, command[1])))
    return None


def origin(file: str, home: str | None) -> Origin:
    """Return the origin of a frame whose code is in ``file``; ``home`` is the workload's
    folder. Files are judged by where they live, not by their name."""
    if file.startswith("<frozen "):
        module = file[len("<frozen "):].rstrip(">")
        top = module.split(".")[0].lstrip("_") or module
        return Origin(False, "importlib" if top == "importlib" else "stdlib", file)
    if file.startswith("<"):
        return Origin(home is None, "" if home is None else "(generated)", file)
    if file.startswith(_PERFSTACK):  # perfstack's own code (the bootstrap, step markers)
        return Origin(False, "perfstack", "perfstack" + file[len(_PERFSTACK):])
    site = _SITE.search(file)
    if site:
        inside = file[site.end():]
        package = re.split(r"[/\\]", inside, maxsplit=1)[0].removesuffix(".py")
        return Origin(False, package.split(".")[0] or "site-packages", inside)
    generated = _INDUCTOR.search(file)
    if generated:
        return Origin(False, GENERATED, generated.group(1))
    stdlib = _STDLIB.search(file)
    if stdlib:
        return Origin(False, "stdlib", file[stdlib.end():])
    if not os.path.isabs(file) and home is not None:
        below = _relative_to_an_ancestor(file, home)
        if below is not None:
            return Origin(True, "", below)
        # torch's stack tracer strips the sys.path entry: "train.py" (the workload's folder
        # comes first on sys.path) or "torch/nn/modules/module.py" (a library).
        top = re.split(r"[/\\]", file, maxsplit=1)[0]
        if not os.path.exists(os.path.join(home, top)) and "/" in file.replace("\\", "/"):
            return Origin(False, top.removesuffix(".py"), file)
    absolute = os.path.normpath(file if os.path.isabs(file) or home is None
                                else os.path.join(home, file))
    if home is not None:
        relative = os.path.relpath(absolute, home)
        if not relative.startswith(".."):
            return Origin(True, "", relative)
    # Outside the workload's folder and outside any environment: code the user works on too
    # (a sibling package, an editable install), shown by its own path.
    return Origin(True, "", file)


def _relative_to_an_ancestor(file: str, home: str) -> str | None:
    """Return the path inside ``home`` of a relative ``file`` spelled from one of home's
    ancestors, as py-spy spells the script run as ``python workloads/train.py`` from the
    repository's root (``workloads/train.py`` for home ``/repo/workloads``); None otherwise."""
    parts = [p for p in re.split(r"[/\\]", os.path.normpath(file)) if p not in ("", ".")]
    tail = [p for p in re.split(r"[/\\]", os.path.normpath(home)) if p]
    for j in range(min(len(parts) - 1, len(tail)), 0, -1):
        if tail[-j:] == parts[:j]:
            return os.path.join(*parts[j:])
    return None


def short_key(function: str, file: str, line: int | None, home: str | None) -> str:
    """Return 'function (path:line)' with the path as ``origin`` shows it."""
    where = origin(file, home).path
    return f"{function} ({where}:{line})" if line else f"{function} ({where})"


def module_of(file: str) -> str | None:
    """The dotted module a library's or the standard library's file is
    ('.../site-packages/torch/_dynamo/__init__.py' -> 'torch._dynamo'); None for any other."""
    where = origin(file, None)
    if where.ours or not where.path.endswith(".py") or os.path.isabs(where.path) \
            or where.library in ("importlib", "perfstack"):
        return None
    return where.path.removesuffix(".py").removesuffix("/__init__").replace("/", ".")
