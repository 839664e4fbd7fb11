"""The kernels & timings view: pure figure builders on a measured bundle, and the Streamlit
render function through AppTest. The bundle is measured once (a few iterations) and then
only read: the view never needs JAX."""

from __future__ import annotations

import pytest

from analysis.bundle.core import Bundle
from analysis.program.kernels import ROUTE_COLORS, ROUTE_LABELS
from app import kernels_view as kv


@pytest.fixture(scope="module")
def measured_json(tmp_path_factory):
    pytest.importorskip("jax")
    mp = pytest.MonkeyPatch()
    mp.setenv("XLA_EXPLORER_DATA", str(tmp_path_factory.mktemp("data")))
    from analysis.compile import fusion_off, load, measure, stages

    c = stages.compile_model(load.load_gallery("mlp"), "cpu")
    measure.measure(c, iterations=4)
    fusion_off.compare_fusion(c, measure_it=True, iterations=4)
    b = c.bundle
    mp.undo()
    return b.to_json()


@pytest.fixture()
def bundle(measured_json):
    # A fresh Bundle from JSON each time: exactly what the app holds (no compiled program).
    return Bundle.from_json(measured_json)


def test_table_rows_have_the_measured_columns(bundle):
    rows = kv.kernel_rows(bundle)
    assert {r["kernel"] for r in rows} == {k.name for k in bundle.kernels}
    for r in rows:
        assert r["time_us"] > 0 and r["calls"] >= 1 and 0 <= r["share"] <= 1
    times = [r["time_us"] for r in rows]
    assert times == sorted(times, reverse=True)


def test_top_kernels_bars_are_coloured_by_route(bundle):
    fig = kv.top_kernels_figure(bundle)
    assert fig.data
    names = set()
    for tr in fig.data:
        assert tr.type == "bar"
        route = next(r for r, lab in ROUTE_LABELS.items() if lab == tr.name)
        assert tr.marker.color == ROUTE_COLORS[route]
        names |= set(tr.customdata)
    assert names == set(bundle.timings["kernels"])


def test_treemap_is_route_library_kernel(bundle):
    tm = kv.treemap_figure(bundle).data[0]
    assert tm.type == "treemap"
    leaves = [i for i, c in zip(tm.ids, tm.customdata) if c]
    assert all(i.count("/") == 2 for i in leaves)
    assert {i.split("/")[0] for i in leaves} <= set(ROUTE_COLORS)
    assert set(tm.parents) - {""} <= set(tm.ids)


def test_timeline_shows_one_step(bundle):
    fig = kv.timeline_figure(bundle)
    n = sum(len(tr.x) for tr in fig.data)
    assert n == len(bundle.timings["timeline"]["events"])
    assert all(b >= 0 for tr in fig.data for b in tr.base)


def test_roofline_has_roofs_and_points(bundle):
    fig = kv.roofline_figure(bundle)
    assert fig.layout.xaxis.type == "log" and fig.layout.yaxis.type == "log"
    roofs = [tr for tr in fig.data if tr.mode == "lines"]
    points = [tr for tr in fig.data if tr.mode == "markers"]
    assert roofs and points
    assert all(y > 0 for tr in points for y in tr.y)


def test_fusion_comparison_reads_in_five_seconds(bundle):
    fig = kv.fusion_figure(bundle)
    fc = bundle.fusion_comparison
    assert f"{fc['unfused']['kernels']} → {fc['default']['kernels']} kernels" in fig.layout.title.text
    assert len(fig.data) == 3  # kernels, bytes, time
    rows = kv.fusion_table(bundle)
    assert [r[""] for r in rows] == ["kernels", "bytes moved by kernels (from shapes)", "call, no profiler (median, IQR)",
                                     "step, traced (median, IQR)", "kernels busy, share of the step"]


def test_unmeasured_bundle_still_draws(bundle):
    bundle.timings = None
    bundle.fusion_comparison = None
    figs = kv.figures(bundle)
    assert set(figs) == {"Top kernels", "Treemap", "Timeline", "Roofline", "Fusion off"}
    assert kv.top_kernels_figure(bundle).data  # bytes instead of time
    assert all(r["time_us"] is None for r in kv.kernel_rows(bundle))


