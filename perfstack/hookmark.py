"""The ``hookimpl`` mark:
kept at this path for plugins written before the plugin API was one room;
the code lives in ``perfstack.plugin.mark``."""

from perfstack.plugin.mark import (
    DEFAULTS as DEFAULTS,
)
from perfstack.plugin.mark import (
    HOOK_VERSION as HOOK_VERSION,
)
from perfstack.plugin.mark import (
    MARK as MARK,
)
from perfstack.plugin.mark import (
    MIN_HOOK_VERSION as MIN_HOOK_VERSION,
)
from perfstack.plugin.mark import (
    F as F,
)
from perfstack.plugin.mark import (
    hookimpl as hookimpl,
)
from perfstack.plugin.mark import (
    options_of as options_of,
)
