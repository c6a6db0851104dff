"""``perfstack.hookimpl``: marks a plugin's function as a hook implementation.

It takes pluggy's options (``tryfirst``, ``trylast``, ``hookwrapper``, ``wrapper``,
``optionalhook``, ``specname``) and only records them on the function: pluggy itself is
imported when hooks are first called (``perfstack.plugin.host``), not by every plugin module
that marks its hooks, so a command that reads a report with the core's renderer starts
without it. pluggy's own ``HookimplMarker("perfstack")`` marks work as well.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar, overload

F = TypeVar("F", bound=Callable[..., object])

#: the hook version (``perfstack.plugin.spec`` says what it means)
HOOK_VERSION = 1
#: the oldest hook version this perfstack still loads
MIN_HOOK_VERSION = 1
#: the attribute of a marked function that holds its options
MARK = "_perfstack_hookimpl"
#: every option and its default, as pluggy's ``HookimplOpts``
DEFAULTS: dict[str, Any] = {"wrapper": False, "hookwrapper": False, "optionalhook": False,
                            "tryfirst": False, "trylast": False, "specname": None}


@overload
def hookimpl(function: F, /) -> F: ...
@overload
def hookimpl(*, hookwrapper: bool = False, optionalhook: bool = False, tryfirst: bool = False,
             trylast: bool = False, specname: str | None = None,
             wrapper: bool = False) -> Callable[[F], F]: ...
def hookimpl(function: Any = None, /, *, hookwrapper: bool = False, optionalhook: bool = False,
             tryfirst: bool = False, trylast: bool = False, specname: str | None = None,
             wrapper: bool = False) -> Any:
    """Mark ``function`` as the implementation of the hook of its name (or ``specname``):
    ``@perfstack.hookimpl`` or ``@perfstack.hookimpl(tryfirst=True)``, with pluggy's
    meaning for each option."""
    options = {"wrapper": wrapper, "hookwrapper": hookwrapper, "optionalhook": optionalhook,
               "tryfirst": tryfirst, "trylast": trylast, "specname": specname}

    def mark(func: F) -> F:
        setattr(func, MARK, dict(options))
        return func

    return mark if function is None else mark(function)


def options_of(function: object) -> dict[str, Any] | None:
    """The options ``hookimpl`` recorded on ``function``, or None when it is not marked."""
    try:
        found = getattr(function, MARK, None)
    except Exception:  # an object whose attribute lookup raises is no hook
        return None
    return {**DEFAULTS, **found} if isinstance(found, dict) else None
