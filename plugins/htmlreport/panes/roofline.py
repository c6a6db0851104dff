"""The HTML report's roofline: the ceilings, the step's figures, the heaviest ops, and a log-log
chart of every costed op (arithmetic intensity across, achieved FLOP/s up, each op a point
sized by its time, the roofs drawn: the bandwidth's slope and each type's peak).
"""

from __future__ import annotations

import math

from perfstack.analysis.panes.roofline import RoofOp, RoofView
from perfstack.render.words.roofline import (
    roof_ceiling_line,
    roof_cells,
    roof_rate,
    roof_summary,
    roof_title,
)
from perfstack.report.units import fmt_seconds, fmt_si, pct, pct_fine

from ..charts import esc
from ..grid import table
from .context import PageContext

BOUND_COLOURS = {"compute": "#e15759", "memory": "#4e79a7", "cache": "#76b7b2",
                 "latency": "#bab0ac", "unknown": "#999999"}
#: The peaks drawn as roofs, the plain fp32 one solid, the others dashed.
DRAWN = ("fp32", "tf32", "bf16", "fp16", "fp64")
W, H, LEFT, BOTTOM, TOP, RIGHT = 900, 420, 80, 46, 12, 150


def _log(value: float) -> float:
    return math.log10(value)


LOG2 = math.log10(2)


def _chart(v: RoofView) -> str:
    """The log-log chart, or a line saying why there is none."""
    points = [o for o in v.points if o.flop_s and o.intensity
              and math.isfinite(o.flop_s) and math.isfinite(o.intensity)]
    memory_only = len([o for o in v.points if not o.flop_s])
    note = (f'<p class="muted">{memory_only} op shapes that only move memory (no FLOPs) are '
            "not on the chart: the table gives their share of the bandwidth.</p>"
            if memory_only else "")
    c = v.ceilings
    peaks: dict[str, float] = {}  # types of one peak share its roof: "bf16/fp16"
    for t in DRAWN:
        if t in c.peak_flops:
            same = next((k for k, p in peaks.items() if p == c.peak_flops[t]), None)
            if same is None:
                peaks[t] = c.peak_flops[t]
            else:
                peaks[f"{same}/{t}"] = peaks.pop(same)
    if not points or not peaks or not c.bandwidth:
        return '<p class="muted" id="roofline-empty">no op with FLOPs to draw</p>' + note
    bandwidth = c.bandwidth
    xs = [v for v in [*(o.intensity for o in points), max(peaks.values()) / bandwidth]
          if v and math.isfinite(v)]
    ys = [v for v in [*(o.flop_s for o in points), *peaks.values()] if v and math.isfinite(v)]
    if not xs or not ys:
        return '<p class="muted" id="roofline-empty">no op with FLOPs to draw</p>' + note
    # a margin of a factor of two each way, added in logs (x * 2 overflows near the top)
    # (10 ** 308 is the largest decade a float holds)
    x0, x1 = math.floor(_log(min(xs)) - LOG2), min(math.ceil(_log(max(xs)) + LOG2), 300)
    y0, y1 = math.floor(_log(min(ys)) - LOG2), min(math.ceil(_log(max(ys)) + LOG2), 300)

    def px(x: float) -> float:
        return LEFT + (W - LEFT - RIGHT) * (_log(x) - x0) / max(x1 - x0, 1)

    def py(y: float) -> float:
        return TOP + (H - TOP - BOTTOM) * (1 - (_log(y) - y0) / max(y1 - y0, 1))

    out = [f'<svg class="chart" id="roofline-chart" viewBox="0 0 {W} {H}" width="{W}" '
           f'height="{H}" role="img" aria-label="roofline">']
    for d in range(x0, x1 + 1):  # a grid line and its label at each decade
        x = px(10.0 ** d)
        out += _grid(x, TOP, x, H - BOTTOM, x, H - BOTTOM + 16, "middle", _decade(d))
    for d in range(y0, y1 + 1):
        y = py(10.0 ** d)
        out += _grid(LEFT, y, W - RIGHT, y, LEFT - 6, y + 4, "end",
                     fmt_si(10.0 ** d, "flop/s"))
    out.append(f'<text x="{(LEFT + W - RIGHT) / 2}" y="{H - 8}" text-anchor="middle">'
               "arithmetic intensity (FLOP per byte moved)</text>")
    last_label = None
    for name, peak in sorted(peaks.items(), key=lambda kv: kv[1]):
        ridge = peak / bandwidth
        start = 10.0 ** x0
        knee = max(min(ridge, 10.0 ** x1), start)
        dash = "" if name.startswith("fp32") else ' stroke-dasharray="5 4"'
        out.append(f'<polyline fill="none" stroke="#555"{dash} points="'
                   f'{px(start):.1f},{py(max(start * bandwidth, 10.0 ** y0)):.1f} '
                   f'{px(knee):.1f},{py(min(knee * bandwidth, peak)):.1f} '
                   f'{px(10.0 ** x1):.1f},{py(peak):.1f}"><title>{esc(name)} peak '
                   f"{esc(fmt_si(peak, 'flop/s'))}, memory {esc(fmt_si(bandwidth, 'B/s'))}"
                   "</title></polyline>")
        y = py(peak) + 4
        if last_label is not None and last_label - y < 13:
            y = last_label - 13  # labels of close peaks one above the other
        last_label = y
        out.append(f'<text x="{W - RIGHT + 4}" y="{y:.1f}">{esc(name)} '
                   f"{esc(fmt_si(peak, 'flop/s'))}</text>")
    for o in sorted(points, key=lambda o: -o.seconds):
        r = 3 + 17 * math.sqrt(o.time_share)
        out.append(f'<circle class="roof-op" cx="{px(o.intensity or 1):.1f}" '
                   f'cy="{py(o.flop_s or 1):.1f}" r="{r:.1f}" '
                   f'fill="{BOUND_COLOURS.get(o.bound, "#999")}" fill-opacity="0.6" '
                   f'stroke="#333"><title>{esc(_hover(o))}</title></circle>')
    out.append("</svg>")
    legend = "".join(f'<span><i class="swatch" style="background:{colour}"></i>{esc(b)}-bound'
                     "</span>" for b, colour in BOUND_COLOURS.items() if b != "unknown")
    return "".join(out) + f'<p class="legend">{legend} · a point\'s size is its time</p>' + note