def _app(bundle_json: str, prefix: str = "t"):
    def page():
        import streamlit as st

        from analysis.bundle.core import Bundle
        from app.kernels_view import render_kernels_view

        b = Bundle.from_json(st.session_state["bundle_json"])
        st.session_state["picked"] = render_kernels_view(b, key_prefix=st.session_state["prefix"])

    from streamlit.testing.v1 import AppTest

    at = AppTest.from_function(page, default_timeout=60)
    at.session_state["bundle_json"] = bundle_json
    at.session_state["prefix"] = prefix
    return at


def test_render_measured(measured_json):
    at = _app(measured_json).run()
    assert not at.exception
    assert len(at.dataframe) == 1
    assert [t.label for t in at.tabs] == ["Top kernels", "Treemap", "Timeline", "Roofline", "Fusion off"]
    assert at.session_state["picked"] is None
    assert any("step" in m.label for m in at.metric)
    assert at.get("download_button")
    # only the open chart is made: the fusion comparison's table shows once its tab is opened
    assert len(at.get("plotly_chart")) == 1 and len(at.table) == 0
    at.session_state["t_kv_charts"] = "Fusion off"
    at.run()
    assert not at.exception
    assert len(at.table) == 1 and len(at.get("plotly_chart")) == 1


def test_render_unmeasured(bundle):
    bundle.timings = None
    bundle.fusion_comparison = None
    at = _app(bundle.to_json(), prefix="").run()
    assert not at.exception
    assert any("Not measured" in c.value for c in at.caption)


def test_the_kernel_selected_in_the_graph_is_outlined_in_the_charts(bundle):
    from analysis.render.charts import SELECTED, roofline_figure, top_kernels_figure

    name = max(bundle.timings["kernels"].values(), key=lambda r: r["median_s"])["name"]
    fig = top_kernels_figure(bundle, selected=name)
    outlined = [(y, w) for tr in fig.data for y, w in zip(tr.y, tr.marker.line.width) if w]
    assert outlined == [(name, 4)]
    assert all(c == SELECTED for tr in fig.data for y, c in zip(tr.y, tr.marker.line.color) if y == name)
    roof = roofline_figure(bundle, selected=name)
    marked = [cd for tr in roof.data if tr.mode == "markers" for cd, w in zip(tr.customdata, tr.marker.line.width) if w == 4]
    k = bundle.kernel(name)
    # a kernel is a point on the roofline when it has both FLOPs and bytes (its arithmetic intensity)
    assert marked == ([name] if k.flops and k.bytes else [])


def test_numbers_that_went_the_other_way_read_as_such():
    """A negative difference keeps its unit (it printed "-1239904 ns"), and fusion that added time
    says so instead of a negative saving."""
    from analysis.bundle.core import Bundle
    from analysis.render.charts import fusion_table
    from analysis.render.format import human_seconds

    assert human_seconds(-0.00124) == "-1.24 ms" and human_seconds(0.00124) == "1.24 ms"
    side = {"kernels": 4, "bytes": 1000, "flops": 0, "call_median_s": 0.002, "call_q1_s": 0.0019,
            "call_q3_s": 0.0021, "iterations": 3, "top_kernels": [], "kernels_by_route": {}}
    fc = {"default": {**side, "call_median_s": 0.003, "call_q1_s": 0.0029, "call_q3_s": 0.0031},
          "unfused": {**side, "kernels": 9}, "measured": True}
    rows = {r[""]: r for r in fusion_table(Bundle(fusion_comparison=fc))}
    assert rows["kernels"]["change"] == "5 less (-56%)"
    # 2 ms unfused, 3 ms fused, the spreads apart: fusion cost 1 ms here, and the verdict says so
    call = rows["call, no profiler (median, IQR)"]
    assert call["change"] == "1.00 ms more (+50%)" and call["verdict"] == "fusion on is slower"


def test_the_roofline_ticks_use_si_prefixes(bundle):
    from analysis.render.charts import roofline_figure

    fig = roofline_figure(bundle)
    assert fig.layout.yaxis.exponentformat == "SI" and fig.layout.xaxis.exponentformat == "SI"


