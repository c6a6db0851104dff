"""A plugin that adds an output format: one row key per line."""

from perfstack import hookimpl
from perfstack.plugin.renderer import Renderer, RenderOptions
from perfstack.report import Report


class Keys(Renderer):
    name = "keys"
    description = "row keys, one per line"

    def render(self, report: Report, options: RenderOptions) -> str:
        return "".join(f"{layer.value}\t{row.key}\n"
                       for layer, rows in report.layers.items() for row in rows)


@hookimpl
def perfstack_renderers() -> list[Renderer]:
    return [Keys()]
