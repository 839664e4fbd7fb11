"""A chart of ``charts`` or ``memory`` (a plotly figure) drawn as a small static SVG, for the
report and the notebook.

The app draws each figure with plotly.js (``st.plotly_chart``); the report and ``xe.show`` draw
the very same figure objects here, as SVG markup in the page: no chart library travels with a
page (plotly.js is 4.8 MB, once per report and once per notebook cell), nothing runs to draw it,
and it draws in every notebook front end, iframe or not. Each chart is still made in one place
(``charts.figure_makers``, ``memory.curve_figure`` ...); this module reads the part of plotly's
figure model those figures use: bar traces (horizontal or vertical, stacked, overlaid or grouped,
with a base, text, error bars), scatter traces (lines, stacked areas, markers), a treemap,
subplots, log axes, annotations and line shapes. A trace or attribute outside that part is left
out of the drawing, not guessed at.

A mark's tooltip is its hover template filled in (an SVG ``<title>``); a mark that stands for a
kernel carries ``data-kernel`` (its ``customdata``), which the report's script links to the
graphs. Every string is escaped: kernel and buffer names come from a bundle (untrusted).
"""

from __future__ import annotations

import html
import math
import re
import textwrap
from dataclasses import dataclass, field

WIDTH = 640  # the drawing's width in its own units (the page scales it to its box)
CHAR = 0.58  # a character's width, in font sizes (the estimate every label is fitted with)
MAX_LABEL = 30  # characters of a category label shown (the tooltip has all of it)
GRID = "#e6e6e6"
INK = "#333333"
SI = ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"), (1, ""), (1e-3, "m"), (1e-6, "µ"),
      (1e-9, "n"), (1e-12, "p"))


def _e(s) -> str:
    return html.escape("" if s is None else str(s), quote=True)


def _list(v) -> list | None:
    if v is None:
        return None
    if isinstance(v, (str, int, float)):
        return None
    return list(v.tolist() if hasattr(v, "tolist") else v)


def _each(v, n: int, default=None) -> list:
    """A per-point attribute as a list of ``n`` (a scalar repeated)."""
    vs = _list(v)
    if vs is None:
        return [default if v is None else v] * n
    return (vs + [default] * n)[:n]


def _text_width(s: str, size: float) -> float:
    return len(s) * size * CHAR


def _short(s: str, n: int = MAX_LABEL) -> str:
    return s if len(s) <= n else s[:n - 1] + "…"


def _fits(s: str, size: float, room: float) -> str:
    """``s`` cut to ``room`` pixels at ``size`` ("" when not even two characters fit)."""
    n = int(room / (size * CHAR))
    if n >= len(s):
        return s
    return s[:n - 1] + "…" if n >= 3 else ""


def si(v: float) -> str:
    """A tick's number with an SI prefix (``100G``, ``10m``), as plotly's ``exponentformat="SI"``."""
    if v == 0:
        return "0"
    a = abs(v)
    if 1e-3 <= a < 1e4:
        return f"{v:.4g}"
    for f, p in SI:
        if a >= f * 0.9999:
            return f"{v / f:.3g}{p}"
    return f"{v:.2g}"


# ----------------------------------------------------------------------------- hover text


_FIELD = re.compile(r"%\{([A-Za-z]+)(?::([^}]*))?\}")


def _format(v, spec: str | None) -> str:
    if v is None:
        return ""
    if not spec:
        return f"{v:.4g}" if isinstance(v, float) else str(v)
    trim = "~" in spec
    try:
        s = format(v, spec.replace("~", ""))
    except (ValueError, TypeError):
        return str(v)
    return s.rstrip("0").rstrip(".") if trim and "." in s else s


def hover(template: str | None, point: dict, name: str = "") -> str:
    """A plotly hover template filled in with one point's values, as plain text (``<br>`` a new
    line; the ``<extra>`` part after a ``·``)."""
    if not template:
        return "\n".join(str(x) for x in (name, point.get("text")) if x)
    extra = ""
    m = re.search(r"<extra>(.*?)</extra>", template)
    if m:
        extra, template = m.group(1), template[:m.start()] + template[m.end():]
    s = _FIELD.sub(lambda f: _format(point.get(f.group(1)), f.group(2)), template)
    s = re.sub(r"<br\s*/?>", "\n", s)
    s = re.sub(r"<[^>]*>", "", s)
    return s + (f" · {extra}" if extra else "")


def _title(text: str) -> str:
    return f"<title>{_e(text)}</title>" if text else ""


# ----------------------------------------------------------------------------- axes


