"""The drill-down of the text report: the related metrics, the tree from functions to ops to
kernels, and each layer's top rows."""

from __future__ import annotations

from perfstack.analysis.view import BackendLine, View
from perfstack.analysis.views.drilldown import Node
from perfstack.analysis.views.layers import LayerTable
from perfstack.render.text.grid import Column, Page, cut, table, wrap
from perfstack.render.words.common import (
    LAYER_TITLES,
    beside_line,
    node_figures,
    related_line,
    related_title,
)
from perfstack.report.units import fmt_value


def related(page: Page, view: View) -> None:
    """The metrics related to the budget's parts, group by group."""
    for group, metrics in view.related.items():
        page.add(f"  {related_title(group, metrics)}:")
        for m in metrics:
            if view.full:
                page.extend(wrap(related_line(m, True), page.width, indent=11, first="    "))
            else:
                page.add(cut("    " + related_line(m, False), page.width))


def tree(page: Page, view: View) -> None:
    """The drill-down from the workload's functions to their ops and kernels."""
    if not view.tree and not view.tree_notes:
        return
    page.section("Drill-down: your functions first → torch ops → kernels")
    if view.beside:
        line = "hardware: " + beside_line(view.beside)
        if view.full:
            page.extend(wrap(line, page.width, indent=2, first="  "))
        else:
            page.add(cut("  " + line, page.width))

    def add(node: Node, depth: int) -> None:
        indent = 2 + 3 * depth
        figures = node_figures(node)
        room = page.width - indent - len(figures) - 2
        label = cut(node.label, max(12, room))
        page.add(" " * indent + label + "  " + page.style(figures, "dim"))
        for child in node.children:
            add(child, depth + 1)

    for node in view.tree:
        add(node, 0)
    for note in view.tree_notes:
        page.extend(wrap(note, page.width, indent=2, first="  "))


def layer_line(page: Page, layer: str, tables: list[LayerTable],
                providers: dict[str, list[str]], backends: list[BackendLine]) -> None:
    """The default report's one line per layer: who measured it, how many rows; for a layer
    with none, the backend that ran and could have filled it, else those that fill it."""
    name = LAYER_TITLES[layer].split(":")[0]
    if tables:
        what = ", ".join(f"{t.source} {t.total_rows} rows" for t in tables)
        page.add(cut(f"  {name:<10} {what}", page.width))
        return
    ran = [b.name for b in backends if b.status in ("ok", "partial") and layer in b.layers]
    feeds = providers.get(layer, [])
    hint = ("not measured: " + ", ".join(ran) + " ran without it (see "
            "perfstack run --help)" if ran else
            "not measured" + (" (--plugins " + ", ".join(feeds) + ")" if feeds else ""))
    page.add(cut(f"  {name:<10} {hint}", page.width), "dim")


def layers(page: Page, view: View, providers: dict[str, list[str]]) -> None:
    """Each layer's top rows (``--full``), else one line a layer."""
    if not view.full:
        page.section("Layers (--full shows their top rows)")
        measured = [f"{LAYER_TITLES[layer].split(':')[0]}: " + ", ".join(
            f"{t.source} {t.total_rows} rows" for t in tables)
            for layer, tables in view.layers.items() if tables]
        if measured:
            page.extend(wrap(" · ".join(measured), page.width, indent=2, first="  "))
        for layer, tables in view.layers.items():
            shown = view.as_metrics.get(layer)
            if not tables and shown:  # measured: its figures are among the metrics
                name = LAYER_TITLES[layer].split(":")[0]
                page.add(cut(f"  {name:<10} " + ", ".join(
                    f"{source} {count} rows, shown as metrics" for source, count in shown),
                    page.width), "dim")
            elif not tables:
                layer_line(page, layer, tables, providers, view.backends)
        return
    for layer, tables in view.layers.items():
        page.section(LAYER_TITLES[layer])
        if not tables:
            feeds = providers.get(layer, [])
            hint = ("nothing measured here" + (": filled by " + ", ".join(
                f"--plugins {p}" for p in feeds) if feeds else ""))
            page.extend(wrap(hint, page.width, indent=4, first="  "))
            continue
        for t in tables:
            folded = ""
            if t.folded:
                folded = f"; library code folded into {len(t.folded)} rows (--all-frames)"
            page.add(cut(f"  from {t.source} ({t.total_rows} rows{folded})", page.width), "dim")
            reasons: list[str] = []
            rows = []
            for row, name in zip(t.rows, t.names, strict=True):
                cells = [name]
                for col in t.columns:
                    q = row.values.get(col)
                    if q is None:
                        cells.append("")
                    elif q.value is None:
                        reason = q.reason or "unknown"
                        if reason not in reasons:
                            reasons.append(reason)
                        cells.append(f"n/a[{reasons.index(reason) + 1}]")
                    else:
                        cells.append(fmt_value(q.value, q.unit))
                rows.append(cells)
            if rows:
                page.extend(table([Column("name", name=True), *(Column(c) for c in t.columns)],
                                  rows, page.width))
            for i, reason in enumerate(reasons, 1):
                page.extend(wrap(f"[{i}] {reason}", page.width, indent=4, first="  "))
            if t.unmeasured:
                page.extend(wrap(f"not measured here: {', '.join(t.unmeasured)}"
                                 + (f" ({t.unmeasured_reason})" if t.unmeasured_reason else ""),
                                 page.width, indent=4, first="  "))
