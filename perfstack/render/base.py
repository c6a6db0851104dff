"""The output formats' contract:
kept at this path for plugins written before the plugin API was one room;
the code lives in ``perfstack.plugin.renderer``."""

from perfstack.plugin.renderer import (
    DiffRenderer as DiffRenderer,
)
from perfstack.plugin.renderer import (
    Renderer as Renderer,
)
from perfstack.plugin.renderer import (
    RenderOptions as RenderOptions,
)
from perfstack.plugin.renderer import (
    markdown_escape as markdown_escape,
)
from perfstack.plugin.renderer import (
    markdown_table as markdown_table,
)
from perfstack.plugin.renderer import (
    terminal_safe as terminal_safe,
)
