"""A graph drawn for presentation mode (a projector): ``present_dot`` picks, among a few layouts
of the graph's dense drawing (``GraphSpec.to_dot(present=True)``: top to bottom or left to
right, folded into up to four columns or rows), the one that shows the whole graph biggest in
the pane it is shown in, so that a small program is whole with every label at 14 px or more
instead of scaled down. The layouts are Graphviz's (dot), cached with every other layout
(``analysis.render.layout_cache``), so the one picked costs nothing more when it is sent.

The pane is presentation mode's: one graph at a time beside the details, at a 1280x720
projector (``PRESENT_PANE``, CSS px; the app's ``analysis/render/assets/graph_view.css``). A bigger
window gives a bigger pane both ways, where the layout fits at least as well."""

from __future__ import annotations

import re

from analysis.render.graph import PRESENT_FONT, GraphSpec
from analysis.render.layout_cache import layout_dots_start, layout_svg

# One graph's pane in presentation mode at 1280x720 (width, height in CSS px), a little under
# what the page gives it (876 x 472 measured), so a toolbar that wraps once more still fits.
PRESENT_PANE = (860, 460)
# The viewer's least scale in presentation mode (px per point): PRESENT_FONT points at 14 px.
LEGIBLE_SCALE = 14 / PRESENT_FONT
# Graphs with more nodes keep their usual drawing: a projector shows them in part either way,
# and their layouts cost seconds.
PRESENT_MAX_NODES = 80
# The layouts tried, simplest first: one that fits at LEGIBLE_SCALE with this much to spare is
# taken before a more folded one that would draw bigger still.
CANDIDATES = (("TB", 1), ("LR", 1), ("TB", 2), ("LR", 2), ("TB", 3), ("LR", 3), ("TB", 4), ("LR", 4))
SPARE = 1.05


def svg_size(svg: str) -> tuple[float, float] | None:
    """The width and height (points) of a Graphviz SVG's drawing, from its viewBox."""
    m = re.search(r'viewBox="([-\d.]+)[ ,]+([-\d.]+)[ ,]+([\d.]+)[ ,]+([\d.]+)"', svg[:2000])
    return (float(m.group(3)), float(m.group(4))) if m else None


def fit_scale(size: tuple[float, float] | None, pane: tuple[float, float] = PRESENT_PANE) -> float:
    """How many pane pixels a point takes when a drawing of ``size`` fits ``pane`` whole."""
    if not size or size[0] <= 0 or size[1] <= 0:
        return 0.0
    return min(pane[0] / size[0], pane[1] / size[1])


def present_dot(spec: GraphSpec, pane: tuple[float, float] = PRESENT_PANE) -> str | None:
    """The DOT text of ``spec`` for presentation mode: of ``CANDIDATES``, the first whose whole
    drawing fits ``pane`` at ``LEGIBLE_SCALE`` (with ``SPARE``), else the one that draws
    biggest. None for a graph of more than ``PRESENT_MAX_NODES`` nodes (it keeps its drawing).
    Raises RuntimeError when Graphviz lays out none of them."""
    if len(spec.nodes) > PRESENT_MAX_NODES:
        return None
    dots = list(dict.fromkeys(spec.to_dot(rankdir, present=True, fold=fold) for rankdir, fold in CANDIDATES))
    try:
        layout_dots_start(dots)()
    except RuntimeError:
        pass  # the ones laid out are still compared; none at all raises below
    best, best_scale = None, -1.0
    for dot in dots:
        try:
            scale = fit_scale(svg_size(layout_svg(dot)), pane)
        except RuntimeError:
            continue
        if scale >= LEGIBLE_SCALE * SPARE:
            return dot
        if scale > best_scale:
            best, best_scale = dot, scale
    if best is None:
        raise RuntimeError("Graphviz could not lay out the presentation graph")
    return best