@dataclass
class Axis:
    """One axis: its kind (``category``, ``linear``, ``log``), its extent and its place in pixels
    (``a`` the pixel of its low end, ``b`` of its high end)."""
    kind: str = "linear"
    cats: list = field(default_factory=list)
    lo: float = 0.0
    hi: float = 1.0
    a: float = 0.0
    b: float = 1.0
    visible: bool = True
    ticklabels: bool = True
    title: str = ""
    si: bool = False

    def frac(self, v) -> float | None:
        if self.kind == "category":
            if v not in self.cats:
                return None
            return (self.cats.index(v) + 0.5) / len(self.cats)
        if v is None:
            return None
        if self.kind == "log":
            if v <= 0:
                return None
            v = math.log10(v)
        return (v - self.lo) / (self.hi - self.lo)

    def px(self, v) -> float | None:
        f = self.frac(v)
        return None if f is None else self.a + f * (self.b - self.a)

    def band(self) -> float:
        """A category's width in pixels."""
        return abs(self.b - self.a) / max(1, len(self.cats))

    def ticks(self) -> list[tuple[float, str]]:
        """(value, label) of each tick."""
        if self.kind == "category":
            return [(c, _short(str(c))) for c in self.cats]
        if self.kind == "log":
            lo, hi = math.ceil(self.lo - 1e-9), math.floor(self.hi + 1e-9)
            vals = [10.0 ** k for k in range(lo, hi + 1)]
            if len(vals) < 2:
                vals = sorted(v * m for v in [10.0 ** k for k in range(lo - 1, hi + 1)] for m in (1, 2, 5)
                              if self.lo <= math.log10(v * m) <= self.hi)
            step = max(1, math.ceil(len(vals) / 8))
            return [(v, si(v)) for v in vals[::step]]
        step = _nice((self.hi - self.lo) / 5)
        start = math.ceil(self.lo / step - 1e-9) * step
        out, v = [], start
        while v <= self.hi + step * 1e-9 and len(out) < 20:
            out.append((0.0 if abs(v) < step * 1e-9 else v, self._label(v, step)))
            v += step
        return out

    def _label(self, v: float, step: float) -> str:
        if abs(v) < step * 1e-9:
            return "0"
        if self.si or abs(v) >= 1e4:
            return si(v)
        digits = max(0, -math.floor(math.log10(step))) if step < 1 else 0
        return f"{v:.{digits}f}"


def _nice(raw: float) -> float:
    if raw <= 0:
        return 1.0
    mag = 10 ** math.floor(math.log10(raw))
    return next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)


def _extent(kind: str, vals: list[float], zero: bool, fixed) -> tuple[float, float]:
    if fixed is not None and len(fixed) == 2 and None not in fixed:
        return float(fixed[0]), float(fixed[1])
    if kind == "log":
        vals = [math.log10(v) for v in vals if v and v > 0]
        if not vals:
            return 0.0, 1.0
        lo, hi = min(vals), max(vals)
        pad = max(0.1, (hi - lo) * 0.06)
        return lo - pad, hi + pad
    vals = [v for v in vals if v is not None and math.isfinite(v)] + ([0.0] if zero else [])
    if not vals:
        return 0.0, 1.0
    lo, hi = min(vals), max(vals)
    if lo == hi:
        lo, hi = (lo - 1, hi + 1) if lo else (0.0, 1.0)
    pad = (hi - lo) * 0.05
    return (lo if zero and lo >= 0 else lo - pad), (hi if zero and hi <= 0 else hi + pad)


def _axis_key(name: str | None, letter: str) -> str:
    """``x2`` -> ``xaxis2`` (plotly's layout key of a trace's axis)."""
    name = name or letter
    return f"{letter}axis{name[1:]}"


# ----------------------------------------------------------------------------- the figure


def figure_svg(fig, chart_id: str = "", width: int = WIDTH) -> str:
    """``fig`` (a plotly figure) as one ``<svg>`` element that scales to its box's width."""
    lay = fig.layout
    height = int(lay.height or 400)
    font = float((lay.font.size if lay.font else None) or 13)
    traces = list(fig.data)
    title = (lay.title.text if lay.title else None) or ""
    title_lines = textwrap.wrap(re.sub(r"<[^>]*>", " ", title), max(20, int((width - 20) / (15 * CHAR)))) if title else []
    top = 8 + 20 * len(title_lines)
    legend = _legend_items(traces, lay)
    out: list[str] = []
    if title_lines:
        out += [f"<text x='10' y='{22 + 20 * i}' font-size='15' fill='{INK}'>{_e(t)}</text>"
                for i, t in enumerate(title_lines)]
    if legend:
        top, items = _legend(legend, top, width, font)
        out.append(items)
    treemaps = [t for t in traces if t.type == "treemap"]
    if treemaps:
        out.append(_treemap(treemaps[0], 6, top + 4, width - 6, height - 6, font))
    else:
        out.append(_cartesian(fig, traces, top, width, height, font))
    aid = f" id='{_e(chart_id)}'" if chart_id else ""
    return (f"<svg{aid} class='xe-chart' xmlns='http://www.w3.org/2000/svg' viewBox='0 0 {width} {height}' "
            f"width='100%' role='img' aria-label='{_e(title)}' font-family='system-ui, sans-serif' "
            f"font-size='{font:g}'>" + "".join(out) + "</svg>")


