"""The pluggy side of the plugin manager: pluggy's ``PluginManager`` reading
``perfstack.hookimpl`` marks, with perfstack's hook specifications. Imported on the first
hook call, never by a command that only reads a report with a core format."""

from __future__ import annotations

from typing import Any

import pluggy

from perfstack.plugin import spec as hookspecs
from perfstack.plugin.mark import options_of

PROJECT = "perfstack"


class Host(pluggy.PluginManager):
    """pluggy's manager, reading our marks as well as pluggy's own."""

    def parse_hookimpl_opts(self, plugin: object, name: str) -> Any:
        """The hook options of ``plugin.name``: ours where ``perfstack.hookimpl`` marked it,
        else whatever pluggy's own marker recorded."""
        try:
            method = getattr(plugin, name)
        except Exception:
            return None
        options = options_of(method) if callable(method) else None
        if options is not None:
            return options
        return super().parse_hookimpl_opts(plugin, name)


def new_host() -> Host:
    """A manager that knows perfstack's hooks, with no plugin registered."""
    host = Host(PROJECT)
    host.add_hookspecs(hookspecs)
    return host


#: raised by ``register`` for an implementation that does not fit its hook
PluginValidationError = pluggy.PluginValidationError
