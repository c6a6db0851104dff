"""The Ranks pane's heat map: a job's step times, a rank a row and a step a column,
each cell coloured by its step time over the job's median step (white at or under it, full
red at twice it or more), as inline SVG: no script, no network.

Up to ``MOST_CELLS`` cells each cell is an element that names its rank, step and time on
hover. Past that (a thousand ranks of a hundred steps are 100,000 cells, and as many SVG
elements stall a browser for seconds) the cells are the pixels of one PNG image, one pixel a
cell, scaled to the map; each rank's row names the rank, its median and its slowest step on
hover. The page's size and the browser's work then grow with the ranks, not ranks x steps.
"""

from __future__ import annotations

import base64
import statistics
import struct
import zlib

from perfstack.analysis.panes.ranks import RANKED
from perfstack.report import Report
from perfstack.report.units import fmt_seconds

from .charts import esc

#: Per-rank step times, as the run (the baseline's steps) or the traces (torch's) gave them,
#: in that order of preference.
STEP_METRICS = ("step_time", "torch_step_time")
#: Steps drawn at most (the first ones).
MOST_STEPS = 200
#: Cells drawn as elements of their own at most; a bigger map is an image.
MOST_CELLS = 4096


def _steps(report: Report) -> dict[int, list[float]]:
    """Each rank's step times, from the first kind of per-rank step metric the report has,
    or, of a big job, from its distributions (``environment.across_ranks.steps``)."""
    steps = (report.environment.get("across_ranks") or {}).get("steps")
    if isinstance(steps, dict) and isinstance(steps.get("ranks"), list) \
            and isinstance(steps.get("times"), list):
        return {int(r): [float(t) for t in times] for r, times in
                zip(steps["ranks"], steps["times"], strict=False) if isinstance(times, list)}
    found: dict[str, dict[int, list[float]]] = {}
    for m in report.metrics:
        match = RANKED.match(m.name)
        if match and match["base"] in STEP_METRICS and m.samples and m.samples_of == "steps":
            found.setdefault(match["base"], {})[int(match["rank"])] = [float(s)
                                                                      for s in m.samples]
    for kind in STEP_METRICS:
        if kind in found:
            return found[kind]
    return {}


def _shade(ratio: float) -> int:
    """The green and blue of a cell: 255 (white) at or under the median, 87 (red) at twice
    it or more."""
    t = min(max(ratio - 1.0, 0.0), 1.0)
    return round(255 - t * (255 - 87))


def _colour(ratio: float) -> str:
    """White at or under the median, red at twice it or more."""
    g = _shade(ratio)
    return f"#ff{g:02x}{g:02x}"


def png(rows: list[list[tuple[int, int, int, int]]]) -> bytes:
    """An RGBA PNG of ``rows`` of pixels (top to bottom, each the same length)."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return (struct.pack(">I", len(data)) + kind + data
                + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))

    height, width = len(rows), len(rows[0])
    raw = b"".join(b"\0" + bytes(v for pixel in row for v in pixel) for row in rows)
    return (b"\x89PNG\r\n\x1a\n"
            + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 6, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b""))


def rank_heat_map(report: Report) -> str:
    """The heat map (empty for fewer than two ranks with steps)."""
    steps = _steps(report)
    if len(steps) < 2:
        return ""
    ranks = sorted(steps)
    count = min(max(len(s) for s in steps.values()), MOST_STEPS)
    median = statistics.median(t for s in steps.values() for t in s[:count]) or 1.0
    width, label_w = 1000, 70
    cell_w = (width - label_w) / count
    cell_h = max(1.0, min(14.0, 700 / len(ranks)))
    height = cell_h * len(ranks) + 20
    out = [f'<svg class="chart" id="rank-heat" viewBox="0 0 {width} {height:.1f}" '
           f'width="{width}" height="{height:.0f}" role="img" aria-label="step time by rank '
           f'and step" data-ranks="{len(ranks)}" data-steps="{count}">',
           f'<text x="{label_w}" y="12">step 1</text>'
           f'<text x="{width}" y="12" text-anchor="end">step {count}</text>']
    label_every = max(1, round(12 / cell_h))
    as_image = len(ranks) * count > MOST_CELLS
    if as_image:
        missing = (0, 0, 0, 0)  # a step the rank did not run: nothing drawn, as below
        pixels = [[(255, g, g, 255) for g in (_shade(t / median) for t in steps[rank][:count])]
                  + [missing] * (count - len(steps[rank][:count])) for rank in ranks]
        data = base64.b64encode(png(pixels)).decode("ascii")
        out.append(f'<image x="{label_w}" y="16" width="{width - label_w}" '
                   f'height="{cell_h * len(ranks):.1f}" preserveAspectRatio="none" '
                   f'style="image-rendering:pixelated" href="data:image/png;base64,{data}"/>')
    for row, rank in enumerate(ranks):
        y = 16 + row * cell_h
        if row % label_every == 0:
            out.append(f'<text x="{label_w - 6}" y="{y + min(cell_h, 12):.1f}" '
                       f'text-anchor="end">rank {rank}</text>')
        if as_image:
            drawn = steps[rank][:count]
            slowest = max(range(len(drawn)), key=drawn.__getitem__)
            out.append(f'<rect class="heat-row" x="{label_w}" y="{y:.2f}" '
                       f'width="{width - label_w}" height="{cell_h:.2f}" fill="transparent">'
                       f"<title>rank {rank}: median step "
                       f"{esc(fmt_seconds(statistics.median(drawn)))}, slowest step "
                       f"{slowest + 1} {esc(fmt_seconds(drawn[slowest]))}</title></rect>")
            continue
        for i, t in enumerate(steps[rank][:count]):
            out.append(f'<rect x="{label_w + i * cell_w:.1f}" y="{y:.1f}" '
                       f'width="{cell_w:.2f}" height="{cell_h:.2f}" fill="{_colour(t / median)}">'
                       f"<title>rank {rank}, step {i + 1}: {esc(fmt_seconds(t))}</title></rect>")
    out.append("</svg>")
    return (f'<section id="rank-heat-map"><h3>Step time by rank and step</h3><p class="muted">'
            f"each cell a step of a rank: white at or under the job's median step "
            f"({esc(fmt_seconds(median))}), red at twice it or more"
            + (" (one pixel a cell; hover a row for its rank)" if as_image else "") + "</p>"
            + "".join(out)
            + "</section>")