def _color_of(t) -> str:
    m = getattr(t, "marker", None)
    c = getattr(m, "color", None) if m is not None else None
    if isinstance(c, str):
        return c
    line = getattr(t, "line", None)
    lc = getattr(line, "color", None) if line is not None else None
    return lc if isinstance(lc, str) else "#777777"


def _legend_items(traces, lay) -> list[tuple[str, str]]:
    items, seen = [], set()
    for t in traces:
        if t.type == "treemap" or t.showlegend is False or not t.name or t.name in seen:
            continue
        seen.add(t.name)
        items.append((t.name, _color_of(t)))
    return items if (len(items) > 1 or lay.showlegend) and lay.showlegend is not False else []


def _legend(items, top: float, width: float, font: float) -> tuple[float, str]:
    """The legend as rows of swatches under the title: (the top below it, its markup)."""
    size = font - 1
    x, y, out = 10.0, top + 6, []
    for name, color in items:
        label = _short(name, 40)
        w = 16 + _text_width(label, size) + 14
        if x + w > width - 10 and x > 10:
            x, y = 10.0, y + size + 8
        out.append(f"<rect x='{x:.1f}' y='{y:.1f}' width='11' height='11' rx='2' fill='{_e(color)}'/>"
                   f"<text x='{x + 15:.1f}' y='{y + 10:.1f}' font-size='{size:g}' fill='{INK}'>{_e(label)}</text>")
        x += w
    return y + size + 8, "<g class='legend'>" + "".join(out) + "</g>"


def _subplots(fig, traces) -> dict[tuple[str, str], list]:
    pairs: dict[tuple[str, str], list] = {}
    for t in traces:
        if t.type not in ("bar", "scatter"):
            continue
        pairs.setdefault((t.xaxis or "x", t.yaxis or "y"), []).append(t)
    # an axis declared with no trace on it (a subplot left empty) is not drawn
    return pairs


def _values(t, letter: str) -> list:
    return _list(getattr(t, letter)) or []


def _cartesian(fig, traces, top: float, width: float, height: float, font: float) -> str:
    lay = fig.layout
    pairs = _subplots(fig, traces)
    if not pairs:
        return _annotations(lay, {}, (10, top, width - 10, height - 10), font)
    tick = font - 1
    axes: dict[str, Axis] = {}
    barmode = lay.barmode or "group"
    # each axis's kind and extent, from the traces on it
    for (xn, yn), ts in pairs.items():
        for letter, name in (("x", xn), ("y", yn)):
            key = _axis_key(name, letter)
            if key in axes:
                continue
            la = lay[key] if key in lay else None
            on = [t for (a, b), tt in pairs.items() for t in tt if (a if letter == "x" else b) == name]
            axes[key] = _make_axis(la, letter, on, barmode)
    # the margins: the widest tick label on the left, the titles, text beyond bars on the right
    left = 8.0
    for key, ax in axes.items():
        if key.startswith("yaxis") and ax.visible and ax.ticklabels:
            left = max(left, 8 + max((_text_width(lab, tick) for _, lab in ax.ticks()), default=0))
    if any(k.startswith("yaxis") and ax.visible and ax.title for k, ax in axes.items()):
        left += font + 6
    outside = any(t.type == "bar" and t.orientation == "h" and t.text is not None
                  and t.textposition in ("outside", "auto") for t in traces)
    right = 14 + (60 if outside else 0)
    bottom = 8 + (tick + 6 if any(k.startswith("xaxis") and a.visible and a.ticklabels for k, a in axes.items()) else 0)
    if any(k.startswith("xaxis") and a.visible and a.title for k, a in axes.items()):
        bottom += font + 8
    if any(a.xref == "paper" and (a.y or 0) >= 1 for a in (lay.annotations or ())):
        top += font + 8
    if any(t.type == "bar" and t.orientation != "h" and t.textposition == "outside" for t in traces):
        top += font + 4
    box = (left, top, width - right, height - bottom)
    # each axis's place: its subplot's share of the box
    for key, ax in axes.items():
        la = lay[key] if key in lay else None
        d = list(la.domain) if la is not None and la.domain else [0.0, 1.0]
        if key.startswith("xaxis"):
            ax.a, ax.b = box[0] + d[0] * (box[2] - box[0]), box[0] + d[1] * (box[2] - box[0])
        else:
            ax.a, ax.b = box[3] - d[0] * (box[3] - box[1]), box[3] - d[1] * (box[3] - box[1])
    out = []
    for (xn, yn), ts in pairs.items():
        xa, ya = axes[_axis_key(xn, "x")], axes[_axis_key(yn, "y")]
        out.append(_grid_and_axes(xa, ya, tick, font))
        stacks: dict = {}
        bars = [t for t in ts if t.type == "bar"]
        for t in ts:
            if t.type == "bar":
                out.append(_bars(t, xa, ya, barmode, bars.index(t), len(bars), stacks, font))
            else:
                out.append(_scatter(t, xa, ya, stacks))
    out.append(_shapes(lay, axes, box))
    out.append(_annotations(lay, axes, box, font))
    return "".join(out)


