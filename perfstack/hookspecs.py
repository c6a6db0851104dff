"""The hook specifications:
kept at this path for plugins written before the plugin API was one room;
the code lives in ``perfstack.plugin.spec``."""

from perfstack.plugin.spec import (
    hookspec as hookspec,
)
from perfstack.plugin.spec import (
    perfstack_backends as perfstack_backends,
)
from perfstack.plugin.spec import (
    perfstack_environment as perfstack_environment,
)
from perfstack.plugin.spec import (
    perfstack_findings as perfstack_findings,
)
from perfstack.plugin.spec import (
    perfstack_renderers as perfstack_renderers,
)
from perfstack.plugin.spec import (
    version_problem as version_problem,
)