def _grid(x1: float, y1: float, x2: float, y2: float, tx: float, ty: float, anchor: str,
          label: str) -> list[str]:
    """One grid line and its label."""
    return [f'<line x1="{x1:.1f}" y1="{y1:.1f}" x2="{x2:.1f}" y2="{y2:.1f}" stroke="#eee"/>',
            f'<text x="{tx:.1f}" y="{ty:.1f}" text-anchor="{anchor}">{esc(label)}</text>']


def _decade(d: int) -> str:
    return f"{10.0 ** d:g}"


def _hover(o: RoofOp) -> str:
    parts = [o.name, f"{fmt_seconds(o.seconds)} ({pct(100 * o.time_share)} of the costed op "
             "time)", f"achieved {roof_rate(o)}"]
    if o.intensity is not None:
        parts.append(f"{o.intensity:.3g} FLOP/byte")
    if o.roof_share is not None:
        parts.append(f"{pct_fine(o.roof_share)} of its roof, {o.bound}-bound")
    return " · ".join(parts)


#: The page's own tab the section is drawn in.
WITHIN = "pane-ops"


def within(v: RoofView, page: PageContext) -> str:
    """The roofline section of the Ops tab, above every op's row."""
    rows = [[f'<span class="mono" title="{esc(o.name)}">{esc(cells[0])}</span>',
             *(esc(c) for c in cells[1:])] for o, cells in zip(v.top, roof_cells(v), strict=True)]
    listed = table(["op", "time", "share", "achieved", "of roof", "bound", "type"], rows,
                   {1, 2, 3, 4}) if rows else ""
    return (f'<section id="roofline"><h2>{esc(roof_title(v))}</h2>'
            f"<p>{esc(roof_ceiling_line(v))}</p><p class=\"muted\">{esc(roof_summary(v))}</p>"
            + (_chart(v) if v.points else "") + listed + "</section>")