def _make_axis(la, letter: str, traces, barmode: str) -> Axis:
    vals, cats, zero = [], [], False
    stacked: dict = {}
    for t in traces:
        own = _values(t, letter)
        h = t.type == "bar" and t.orientation == "h"
        length_axis = t.type == "bar" and (letter == "x") == h  # the axis the bars' lengths are on
        if any(isinstance(v, str) for v in own):
            for v in own:
                if v not in cats:
                    cats.append(v)
            continue
        if length_axis:
            zero = True
            other = _values(t, "y" if letter == "x" else "x")
            base = _each(t.base, len(own), 0.0)
            on_stack = barmode == "stack" and t.base is None  # (read once, not per bar)
            err = t.error_y if letter == "y" else None
            up, down = ((_each(err.array, len(own), 0), _each(err.arrayminus, len(own), 0))
                        if err is not None and err.array is not None else (None, None))
            for i, v in enumerate(own):
                if v is None:
                    continue
                start = (base[i] or 0.0)
                if on_stack:
                    k = other[i] if i < len(other) else i
                    start = stacked.get(k, 0.0)
                    stacked[k] = start + v
                vals += [start, start + v]
                if up is not None:
                    vals += [start + v + (up[i] or 0), start + v - (down[i] or 0)]
        elif t.type == "scatter" and t.stackgroup and letter == "y":
            xs, group = _values(t, "x"), t.stackgroup  # (a figure's attribute is read once: docs/performance.md)
            for i, v in enumerate(own):
                k = (group, xs[i] if i < len(xs) else i)
                stacked[k] = stacked.get(k, 0.0) + (v or 0.0)
                vals.append(stacked[k])
            zero = True
        else:
            vals += [v for v in own if isinstance(v, (int, float))]
    kind = "category" if cats else ("log" if la is not None and la.type == "log" else "linear")
    if la is not None and la.rangemode == "tozero":
        zero = True
    if kind == "category" and la is not None and la.categoryorder == "array" and la.categoryarray:
        order = list(la.categoryarray)
        cats = [c for c in order if c in cats] + [c for c in cats if c not in order]
    ax = Axis(kind=kind, cats=cats)
    if kind != "category":
        ax.lo, ax.hi = _extent(kind, vals, zero, list(la.range) if la is not None and la.range else None)
    if la is not None:
        ax.visible = la.visible is not False
        ax.ticklabels = la.showticklabels is not False
        ax.title = (la.title.text if la.title else None) or ""
        ax.si = la.exponentformat == "SI"
    return ax


