"""Plain-text tables that fit a terminal's width (names are cut, numbers never), and the page
they are written on.

A table has one name column (the first) that gives up width, and value columns that never do.
When even the shortest names leave no room, whole columns are dropped from the right and the
table says how many, so a number is either shown whole or not at all.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from perfstack.plugin.renderer import terminal_safe
from perfstack.records import datarecord

#: The narrowest a name column gets before value columns are dropped instead: enough for a
#: function, its file and line.
MIN_NAME = 28
GAP = 2

#: 'function (path/to/file.py:12)': a name without spaces, then its location in parentheses.
_LOCATION = re.compile(r"^(?P<func>\S+) \((?P<path>[^()\s]+?)(?P<line>:\d+)?\)$")
_SHAPES = re.compile(r"^(?P<name>\S+) (?P<shapes>\[.*\])$")
#: 'graph break in forward (model.py:51): reason': a location inside the text, then more.
_INSIDE = re.compile(r"^(?P<head>.*?\S )\((?P<path>[^()\s]+?)(?P<line>:\d+)\)(?P<tail>.*)$")


def cut(text: str, width: int) -> str:
    """Return ``text`` in at most ``width`` characters, keeping what tells rows apart: a
    function keeps its name and line and loses the start of its path; an op keeps its name and
    the ends of its shapes. Control characters are escaped first (``terminal_safe``), so the
    width is that of what the terminal shows."""
    text = terminal_safe(text)
    if len(text) <= width:
        return text
    if width <= 1:
        return "…"[:width]
    found = _LOCATION.match(text)
    if found and found["path"]:
        func, path, line = found["func"], found["path"], found["line"] or ""
        room = width - len(func) - len(line) - 4  # " (" + "…" + ")"
        if room >= 4:
            return f"{func} (…{path[-room:]}{line})"
    inside = _INSIDE.match(text)
    if inside:  # the line before the rest of the text, the path's start before the line
        head, path, line = inside["head"], inside["path"], inside["line"]
        whole, more = f"{head}({path}{line})", "…" if inside["tail"] else ""
        if len(whole) < width:
            return whole + inside["tail"][: width - len(whole) - 1] + "…"
        room = width - len(head) - len(line) - 3 - len(more)  # "(" + "…" + ")"
        if room >= 2:  # '(…py:51)': the line is what tells two places apart
            return f"{head}(…{path[-room:]}{line}){more}"
    shaped = _SHAPES.match(text)
    if shaped:
        shapes = shaped["shapes"].replace(" ", "")
        compact = f"{shaped['name']} {shapes}"
        if len(compact) <= width:
            return compact
        shapes = _without_trailing_scalars(shapes)
        if len(shaped["name"]) + 1 + len(shapes) <= width:
            return f"{shaped['name']} {shapes}"
        room = width - len(shaped["name"]) - 2
        if room >= 7:
            # A third to the start, two to the end: an op's first input is often the one
            # its rows share (a bias, a batch), its last the one that differs (a weight).
            # In a narrow room, at least four characters of the start ('[[64').
            head = max((room - 1) // 3, min(4, (room - 1) // 2))
            return f"{shaped['name']} {shapes[:head]}…{shapes[-(room - 1 - head):]}"
    return text[: width - 1] + "…"


def _without_trailing_scalars(shapes: str) -> str:
    """'[[512],[64,512],[512,512],[],[]]' -> '[[512],[64,512],[512,512],…]': the trailing
    scalar arguments (empty shapes) are the same in every row of an op, so a cut that kept
    the end kept them and lost what tells two rows apart."""
    core = shapes
    while core.endswith(",[]]"):
        core = core[:-4] + "]"
    return shapes if core == shapes else core[:-1] + ",…]"


@datarecord
class Column:
    """A table column: its heading, and whether it is the name column (cut to fit), a word
    column (left-aligned) or a number (right-aligned); only the name column is ever cut."""

    title: str
    name: bool = False
    left: bool = False  # a word column (a status, a source): aligned left, never cut


def table(columns: Sequence[Column], rows: Sequence[Sequence[str]], width: int,
          indent: int = 2) -> list[str]:
    """Return the lines of a table at most ``width`` wide. Control characters in a cell (a
    function name py-spy read half-written holds a NUL) are escaped first, as the terminal will
    see them, so that widths are measured on what is printed."""
    rows = [[terminal_safe(cell) for cell in row] for row in rows]
    kept = list(range(len(columns)))
    while True:
        fixed = [max([len(columns[i].title), *(len(r[i]) for r in rows)])
                 for i in kept if not columns[i].name]
        name_cols = [i for i in kept if columns[i].name]
        spare = width - indent - sum(fixed) - GAP * (len(kept) - 1)
        wanted = 0
        if name_cols:  # a short name column needs no more than its longest name
            i = name_cols[0]
            wanted = min(MIN_NAME, max([len(columns[i].title), *(len(r[i]) for r in rows)]))
        if not name_cols or spare >= wanted or len(kept) <= 2:
            break
        kept.pop()  # drop the rightmost value column rather than cut a number
    dropped = len(columns) - len(kept)
    widths: dict[int, int] = {}
    for i in kept:
        if columns[i].name:
            natural = max([len(columns[i].title), *(len(r[i]) for r in rows)])
            widths[i] = max(1, min(natural, spare))
        else:
            widths[i] = max([len(columns[i].title), *(len(r[i]) for r in rows)])

    def line(cells: Sequence[str]) -> str:
        parts = []
        for i in kept:
            cell = cut(cells[i], widths[i]) if columns[i].name else cells[i]
            left = columns[i].name or columns[i].left
            parts.append(cell.ljust(widths[i]) if left else cell.rjust(widths[i]))
        return (" " * indent + (" " * GAP).join(parts)).rstrip()

    out = [line([c.title for c in columns])]
    out += [line(r) for r in rows]
    if dropped:
        out.append(" " * indent + f"({dropped} more column{'s' if dropped > 1 else ''} at a "
                   "wider terminal)")
    return out


def wrap(text: str, width: int, indent: int = 0, first: str = "") -> list[str]:
    """Return ``text`` wrapped to ``width``, the first line starting with ``first`` (control
    characters escaped first, as in ``table``)."""
    import textwrap

    return textwrap.wrap(terminal_safe(text), width=max(20, width),
                         initial_indent=first or " " * indent,
                         subsequent_indent=" " * (indent or len(first)),
                         break_on_hyphens=False) or [first.rstrip()]


ANSI = {"bold": "1", "dim": "2", "red": "31", "green": "32", "yellow": "33", "cyan": "36",
        "magenta": "35"}


class Page:
    """A text page being written: lines, sections, colour when the terminal takes it."""

    def __init__(self, width: int, color: bool) -> None:
        self.width = max(60, width)
        self.color = color
        self.lines: list[str] = []

    def style(self, text: str, *styles: str) -> str:
        """``text`` in ``styles`` (names of ANSI), when the page is in colour."""
        if not self.color or not styles:
            return text
        codes = ";".join(ANSI[s] for s in styles)
        return f"\033[{codes}m{text}\033[0m"

    def add(self, text: str = "", *styles: str) -> None:
        """One more line."""
        self.lines.append(self.style(text, *styles))

    def section(self, title: str) -> None:
        """A section's title, after a blank line (wrapped where it is wider than the page:
        a job of thousands of ranks says so in it)."""
        if self.lines and self.lines[-1]:
            self.lines.append("")
        lines = wrap(title, self.width - 2) if len(title) > self.width else [title]
        for i, line in enumerate(lines):
            self.add(f"  {line}" if i else line, "bold")

    def extend(self, lines: list[str]) -> None:
        """Lines as they are."""
        self.lines.extend(lines)

    def named_table(self, name: str, columns: Sequence[str],
                    cells: Sequence[Sequence[str]]) -> None:
        """A table whose first column names each row (cut to fit), the others numbers."""
        self.extend(table([Column(name, name=True), *(Column(c) for c in columns)], cells,
                          self.width))

    def sentences(self, lines: list[str]) -> None:
        """Sentences, each wrapped to the page, the lines after its first indented."""
        for line in lines:
            self.extend(wrap(line, self.width, indent=4, first="  "))


def bar(share: float, width: int = 10) -> str:
    """A share (%) as a bar of ``width`` cells: filled, then dotted."""
    filled = max(0, min(width, round(share / 100 * width)))
    return "█" * filled + "·" * (width - filled)
