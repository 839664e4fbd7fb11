"""Charts drawn as SVG (analysis.render.chart_svg): plotly figures written here, by hand, drawn
with no chart library; bar lengths, stacks, subplots, a treemap's areas and log ticks are what
the figures' numbers say, and every name from a bundle is escaped."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

go = pytest.importorskip("plotly.graph_objects")

from analysis.render.chart_svg import figure_svg, hover, squarify  # noqa: E402

NS = "{http://www.w3.org/2000/svg}"


def _svg(fig) -> ET.Element:
    return ET.fromstring(figure_svg(fig, "c"))  # well-formed XML, or this raises


def _marks(root, tag="rect") -> dict[str, ET.Element]:
    return {e.get("data-kernel"): e for e in root.iter(NS + tag) if e.get("data-kernel") is not None}


def _f(e, a) -> float:
    return float(e.get(a))


def test_bars_are_as_long_as_their_values_and_name_their_kernels():
    fig = go.Figure()
    fig.add_bar(y=["fusion.1", "<img src=x>"], x=[3.0, 1.0], orientation="h", customdata=["fusion.1", "<img src=x>"],
                text=["3 µs", "1 µs"], hovertemplate="%{y}: %{x:.1f} µs<extra>Library call</extra>")
    fig.update_layout(title="Top kernels", height=200)
    markup = figure_svg(fig, "c")
    assert "<img" not in markup  # a kernel's name is text, never markup
    root = ET.fromstring(markup)
    bars = _marks(root)
    assert set(bars) == {"fusion.1", "<img src=x>"}
    a, b = bars["fusion.1"], bars["<img src=x>"]
    # both start at 0 (the same x), the first three times as long
    assert _f(a, "x") == _f(b, "x")
    assert _f(a, "width") / _f(b, "width") == pytest.approx(3.0, rel=0.01)
    assert a.find(NS + "title").text == "fusion.1: 3.0 µs · Library call"
    assert root.get("aria-label") == "Top kernels" and root.get("viewBox") == "0 0 640 200"


def test_stacked_bars_start_where_the_one_below_ends():
    fig = go.Figure()
    fig.add_bar(y=["step"], x=[2.0], orientation="h", customdata=["a"])
    fig.add_bar(y=["step"], x=[6.0], orientation="h", customdata=["b"])
    fig.update_layout(barmode="stack")
    bars = _marks(_svg(fig))
    a, b = bars["a"], bars["b"]
    assert _f(b, "x") == pytest.approx(_f(a, "x") + _f(a, "width"), abs=0.15)
    assert _f(b, "width") / _f(a, "width") == pytest.approx(3.0, rel=0.02)


def test_overlaid_bars_with_a_base_are_placed_on_one_axis():
    # a timeline: launches at 0 µs (10 long) and 30 µs (5 long)
    fig = go.Figure()
    fig.add_bar(base=[0.0, 30.0], x=[10.0, 5.0], y=["thread 1", "thread 1"], orientation="h", customdata=["k0", "k1"])
    fig.update_layout(barmode="overlay")
    bars = _marks(_svg(fig))
    k0, k1 = bars["k0"], bars["k1"]
    per_us = _f(k0, "width") / 10
    assert _f(k1, "x") - _f(k0, "x") == pytest.approx(30 * per_us, abs=0.2)
    assert _f(k1, "width") == pytest.approx(5 * per_us, abs=0.2)


def test_subplots_draw_each_panel_in_its_own_part_of_the_width():
    from plotly.subplots import make_subplots

    fig = make_subplots(rows=1, cols=2)
    fig.add_bar(x=["off", "on"], y=[8, 4], customdata=["k-off", "k-on"], row=1, col=1)
    fig.add_bar(x=["off", "on"], y=[100, 50], customdata=["b-off", "b-on"], row=1, col=2)
    bars = _marks(_svg(fig))
    left, right = (bars["k-off"], bars["k-on"]), (bars["b-off"], bars["b-on"])
    assert max(_f(e, "x") + _f(e, "width") for e in left) < min(_f(e, "x") for e in right)
    # each panel on its own scale: off is twice on in both
    for off, on in (left, right):
        assert _f(off, "height") / _f(on, "height") == pytest.approx(2.0, rel=0.02)


def test_squarify_gives_each_value_its_share_of_the_box():
    rects = squarify([6, 3, 1], 0, 0, 10, 6)  # 60 units of area: 36, 18 and 6
    for (x, y, w, h), area in zip(rects, (36, 18, 6)):
        assert w * h == pytest.approx(area)
        assert 0 <= x and x + w <= 10 + 1e-9 and 0 <= y and y + h <= 6 + 1e-9
    for i, (x, y, w, h) in enumerate(rects):  # no two overlap
        for (x2, y2, w2, h2) in rects[i + 1:]:
            assert max(0, min(x + w, x2 + w2) - max(x, x2)) * max(0, min(y + h, y2 + h2) - max(y, y2)) < 1e-9


def test_a_treemap_draws_its_leaves_in_proportion():
    fig = go.Figure(go.Treemap(ids=["lib", "lib/a", "lib/b"], labels=["Library", "a", "b"], parents=["", "lib", "lib"],
                               values=[4, 3, 1], branchvalues="total", customdata=["", "a", "b"],
                               hovertemplate="%{label}: %{percentRoot:.0%}<extra></extra>"))
    boxes = _marks(_svg(fig))
    a, b = boxes["a"], boxes["b"]
    area = lambda e: _f(e, "width") * _f(e, "height")  # noqa: E731
    assert area(a) / area(b) == pytest.approx(3.0, rel=0.03)
    assert a.find(NS + "title").text == "a: 75%"


def test_log_axis_ticks_are_decades():
    fig = go.Figure(go.Scatter(x=[0.01, 1000], y=[1e9, 1e11], mode="markers", customdata=["p", "q"]))
    fig.update_layout(xaxis=dict(type="log", exponentformat="SI"), yaxis=dict(type="log", exponentformat="SI"))
    root = _svg(fig)
    labels = [t.text for t in root.iter(NS + "text")]
    for tick in ("0.01", "0.1", "1", "10", "100", "1000", "1G", "10G", "100G"):
        assert tick in labels, (tick, labels)
    p, q = (_marks(root, "circle")[k] for k in ("p", "q"))
    assert _f(p, "cx") < _f(q, "cx") and _f(p, "cy") > _f(q, "cy")  # up and to the right


def test_hover_fills_a_template():
    t = "%{label}<br>%{value:.3g} µs · %{percentRoot:.1%}<extra>route</extra>"
    assert hover(t, {"label": "fusion", "value": 12.345, "percentRoot": 0.5}) == "fusion\n12.3 µs · 50.0% · route"
    assert hover("%{y:.3~f} KiB", {"y": 2.5}) == "2.5 KiB"


def test_a_trace_outside_the_drawn_part_is_left_out():
    fig = go.Figure(go.Pie(labels=["a", "b"], values=[1, 2]))
    fig.update_layout(title="a pie")
    root = _svg(fig)
    assert not list(root.iter(NS + "rect")) and not list(root.iter(NS + "path"))
    assert root.get("aria-label") == "a pie"