def _grid_and_axes(xa: Axis, ya: Axis, tick: float, font: float) -> str:
    x0, x1, y0, y1 = min(xa.a, xa.b), max(xa.a, xa.b), min(ya.a, ya.b), max(ya.a, ya.b)
    out = ["<g class='axes'>"]
    for ax, vertical in ((xa, True), (ya, False)):
        if not ax.visible:
            continue
        for v, label in ax.ticks():
            p = ax.px(v)
            if p is None:
                continue
            if vertical:
                if ax.kind != "category":
                    out.append(f"<line x1='{p:.1f}' y1='{y0:.1f}' x2='{p:.1f}' y2='{y1:.1f}' stroke='{GRID}'/>")
                if ax.ticklabels:
                    out.append(f"<text x='{p:.1f}' y='{y1 + tick + 3:.1f}' text-anchor='middle' font-size='{tick:g}' "
                               f"fill='{INK}'>{_e(label)}</text>")
            else:
                if ax.kind != "category":
                    out.append(f"<line x1='{x0:.1f}' y1='{p:.1f}' x2='{x1:.1f}' y2='{p:.1f}' stroke='{GRID}'/>")
                if ax.ticklabels:
                    full = f"<title>{_e(v)}</title>" if ax.kind == "category" and label != str(v) else ""
                    out.append(f"<text x='{x0 - 5:.1f}' y='{p + tick * 0.35:.1f}' text-anchor='end' font-size='{tick:g}' "
                               f"fill='{INK}'>{full}{_e(label)}</text>")
    if xa.visible:
        out.append(f"<line x1='{x0:.1f}' y1='{y1:.1f}' x2='{x1:.1f}' y2='{y1:.1f}' stroke='#999'/>")
        if xa.title:
            y = y1 + (tick + 6 if xa.ticklabels else 0) + font + 4
            out.append(f"<text x='{(x0 + x1) / 2:.1f}' y='{y:.1f}' text-anchor='middle' fill='{INK}'>{_e(xa.title)}</text>")
    if ya.visible and ya.title:
        out.append(f"<text transform='translate({font:.1f},{(y0 + y1) / 2:.1f}) rotate(-90)' text-anchor='middle' "
                   f"fill='{INK}'>{_e(ya.title)}</text>")
    out.append("</g>")
    return "".join(out)


def _bars(t, xa: Axis, ya: Axis, barmode: str, index: int, count: int, stacks: dict, font: float) -> str:
    h = t.orientation == "h"
    pos_ax, len_ax = (ya, xa) if h else (xa, ya)
    lengths, places = (_values(t, "x"), _values(t, "y")) if h else (_values(t, "y"), _values(t, "x"))
    n = len(lengths)
    base = _each(t.base, n)
    marker = t.marker
    colors = _each(marker.color if marker else None, n, "#777777")
    lw = _each(marker.line.width if marker and marker.line else None, n, 0)
    lc = _each(marker.line.color if marker and marker.line else None, n, None)
    texts = _each(t.text, n, None)
    custom = _each(t.customdata, n, None)
    err = t.error_y if not h and t.error_y is not None and t.error_y.array is not None else None
    opacity = t.opacity if t.opacity is not None else 1.0
    band = pos_ax.band() if pos_ax.kind == "category" else 20.0
    thick = band * 0.8 / (count if barmode == "group" else 1)
    out = [f"<g class='bars'{'' if opacity == 1 else f' opacity={opacity:g}'}>"]
    # the figure's attributes read once, not per bar (each read is plotly's validation: docs/performance.md)
    on_stack, template, name, where = barmode == "stack" and t.base is None, t.hovertemplate, t.name or "", \
        t.textposition or "auto"
    if err is not None:
        ups, downs = _each(err.array, n, 0), _each(err.arrayminus, n, 0)
        cap, col, thickness = (err.width or 4) / 2, _e(err.color or INK), err.thickness or 1
    for i in range(n):
        v, at = lengths[i], places[i] if i < len(places) else i
        c = pos_ax.px(at)
        if v is None or c is None:
            continue
        start = base[i] if base[i] is not None else 0.0
        if on_stack:
            start = stacks.get((id(len_ax), at), 0.0)
            stacks[(id(len_ax), at)] = start + v
        if barmode == "group":
            c = c - band * 0.4 + thick * (index + 0.5)
        p0, p1 = len_ax.px(start), len_ax.px(start + v)
        if p0 is None or p1 is None:
            continue
        lo, hi = min(p0, p1), max(p0, p1)
        if hi - lo < 0.5:
            hi = lo + 0.5
        x, y, w, hh = (lo, c - thick / 2, hi - lo, thick) if h else (c - thick / 2, lo, thick, hi - lo)
        point = {"x": v if h else at, "y": at if h else v, "text": texts[i], "customdata": custom[i], "base": start}
        kernel = f" data-kernel='{_e(custom[i])}'" if custom[i] else ""
        stroke = f" stroke='{_e(lc[i])}' stroke-width='{lw[i]:g}'" if lw[i] and lc[i] else ""
        out.append(f"<rect x='{x:.1f}' y='{y:.1f}' width='{w:.1f}' height='{hh:.1f}' fill='{_e(colors[i])}'{stroke}"
                   f"{kernel}>{_title(hover(template, point, name))}</rect>")
        if err is not None:
            up, down = ups[i] or 0, downs[i] or 0
            top, bot = len_ax.px(start + v + up), len_ax.px(start + v - down)
            if top is not None and bot is not None:
                out.append(f"<path d='M{c:.1f} {top:.1f}V{bot:.1f}M{c - cap:.1f} {top:.1f}H{c + cap:.1f}"
                           f"M{c - cap:.1f} {bot:.1f}H{c + cap:.1f}' stroke='{col}' stroke-width='{thickness:g}'/>")
        text = texts[i]
        if text:
            out.append(_bar_text(str(text), where, h, x, y, w, hh, font - 1,
                                 len_ax.px(start + v + (ups[i] or 0)) if err is not None else None))
    out.append("</g>")
    return "".join(out)


