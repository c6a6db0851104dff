"""``--format json``: the report itself, as the report file holds it (for ``jq`` and pipes)."""

from __future__ import annotations

from perfstack.plugin.mark import hookimpl
from perfstack.plugin.renderer import Renderer, RenderOptions
from perfstack.report import Report


class JsonRenderer(Renderer):
    """The report's JSON, exactly what ``-o report.json`` writes."""

    name = "json"
    description = "the report's JSON, as the report file holds it (schemas/report.schema.json)"
    output_file_extension = ".json"

    def render(self, report: Report, options: RenderOptions) -> str:
        """Return the report as JSON text."""
        from perfstack.report.files import report_json

        return report_json(report)


@hookimpl
def perfstack_renderers() -> list[Renderer]:
    """Provide the JSON format."""
    return [JsonRenderer()]