def _row(name, **kw):
    r = {"kernel": name, "route": "library", "library": "", "what": "", "fused_ops": [], "absorbed": 0,
         "lines": [], "other_lines": [], "calls": 1, "time_us": None, "share": None, "gib_s": None,
         "gflops": None, "pct_of_roof": None, "roof": None, "roof_note": "", "bytes": 0, "flops": 0, "inclusive": False, "context": ""}
    r.update(kw)
    return r


def test_the_kernel_table_reads_in_human_units_with_no_empty_columns():
    rows = [_row("dot.1", what="YNNPACK · dot", fused_ops=["dot", "add", "maximum"], absorbed=3, lines=[12, 14],
                 time_us=569.85, share=0.6, gib_s=3.0, gflops=117.8, pct_of_roof=40.0, roof="matmul", bytes=1703936,
                 flops=67108864),
             _row("copy.2", route="layout", what="layout · copy", lines=[20], other_lines=["lax.py:99"],
                  time_us=45.0, share=0.05, gib_s=11.6, bytes=524288)]
    styled, config = kv.table(rows, measured=True)
    df = styled.data
    # nothing in any row: library, % of peak for copy only... library and "inside" are empty everywhere
    assert "library" not in df.columns and "inside" not in df.columns
    assert {"what", "ops", "fused instructions", "source", "time", "bytes", "FLOPs", "GFLOP/s"} <= set(df.columns)
    # numbers stay numbers (sortable); the copy has no FLOP rate and sorts below every real one
    assert df["bytes"].tolist() == [1703936, 524288]
    assert df["GFLOP/s"].tolist()[1] < 0 < df["GFLOP/s"].tolist()[0]
    shown = styled.to_string(delimiter="|").splitlines()
    head = shown[0].split("|")
    dot = dict(zip(head, shown[1].split("|")))
    cp = dict(zip(head, shown[2].split("|")))
    assert dot["bytes"] == "1.6 MiB" and dot["FLOPs"] == "67.1 MFLOP" and dot["time"] == "569.9 µs"
    assert dot["fused instructions"] == "3: dot, add, maximum" and dot["source"] == "L12, L14" and dot["ops"] == "3"
    assert dot["GiB/s"] == "3" and dot["% of roof"] == "40%" and dot["roof"] == "matmul" and cp["GiB/s"] == "11.6"
    assert cp["GFLOP/s"] == "–" and cp["FLOPs"] == "–" and cp["source"] == "L20, lax.py:99"
    assert "None" not in "".join(shown) and "nan" not in "".join(shown).lower()
    assert set(config) <= set(df.columns)


def _shaded_cells(styled) -> tuple[dict[str, list[str]], set[str]]:
    """The table as the Styler writes it (``to_html``): the cells of each row, keyed by the row's
    kernel, and the cells a CSS rule gives a background colour (cell ids both)."""
    import re
    from html.parser import HTMLParser

    text = styled.to_html()
    css = "".join(re.findall(r"<style[^>]*>(.*?)</style>", text, flags=re.S))
    shaded = {sel.strip().lstrip("#") for sels, body in re.findall(r"([^{}]+)\{([^}]*)\}", css)
              if "background-color" in body for sel in sels.split(",")}

    class Cells(HTMLParser):
        def __init__(self):
            super().__init__()
            self.rows: list[list[tuple[str, str]]] = []
            self.cell: list | None = None

        def handle_starttag(self, tag, attrs):
            if tag == "tr":
                self.rows.append([])
            elif tag == "td" and self.rows:
                self.cell = [dict(attrs).get("id", ""), ""]

        def handle_data(self, data):
            if self.cell is not None:
                self.cell[1] += data

        def handle_endtag(self, tag):
            if tag == "td" and self.cell is not None:
                self.rows[-1].append(tuple(self.cell))
                self.cell = None

    p = Cells()
    p.feed(text)
    kernel_col = list(styled.data.columns).index("kernel")
    by_kernel = {r[kernel_col][1].strip(): [cid for cid, _ in r] for r in p.rows if r}
    return by_kernel, shaded