def _bar_text(text: str, where: str, h: bool, x, y, w, hh, size: float, above: float | None) -> str:
    tw = _text_width(text, size)
    inside = where in ("inside", "auto") and (tw + 6 <= (w if h else hh)) and (hh if h else w) >= size
    if where == "inside" and not inside:
        text = _fits(text, size, (w if h else hh) - 6) if (hh if h else w) >= size else ""
        inside = bool(text)
        if not inside:
            return ""
    if h:
        cy = y + hh / 2 + size * 0.35
        if inside:
            return (f"<text x='{x + w / 2:.1f}' y='{cy:.1f}' text-anchor='middle' font-size='{size:g}' fill='#fff' "
                    f"pointer-events='none'>{_e(text)}</text>")
        return f"<text x='{x + w + 4:.1f}' y='{cy:.1f}' font-size='{size:g}' fill='{INK}' pointer-events='none'>{_e(text)}</text>"
    cx = x + w / 2
    if inside:
        return (f"<text x='{cx:.1f}' y='{y + size + 2:.1f}' text-anchor='middle' font-size='{size:g}' fill='#fff' "
                f"pointer-events='none'>{_e(text)}</text>")
    ty = min(y, above if above is not None else y) - 4
    return f"<text x='{cx:.1f}' y='{ty:.1f}' text-anchor='middle' font-size='{size:g}' fill='{INK}' pointer-events='none'>{_e(text)}</text>"


def _scatter(t, xa: Axis, ya: Axis, stacks: dict) -> str:
    xs, ys = _values(t, "x"), _values(t, "y")
    n = min(len(xs), len(ys))
    mode = t.mode or "lines+markers"
    color = _color_of(t)
    out = ["<g class='scatter'>"]
    # a figure's attributes are read once, not per point: each read is plotly's validation, and
    # per point they were most of a 96-layer report's charts (docs/performance.md)
    group, name, template = t.stackgroup, t.name or "", t.hovertemplate
    if group:
        lows = [stacks.get((group, xs[i]), 0.0) for i in range(n)]
        highs = [lows[i] + (ys[i] or 0.0) for i in range(n)]
        for i in range(n):
            stacks[(group, xs[i])] = highs[i]
        top = [(xa.px(xs[i]), ya.px(highs[i])) for i in range(n)]
        bot = [(xa.px(xs[i]), ya.px(lows[i])) for i in range(n)][::-1]
        pts = [p for p in top + bot if None not in p]
        if pts:
            d = "M" + "L".join(f"{px:.1f} {py:.1f}" for px, py in pts) + "Z"
            out.append(f"<path d='{d}' fill='{_e(color)}' fill-opacity='0.55' stroke='{_e(color)}' stroke-width='0.5'>"
                       f"{_title(name)}</path>")
        out.append("</g>")
        return "".join(out)
    pts = [(xa.px(xs[i]), ya.px(ys[i])) for i in range(n)]
    if "lines" in mode:
        line = t.line
        dash = {"dot": "2 3", "dash": "6 4", "dashdot": "6 3 2 3"}.get(line.dash if line else None, "")
        d = "M" + "L".join(f"{px:.1f} {py:.1f}" for px, py in pts if px is not None and py is not None)
        width = (line.width if line and line.width is not None else 2)
        out.append(f"<path d='{d}' fill='none' stroke='{_e(color)}' stroke-width='{width:g}'"
                   + (f" stroke-dasharray='{dash}'" if dash else "") + f">{_title(t.name or '')}</path>")
    if "markers" in mode:
        m = t.marker
        sizes = _each(m.size if m else None, n, 6)
        fills = _each(m.color if m else None, n, color)
        lc = _each(m.line.color if m and m.line else None, n, "white")
        lw = _each(m.line.width if m and m.line else None, n, 0)
        texts, custom = _each(t.text, n, None), _each(t.customdata, n, None)
        for i, (px, py) in enumerate(pts):
            if px is None or py is None:
                continue
            point = {"x": xs[i], "y": ys[i], "text": texts[i], "customdata": custom[i]}
            kernel = f" data-kernel='{_e(custom[i])}'" if custom[i] else ""
            out.append(f"<circle cx='{px:.1f}' cy='{py:.1f}' r='{(sizes[i] or 6) / 2:.1f}' fill='{_e(fills[i])}' "
                       f"fill-opacity='0.85' stroke='{_e(lc[i])}' stroke-width='{lw[i] or 0:g}'{kernel}>"
                       f"{_title(hover(template, point, name))}</circle>")
    out.append("</g>")
    return "".join(out)


