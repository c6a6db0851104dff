"""The renderers' contract: the ``Renderer`` base class of every output format, the
``DiffRenderer`` a format of comparisons implements, the options ``show`` passes, and the
escaping every format shares. It imports no format; the formats import it."""


from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, runtime_checkable

from perfstack.records import datarecord, field

if TYPE_CHECKING:
    from perfstack.report import Report


@datarecord
class RenderOptions:
    """How much to show and how: independent of argparse."""

    top: int = 10  # rows per layer and source; functions, and children each, in the drill-down
    depth: int = 3  # drill-down: 1 functions, 2 + their torch ops, 3 + the ops' kernels
    width: int = 110
    color: bool = False
    #: layer -> installed backends that feed it, to say what would fill an empty layer
    layer_providers: dict[str, list[str]] = field(default_factory=dict)
    #: metric name prefix -> installed backends that publish it (``Backend.publishes``)
    metric_providers: dict[str, list[str]] = field(default_factory=dict)
    #: (file name ending, what opens it) of the installed backends' raw outputs
    #: (``Backend.openers``)
    artifact_openers: list[tuple[str, str]] = field(default_factory=list)
    #: gap -> what the installed backends that would fill it advise (``Backend.advice``)
    advice: dict[str, list[str]] = field(default_factory=dict)
    #: the folder of the report file: its artifact paths are relative to it
    report_dir: Path | None = None
    full: bool = False  # every metric, not only those a person reads by default
    all_frames: bool = False  # library functions one by one, not folded into their package
    #: the folder the output is written to, when it is a file: links to artifacts are made
    #: relative to it
    output_dir: Path | None = None
    #: lines a format asks the command to say on stderr: what it left out, and why
    notices: list[str] = field(default_factory=list)


class Renderer:
    """An output format of ``perfstack show --format NAME``."""

    name: ClassVar[str]
    description: ClassVar[str] = ""
    #: None for terminal text; else the extension of the file it writes (".html")
    output_file_extension: ClassVar[str | None] = None

    def render(self, report: Report, options: RenderOptions) -> str:
        """Return the report in this format."""
        raise NotImplementedError  # abstract: every renderer defines it


@runtime_checkable
class DiffRenderer(Protocol):
    """A renderer that also draws ``perfstack diff --format NAME`` (the built-in html one
    does): a Renderer with this method is offered to diff as well as to show.

    ``diff`` is a ``perfstack.analysis.diff.Diff``: typed ``Any`` here so that the plugin API
    (a low floor) does not import the analysis above it; implementations name the type."""

    def render_diff(self, diff: Any, options: RenderOptions) -> str:
        """Return the comparison of two reports in this format."""


def markdown_escape(text: object) -> str:
    """Return ``text`` safe in a markdown line or table cell: no HTML, pipes or emphasis.

    Workload-derived strings (function and op names, paths) go through this, so a name such
    as ``<script>`` or ``a|b`` is shown as text and cannot break a table.
    """
    return (str(text).replace("\\", "\\\\").replace("|", "\\|").replace("<", "&lt;")
            .replace(">", "&gt;").replace("`", "\\`").replace("*", "\\*").replace("_", "\\_")
            .replace("[", "\\[").replace("]", "\\]").replace("\r", " ").replace("\n", " "))


#: A colour (SGR) sequence: the only escape sequence a text report keeps.
def markdown_table(head: list[str], rows: list[list[str]]) -> list[str]:
    """A markdown table's lines: the head, its rule, a line per row (cells escaped already)."""
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    out += ["| " + " | ".join(cells) + " |" for cells in rows]
    return out


_SGR = re.compile(r"\x1b\[[0-9;]*m")
#: Control characters but newline and tab, DEL and the C1 controls (0x9b is a one-byte CSI).
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def terminal_safe(text: str) -> str:
    """Return ``text`` with every control character a workload could have printed shown as
    ``\\xNN`` instead of acted on (set the title, clear the screen, move the cursor); colour
    sequences, which only colour, are kept."""
    out = []
    last = 0
    for m in _SGR.finditer(text):
        out.append(_CONTROL.sub(lambda c: f"\\x{ord(c.group()):02x}", text[last:m.start()]))
        out.append(m.group())
        last = m.end()
    out.append(_CONTROL.sub(lambda c: f"\\x{ord(c.group()):02x}", text[last:]))
    return "".join(out)
