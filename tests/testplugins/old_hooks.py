"""A plugin written for a hook version perfstack no longer loads (version 0)."""

import perfstack

PERFSTACK_HOOK_VERSION = 0


@perfstack.hookimpl
def perfstack_backends() -> list[perfstack.Backend]:
    return []