def _ref(ref: str | None, v, axes: dict, box, letter: str) -> float | None:
    """A shape's or annotation's coordinate in pixels: ``paper``, an axis (``x2``) or its domain
    (``y domain``)."""
    ref = ref or "paper"
    if ref == "paper":
        return box[0] + v * (box[2] - box[0]) if letter == "x" else box[3] - v * (box[3] - box[1])
    name = ref.split()[0]
    ax = axes.get(_axis_key(name, letter))
    if ax is None:
        return None
    if ref.endswith("domain"):
        return ax.a + v * (ax.b - ax.a)
    return ax.px(v)


def _shapes(lay, axes: dict, box) -> str:
    out = []
    for s in lay.shapes or ():
        if s.type != "line":
            continue
        x0, x1 = _ref(s.xref, s.x0, axes, box, "x"), _ref(s.xref, s.x1, axes, box, "x")
        y0, y1 = _ref(s.yref, s.y0, axes, box, "y"), _ref(s.yref, s.y1, axes, box, "y")
        if None in (x0, x1, y0, y1):
            continue
        line = s.line
        dash = {"dot": "2 3", "dash": "6 4"}.get(line.dash if line else None, "")
        out.append(f"<line x1='{x0:.1f}' y1='{y0:.1f}' x2='{x1:.1f}' y2='{y1:.1f}' stroke='{_e(line.color or INK)}' "
                   f"stroke-width='{line.width or 1:g}'" + (f" stroke-dasharray='{dash}'" if dash else "") + "/>")
    return "".join(out)


def _annotations(lay, axes: dict, box, font: float) -> str:
    out = []
    for a in lay.annotations or ():
        if not a.text or a.x is None or a.y is None:
            continue
        x, y = _ref(a.xref, a.x, axes, box, "x"), _ref(a.yref, a.y, axes, box, "y")
        if x is None or y is None:
            continue
        size = (a.font.size if a.font and a.font.size else font)
        color = (a.font.color if a.font and a.font.color else INK)
        lines = re.sub(r"<[^>]*>", "", re.sub(r"<br\s*/?>", "\n", a.text)).split("\n")
        if a.showarrow:  # the text centred at the arrow's tail, ``ax``, ``ay`` pixels from its head
            tx, ty = x + (a.ax if a.ax is not None else -10), y + (a.ay if a.ay is not None else -30)
            wide = max(_text_width(s, size) for s in lines)
            tx = min(max(tx, box[0] + wide / 2), box[2] - wide / 2)  # kept inside the drawing
            ty = max(ty, box[1] + size)
            out.append(f"<line x1='{x:.1f}' y1='{y:.1f}' x2='{tx:.1f}' y2='{ty:.1f}' stroke='{_e(color)}'/>")
            if a.bgcolor:
                out.append(f"<rect x='{tx - wide / 2 - 3:.1f}' y='{ty - size * 0.5 - 3:.1f}' width='{wide + 6:.1f}' "
                           f"height='{len(lines) * (size + 2) + 4:.1f}' fill='#fff' fill-opacity='0.85'/>")
            x, anchor, base = tx, "middle", ty + size * 0.35
        else:
            anchor = {"left": "start", "right": "end"}.get(a.xanchor, "middle")
            base = y - 4 - (len(lines) - 1) * (size + 2) if a.yanchor == "bottom" else y + size
        out.append("".join(f"<text x='{x:.1f}' y='{base + i * (size + 2):.1f}' text-anchor='{anchor}' "
                           f"font-size='{size:g}' fill='{_e(color)}'>{_e(s)}</text>" for i, s in enumerate(lines)))
    return "".join(out)


# ----------------------------------------------------------------------------- treemap


