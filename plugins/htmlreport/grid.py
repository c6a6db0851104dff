"""An HTML table of cells already escaped, the one every section of the page draws its small
tables with (the layers' big tables are the page script's: ``tables``)."""

from __future__ import annotations

from .charts import esc


def table(head: list[str], rows: list[list[str]], numeric: set[int] | None = None) -> str:
    """A table: ``head`` escaped here, each row's cells as given (escaped by the caller),
    the columns in ``numeric`` right-aligned."""
    numeric = numeric or set()
    out = ['<div class="scroll"><table><tr>',
           *[f'<th class="num">{esc(h)}</th>' if i in numeric else f"<th>{esc(h)}</th>"
             for i, h in enumerate(head)], "</tr>"]
    for row in rows:
        out.append("<tr>" + "".join(
            f'<td class="num">{c}</td>' if i in numeric else f"<td>{c}</td>"
            for i, c in enumerate(row)) + "</tr>")
    out.append("</table></div>")
    return "".join(out)
