"""Every hook a perfstack plugin can implement. These docstrings are the plugin author's manual.

A plugin is a module (or object) with functions named like the hooks below, decorated with
``perfstack.hookimpl``, and registered through the ``perfstack`` entry-point group::

    [project.entry-points.perfstack]
    mybackend = "mypackage.perfstack_plugin"

perfstack's own backends are registered exactly that way. An implementation may accept any
subset of a hook's arguments, by name. A plugin that raises is caught: the report records its
traceback and the other plugins go on.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import pluggy

if TYPE_CHECKING:
    from perfstack.plugin.backend import Backend
    from perfstack.plugin.renderer import Renderer
    from perfstack.report import Finding, Report

#: HOOK_VERSION is bumped when a hook's signature or contract changes incompatibly. A plugin
#: says which version it was written for with a module attribute ``PERFSTACK_HOOK_VERSION =
#: 1``; perfstack loads plugins written for MIN_HOOK_VERSION (the oldest it still loads) up to
#: HOOK_VERSION and refuses others with one line. A plugin without the attribute is taken to
#: be written for the current version. (Both are kept in ``perfstack.plugin.mark``, which the
#: plugin cache reads without pluggy.)
from perfstack.plugin.mark import HOOK_VERSION as HOOK_VERSION
from perfstack.plugin.mark import MIN_HOOK_VERSION as MIN_HOOK_VERSION

hookspec = pluggy.HookspecMarker("perfstack")


@hookspec
def perfstack_backends() -> Sequence[Backend]:
    """Return the backends this plugin provides.

    Each item is an instance of a ``perfstack.Backend`` subclass: its ``name`` (unique, used by
    ``--plugins``), the ``layers`` it feeds, its ``options`` (they become
    ``--<name>-<option>`` flags), and the methods ``check``, ``launch``, ``attach`` and
    ``collect``. Importing the plugin and calling this hook must be cheap and must not import
    heavy packages such as torch: ``perfstack --help`` calls it.

    :return: a sequence of Backend instances (may be empty).
    """


@hookspec
def perfstack_environment() -> dict[str, Any]:
    """Return extra facts about this machine for the report's ``environment`` block.

    Called once per ``perfstack run`` in the driver process (never in the workload). Keys are
    merged into the environment at top level, so use one key named after your plugin, e.g.
    ``{"nvml": {"driver": "550.54", "gpus": [...]}}``. Values must be JSON-serializable.

    :return: a dict to merge, or None.
    """


@hookspec
def perfstack_findings(report: Report) -> Sequence[Finding]:
    """Return findings (what a reader should look at first) for a finished report.

    Called after every backend has been collected, with the complete report; do not modify
    it. Each finding names its ``rule``, ``layer``, ``severity`` (``info``, ``warning`` or
    ``critical``), the ``evidence`` (numbers and which backend measured them) and a
    suggested ``action``.

    :param report: the report, with every backend's rows and metrics.
    :return: a sequence of Finding (may be empty).
    """


@hookspec
def perfstack_renderers() -> Sequence[Renderer]:
    """Return output formats this plugin adds to ``perfstack show --format``.

    Each item is a ``perfstack.plugin.renderer.Renderer``: a ``name`` (the ``--format`` value), a
    ``description``, whether it writes text for a terminal or a file
    (``output_file_extension``), and ``render(report, options) -> str``. A later
    registration with the same name replaces an earlier one, so a plugin can override a
    built-in format.

    :return: a sequence of Renderer instances (may be empty).
    """


def version_problem(plugin: object) -> str | None:
    """Return why ``plugin`` cannot be loaded by this perfstack's hooks, or None.

    It declares the hook version it was written for (``PERFSTACK_HOOK_VERSION``) and names
    only hooks this perfstack has (every ``perfstack_*`` function must be a known hook).
    """
    declared = getattr(plugin, "PERFSTACK_HOOK_VERSION", HOOK_VERSION)
    low, high = MIN_HOOK_VERSION, HOOK_VERSION
    if not isinstance(declared, int) or isinstance(declared, bool):
        return f"PERFSTACK_HOOK_VERSION must be an int, got {declared!r}"
    if declared < low:
        return (f"written for perfstack hook version {declared}; this perfstack loads versions "
                f"{low} to {high}: upgrade the plugin")
    if declared > high:
        return (f"written for perfstack hook version {declared}, newer than this perfstack's "
                f"{high}: upgrade perfstack")
    known = {n for n in globals() if n.startswith("perfstack_")}
    for attr in dir(plugin):
        if attr.startswith("perfstack_") and attr not in known and callable(
                getattr(plugin, attr, None)):
            return (f"implements {attr}, which is not a hook of this perfstack (hook version "
                    f"{high}): the plugin was written for another version")
    return None