def squarify(values: list[float], x: float, y: float, w: float, h: float) -> list[tuple[float, float, float, float]]:
    """Rectangles (x, y, w, h) tiling the box, one per value in order, each with an area in
    proportion to its value and as near a square as a row of them allows (Bruls, Huizing and
    van Wijk's squarified treemap)."""
    total = sum(values)
    if total <= 0 or w <= 0 or h <= 0:
        return [(x, y, 0.0, 0.0) for _ in values]
    scale = w * h / total
    areas = [v * scale for v in values]
    order = sorted(range(len(values)), key=lambda i: -areas[i])
    rects: dict[int, tuple] = {}
    row: list[int] = []

    def worst(r, side):
        s = sum(areas[i] for i in r)
        if s <= 0:
            return math.inf
        big, small = max(areas[i] for i in r), min(areas[i] for i in r)
        return max(side * side * big / (s * s), (s * s) / (side * side * max(small, 1e-12)))

    def lay_row(r, x, y, w, h):
        s = sum(areas[i] for i in r)
        if w >= h:  # a column on the left
            cw = s / h if h else 0
            yy = y
            for i in r:
                ih = areas[i] / cw if cw else 0
                rects[i] = (x, yy, cw, ih)
                yy += ih
            return x + cw, y, w - cw, h
        rh = s / w if w else 0
        xx = x
        for i in r:
            iw = areas[i] / rh if rh else 0
            rects[i] = (xx, y, iw, rh)
            xx += iw
        return x, y + rh, w, h - rh

    for i in order:
        side = min(w, h)
        if not row or worst(row + [i], side) <= worst(row, side):
            row.append(i)
        else:
            x, y, w, h = lay_row(row, x, y, w, h)
            row = [i]
    if row:
        lay_row(row, x, y, w, h)
    return [rects.get(i, (x, y, 0.0, 0.0)) for i in range(len(values))]


def _ink_on(color: str) -> str:
    m = re.fullmatch(r"#([0-9a-fA-F]{6})", color or "")
    if not m:
        return "#fff"
    r, g, b = (int(m.group(1)[i:i + 2], 16) for i in (0, 2, 4))
    return "#222" if 0.299 * r + 0.587 * g + 0.114 * b > 160 else "#fff"


def _treemap(t, x0: float, y0: float, x1: float, y1: float, font: float) -> str:
    ids, labels, parents = _list(t.ids) or [], _list(t.labels) or [], _list(t.parents) or []
    values = _list(t.values) or []
    n = len(ids)
    colors = _each(t.marker.colors if t.marker else None, n, "#777777")
    custom = _each(t.customdata, n, None)
    kids: dict[str, list[int]] = {}
    for i in range(n):
        kids.setdefault(parents[i] if i < len(parents) else "", []).append(i)
    total = sum(values[i] for i in kids.get("", []) if values[i]) or 1.0
    size = font - 1
    out = ["<g class='treemap'>"]

    def draw(children: list[int], x, y, w, h):
        children = [i for i in children if values[i] and values[i] > 0]
        for i, (rx, ry, rw, rh) in zip(children, squarify([values[i] for i in children], x, y, w, h)):
            if rw < 1 or rh < 1:
                continue
            label, share = str(labels[i]), values[i] / total
            point = {"label": label, "value": values[i], "percentRoot": share}
            kernel = f" data-kernel='{_e(custom[i])}'" if custom[i] else ""
            inner = kids.get(ids[i])
            fill = colors[i]
            out.append(f"<rect x='{rx:.1f}' y='{ry:.1f}' width='{rw:.1f}' height='{rh:.1f}' fill='{_e(fill)}' "
                       f"fill-opacity='{0.55 if inner else 1}' stroke='#fff' stroke-width='1.5'{kernel}>"
                       f"{_title(hover(t.hovertemplate, point))}</rect>")
            ink = INK if inner else _ink_on(fill)
            head = f"{label} {share:.0%}"
            if inner and rh > size + 10:
                text = _fits(head, size, rw - 8)
                if text:
                    out.append(f"<text x='{rx + 4:.1f}' y='{ry + size + 2:.1f}' font-size='{size:g}' fill='{ink}' "
                               f"pointer-events='none'>{_e(text)}</text>")
                draw(inner, rx + 3, ry + size + 6, rw - 6, rh - size - 9)
            elif inner:
                draw(inner, rx + 2, ry + 2, rw - 4, rh - 4)
            else:
                name, pct = _fits(label, size, rw - 8), f"{share:.0%}"
                if name and rh > size + 6:
                    out.append(f"<text x='{rx + 4:.1f}' y='{ry + size + 3:.1f}' font-size='{size:g}' fill='{ink}' "
                               f"pointer-events='none'>{_e(name)}</text>")
                    if rh > 2 * size + 10:
                        out.append(f"<text x='{rx + 4:.1f}' y='{ry + 2 * size + 6:.1f}' font-size='{size:g}' "
                                   f"fill='{ink}' pointer-events='none'>{_e(pct)}</text>")

    draw(kids.get("", []), x0, y0, x1 - x0, y1 - y0)
    out.append("</g>")
    return "".join(out)