def test_the_selected_kernel_is_shaded_and_a_pinned_row_keeps_the_tables_columns():
    rows = [_row("a", library="YNNPACK", bytes=10), _row("b", bytes=20, context="while.3")]
    styled, _ = kv.table(rows, measured=False, selected="b")
    cells, shaded = _shaded_cells(styled)
    # the selected kernel's row is shaded, every cell of it, and nothing else is
    assert set(cells) == {"a", "b"} and len(cells["b"]) == len(styled.data.columns)
    assert shaded == set(cells["b"])
    _, none_shaded = _shaded_cells(kv.table(rows, measured=False)[0])
    assert none_shaded == set()  # with nothing selected, no row is
    pinned, _ = kv.table(rows[1:], measured=False, columns=list(styled.data.columns))
    assert list(pinned.data.columns) == list(styled.data.columns)


def _limited_app(bundle_json: str, limit: int, selected: str | None = None):
    def page():
        import streamlit as st

        from analysis.bundle.core import Bundle
        from app import kernels_view

        kernels_view.TABLE_ROWS = st.session_state["limit"]
        b = Bundle.from_json(st.session_state["bundle_json"])
        kernels_view.render_kernels_view(b, key_prefix="t", selected=st.session_state["selected"])

    from streamlit.testing.v1 import AppTest

    at = AppTest.from_function(page, default_timeout=60)
    at.session_state["bundle_json"] = bundle_json
    at.session_state["limit"] = limit
    at.session_state["selected"] = selected
    return at


def test_a_big_table_shows_the_busiest_kernels_and_all_on_request(bundle):
    # the table's time is the kernel's share of the step (docs/numbers.md), not its per-call
    # median: two kernels can come in either order by the one and not by the other
    times = {k: r["share"] for k, r in bundle.timings["kernels"].items()}
    assert len(times) >= 4
    busiest = sorted((k for k in times if not bundle.timings["kernels"][k].get("inclusive")),
                     key=lambda k: -times[k])[:2]
    least = min(times, key=times.get)
    at = _limited_app(bundle.to_json(), limit=2, selected=least).run()
    assert not at.exception
    tables = at.dataframe
    # the picked kernel pinned above, then the two busiest
    assert len(tables) == 2
    assert list(tables[0].value["kernel"]) == [least]
    assert list(tables[1].value["kernel"]) == busiest
    assert any(f"The 2 kernels with the most time, of {len(times)}" in c.value for c in at.caption)
    assert any("not among the rows shown" in c.value for c in at.caption)
    toggle = at.toggle(key="t_kv_all")
    assert toggle.label == f"All {len(times)} kernels (slower to draw)"
    toggle.set_value(True).run()
    assert not at.exception
    assert set(at.dataframe[-1].value["kernel"]) == set(times)


def test_an_unmeasured_big_table_keeps_the_kernels_with_the_most_bytes(bundle):
    bundle.timings = None
    want = [k.name for k in sorted(bundle.kernels, key=lambda k: -(k.bytes or 0))[:3]]
    at = _limited_app(bundle.to_json(), limit=3).run()
    assert not at.exception
    assert list(at.dataframe[0].value["kernel"]) == want
    assert any("with the most bytes read and written" in c.value for c in at.caption)


def test_a_traces_strings_show_as_themselves_in_a_caption():
    """A user's trace names its file and device; in a caption (markdown) they are text: no link,
    image, emphasis, code, colour directive or HTML (rendered here by a CommonMark renderer)."""
    import html

    markdown_it = pytest.importorskip("markdown_it")
    s = ("![x](http://e/a.png) **b** <img src=x> [l](javascript:alert(1)) `c` # h _i_ ~s~ $x$ :red[r] "
         "a\\b 1. vm_1.xplane.pb")
    # (with the word joiner, drawn as nothing, that keeps the URL from being linked by GitHub's Markdown)
    shown = markdown_it.MarkdownIt("commonmark").render(kv.plain(s)).strip()
    assert shown.replace("\u2060", "") == f"<p>{html.escape(s, quote=False)}</p>" and "http:\u2060//" in shown
