"""Finding and loading plugins.

Plugins come from the ``perfstack`` entry-point group; perfstack's own backends are found the
same way. Loading never stops at a broken plugin: its error is kept and shown by
``perfstack plugins`` and in the report.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from perfstack.errors import PluginModuleNotFound
from perfstack.plugin.calls import call
from perfstack.plugin.manager import CORE_PLUGINS, PluginInfo, Plugins

if TYPE_CHECKING:
    from pluggy import PluginManager

ENTRY_POINT_GROUP = "perfstack"
#: Set (to any non-empty value) to load no plugin from entry points, as pytest's
#: PYTEST_DISABLE_PLUGIN_AUTOLOAD does; plugins can still be given explicitly.
AUTOLOAD_ENV = "PERFSTACK_DISABLE_PLUGIN_AUTOLOAD"
#: Comma-separated plugin names to disable, like repeating ``-p no:NAME``.
DISABLE_ENV = "PERFSTACK_DISABLE_PLUGINS"
#: Comma-separated module names to load as plugins, like repeating ``-p MODULE``.
PLUGINS_ENV = "PERFSTACK_PLUGINS"


def disabled_from_env() -> set[str]:
    """Return the plugin names disabled by the PERFSTACK_DISABLE_PLUGINS variable."""
    return {n.strip() for n in os.environ.get(DISABLE_ENV, "").split(",") if n.strip()}


def modules_from_env() -> list[str]:
    """Return the plugin modules named by the PERFSTACK_PLUGINS variable."""
    return [n.strip() for n in os.environ.get(PLUGINS_ENV, "").split(",") if n.strip()]


def load_plugins(
    disabled: Iterable[str] = (),
    modules: Sequence[str] = (),
    extra: Sequence[tuple[str, object]] = (),
    autoload: bool | None = None,
    defer: bool = False,
) -> Plugins:
    """Return a fresh plugin manager with the core plugins, entry-point plugins and the rest.

    :param disabled: plugin (entry-point) names not to load, as with ``-p no:NAME``.
    :param modules: modules to import and register by name, as with ``-p MODULE``; their
        plugin name is the module name. PERFSTACK_PLUGINS adds more.
    :param extra: ``(name, plugin)`` pairs registered last (tests use it).
    :param autoload: load entry points; default: unless PERFSTACK_DISABLE_PLUGIN_AUTOLOAD is set.
    :param defer: load only the core's plugins now, the rest when first needed (see
        ``Plugins``); for commands that read reports.
    """
    import importlib

    infos: dict[str, PluginInfo] = {name: PluginInfo(name, None) for name in CORE_PLUGINS}
    skip = set(disabled) | disabled_from_env()

    def start() -> PluginManager:
        from perfstack.plugin.host import new_host

        host = new_host()
        for name in CORE_PLUGINS:
            host.register(importlib.import_module(name), name=name)
        return host
    if autoload is None:
        autoload = not os.environ.get(AUTOLOAD_ENV)
    named = [*modules_from_env(), *modules]
    for module in modules:  # named on the command line: a module that is not there is an error
        if module not in skip and _missing(module):
            raise PluginModuleNotFound(module)

    def load_rest() -> None:
        pm = plugins.pm
        if autoload:
            from importlib.metadata import entry_points

            # (a distribution's metadata parsed once, not once per entry point: perfstack's
            # own backends are a dozen entry points of one package)
            packages: dict[int, str] = {}
            for ep in entry_points(group=ENTRY_POINT_GROUP):
                if ep.name in skip or ep.name in infos:
                    continue
                dist = getattr(ep, "dist", None)
                if dist is not None and id(dist) not in packages:
                    packages[id(dist)] = f"{dist.name} {dist.version}"
                package = packages.get(id(dist)) if dist is not None else None
                infos[ep.name] = _register(pm, ep.name, package, ep.load)
        for module in named:
            if module not in skip and module not in infos:
                infos[module] = _register(pm, module, None,
                                          lambda m=module: importlib.import_module(m))
        for name, plugin in extra:
            if name not in skip:
                infos[name] = _register(pm, name, None, lambda p=plugin: p)

    # The core's own plugin list is in the key too: a core format added (or removed) by an
    # upgrade is seen at once, not after the next command that loads everything.
    choices = None if extra else {"autoload": autoload, "skip": sorted(skip),
                                  "modules": named, "core": list(CORE_PLUGINS)}
    plugins = Plugins(start, infos, pending=load_rest, choices=choices)
    if not defer:
        plugins.load_all()
    return plugins


def _missing(module: str) -> bool:
    """Whether ``module`` cannot be found at all (as opposed to failing as it imports)."""
    import importlib.util

    try:
        return importlib.util.find_spec(module) is None
    except (ImportError, ValueError):  # its parent package is missing, or a bad name
        return True


def _register(pm: PluginManager, name: str, package: str | None, load: Any) -> PluginInfo:
    from perfstack.plugin import spec as hookspecs
    from perfstack.plugin.host import PluginValidationError

    loaded = call(load, "load", limit=-3)
    if not loaded.ok:
        return PluginInfo(name, package, error=(loaded.error or "").rstrip())
    plugin = loaded.value
    problem = hookspecs.version_problem(plugin)
    if problem is not None:
        return PluginInfo(name, package, error=f"plugin {name}: {problem}")
    try:
        pm.register(plugin, name=name)
    except PluginValidationError as exc:
        # An implementation asks for an argument the hook does not pass: another version.
        return PluginInfo(name, package, error=f"plugin {name}: {exc} (written for another "
                          f"perfstack hook version; this one is {hookspecs.HOOK_VERSION})")
    except Exception:
        return PluginInfo(name, package, error=_format_exc(-3).rstrip())
    return PluginInfo(name, package)


def _format_exc(limit: int | None = None) -> str:
    import traceback  # only on an error: not part of every command's start-up

    return traceback.format_exc(limit=limit)
