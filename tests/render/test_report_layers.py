"""A big program's offline report (analysis.render.report_layers): collapsed to its layers as
the app opens it, each layer's own graph built from its own instructions and laid out ahead,
identical layers laid out once, a layer opened in a real browser showing its ops. Expected
values come from the HLO written here (three layers under ``net``: ``blk0`` reads the input,
``blk1`` and ``blk2`` are the same layer with other names) and from tests/stack_hlo.py (eight
layers of 140 ops, one fusion each: big enough that the app opens it as layers)."""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import zlib

import pytest

from analysis.bundle.core import bundle_from_hlo
from analysis.render import layer_graph, report_layers
from analysis.render.report import html_report
from analysis.render.view_model import graph_views
from tests.stack_hlo import stack_texts
from tests.paths import ROOT

OUT = os.path.join(ROOT, "test-output", "report")
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"


def _scoped(last: str = "blk2") -> tuple[str, str]:
    pre = f"""HloModule scoped

ENTRY %main (x: f32[4], w0: f32[4], w1: f32[4], w2: f32[4]) -> f32[4] {{
  %x = f32[4]{{0}} parameter(0)
  %w0 = f32[4]{{0}} parameter(1)
  %w1 = f32[4]{{0}} parameter(2)
  %w2 = f32[4]{{0}} parameter(3)
  %mul.1 = f32[4]{{0}} multiply(%x, %w0), metadata={{op_name="jit(f)/net/blk0/dense/mul"}}
  %tanh.2 = f32[4]{{0}} tanh(%mul.1), metadata={{op_name="jit(f)/net/blk0/act/tanh"}}
  %mul.3 = f32[4]{{0}} multiply(%tanh.2, %w1), metadata={{op_name="jit(f)/net/blk1/dense/mul"}}
  %tanh.4 = f32[4]{{0}} tanh(%mul.3), metadata={{op_name="jit(f)/net/blk1/act/tanh"}}
  %mul.5 = f32[4]{{0}} multiply(%tanh.4, %w2), metadata={{op_name="jit(f)/net/{last}/dense/mul"}}
  ROOT %tanh.6 = f32[4]{{0}} tanh(%mul.5), metadata={{op_name="jit(f)/net/{last}/act/tanh"}}
}}
"""
    fused = []
    for i in range(3):
        scope = "blk" + str(i) if i < 2 else last
        fused.append(f"""%fused_{i} (p0: f32[4], p1: f32[4]) -> f32[4] {{
  %p0 = f32[4]{{0}} parameter(0)
  %p1 = f32[4]{{0}} parameter(1)
  %mul.{2 * i + 1} = f32[4]{{0}} multiply(%p0, %p1), metadata={{op_name="jit(f)/net/{scope}/dense/mul"}}
  ROOT %tanh.{2 * i + 2} = f32[4]{{0}} tanh(%mul.{2 * i + 1}), metadata={{op_name="jit(f)/net/{scope}/act/tanh"}}
}}
""")
    post = "HloModule scoped, is_scheduled=true\n\n" + "\n".join(fused) + """
ENTRY %main (x: f32[4], w0: f32[4], w1: f32[4], w2: f32[4]) -> f32[4] {
  %x = f32[4]{0} parameter(0)
  %w0 = f32[4]{0} parameter(1)
  %w1 = f32[4]{0} parameter(2)
  %w2 = f32[4]{0} parameter(3)
  %fusion.0 = f32[4]{0} fusion(%x, %w0), kind=kLoop, calls=%fused_0
  %fusion.1 = f32[4]{0} fusion(%fusion.0, %w1), kind=kLoop, calls=%fused_1
  ROOT %fusion.2 = f32[4]{0} fusion(%fusion.1, %w2), kind=kLoop, calls=%fused_2
}
"""
    return pre, post


def _bundle(last: str = "blk2"):
    pre, post = _scoped(last)
    return bundle_from_hlo(post, name="scoped", before_text=pre)


def _big():
    pre, post = stack_texts(8, per_layer=140)
    return bundle_from_hlo(post, name="stack", before_text=pre)


def _page_data(page: str) -> dict:
    start = page.index("<script type='application/octet-stream' id='xe-layers'>")
    text = page[page.index(">", start) + 1: page.index("</script>", start)]
    return json.loads(zlib.decompress(base64.b64decode(text)))


def test_each_layer_is_drawn_from_its_own_ops_with_what_it_reads():
    v = layer_graph.own_layer_specs(_bundle())
    assert set(v["pre"]) == set(v["post"]) == {"layers:net/blk0", "layers:net/blk1", "layers:net/blk2"}
    # before: the layer's ops, the weight it reads, and the layer it reads from as that layer's box
    assert set(v["pre"]["layers:net/blk0"].nodes) == {"p:x", "p:w0", "op:mul.1", "op:tanh.2"}
    assert set(v["pre"]["layers:net/blk1"].nodes) == {"L:net/blk0", "p:w1", "op:mul.3", "op:tanh.4"}
    assert {(e.src, e.dst) for e in v["pre"]["layers:net/blk1"].edges} == {
        ("L:net/blk0", "op:mul.3"), ("p:w1", "op:mul.3"), ("op:mul.3", "op:tanh.4")}
    # after: its fusion drawn open (its two fused ops), fed by the previous layer's box
    post = v["post"]["layers:net/blk2"]
    assert set(post.nodes) == {"L:net/blk1", "p:w2", "x:mul.5", "x:tanh.6", "k:fusion.2"}
    assert set(post.clusters) == {"f:fusion.2"}
    assert "its 2 ops" in v["pre"]["layers:net/blk2"].title and "its 1 kernel" in post.title


def test_identical_layers_share_one_layout_up_to_names():
    v = layer_graph.own_layer_specs(_bundle())
    for side in ("pre", "post"):
        dots = {n: report_layers.canonical(sp)[0] for n, sp in v[side].items()}
        assert dots["layers:net/blk1"] == dots["layers:net/blk2"] != dots["layers:net/blk0"]  # blk0 reads x, not a layer
        _, names = report_layers.canonical(v[side]["layers:net/blk2"])
        assert names["ids"] == list(v[side]["layers:net/blk2"].nodes) + list(v[side]["layers:net/blk2"].clusters)
    # the names come back in the template's order: the fusion's own label with its real number
    _, names = report_layers.canonical(v["post"]["layers:net/blk2"])
    i = names["ids"].index("k:fusion.2")
    assert names["lines"][i] == ["fusion.2", "f32[4]{0}"]
    assert report_layers.zeroed("fusion.2 f32[4]{0}") == "fusion.0000 f00[0]{0}"
    # a name's number at least four digits, a longer one as long as it is; other digits as many zeros
    assert report_layers.zeroed("add.12345\nbf16[128,7]{1,0} x.0") == "add.00000\nbf00[000,0]{0,0} x.0000"
    assert report_layers.zeroed("a..5 1.5") == "a..0000 0.0000"
    assert report_layers.zeroed("ж.7 f32[12]") == "ж.0000 f00[00]"
    assert report_layers.zeroed("x.٣ y.7") == "x.٣ y.0000"  # another script's digit: kept, laid out as it is


def test_a_small_program_is_drawn_whole():
    assert report_layers.layered_graphs(_bundle()) is None  # 10 instructions: the app opens it whole
    page = html_report(_bundle())
    assert "id='xe-layers'" not in page and "pre-op:mul.1" in page


def test_a_big_program_opens_as_its_layers_with_every_layer_laid_out_once_per_shape():
    b = _big()
    assert graph_views(b).as_layers
    page = html_report(b)
    assert "<select id='xe-layer'>" in page
    data = _page_data(page)
    assert data["order"] == [f"L:layer{i}" for i in range(8)]
    for side in ("pre", "post"):
        views = data["sides"][side]["views"]
        assert set(views) == set(data["order"])
        # layer0 reads the input, layers 1..7 the layer before: two layouts for the eight
        assert len(data["sides"][side]["templates"]) == 2
        assert all(t.startswith("<svg") for t in data["sides"][side]["templates"])
    ids = data["sides"]["pre"]["views"]["L:layer3"][1]["ids"]
    assert {"op:m3", "op:t3", "L:layer2"} <= set(ids) and len([i for i in ids if i.startswith("op:")]) == 140
    assert "k:fusion.3" in data["sides"]["post"]["views"]["L:layer3"][1]["ids"]
    assert data["kernel_box"]["fusion.5"] == "L:layer5" and data["op_box"]["m5"] == "L:layer5"
    # the page's collapsed views: the eight boxes, no op of a layer drawn on its own
    assert all(f"id=\"pre-L:layer{i}\"" in page and f"id=\"post-L:layer{i}\"" in page for i in range(8))
    assert "id=\"pre-op:m3\"" not in page


def test_a_layer_name_from_the_program_is_text_not_markup(monkeypatch):
    monkeypatch.setattr(layer_graph, "OPEN_AS_LAYERS", 3)
    evil = "<img src=x onerror=alert(1)>"
    page = html_report(_bundle(evil))
    markup = re.sub(r"<script\b[^>]*>.*?</script>", "", page, flags=re.S)  # (the DOT download is script data)
    assert evil not in markup
    assert "<option value='L:net/&lt;img src=x onerror=alert(1)&gt;'>net/&lt;img src=x onerror=alert(1)&gt;</option>" in markup
    data = _page_data(page)
    assert "L:net/" + evil in data["names"]  # the page's script writes it as text


@pytest.mark.browser
def test_opening_a_layer_in_chromium_shows_its_ops(monkeypatch):
    if not os.path.exists(CHROMIUM):
        pytest.fail("chromium is not installed (the README's test command installs it)")
    from playwright.sync_api import sync_playwright

    os.makedirs(OUT, exist_ok=True)
    path = os.path.join(OUT, "layers.html")
    with open(path, "w", encoding="utf-8") as f:
        f.write(html_report(_big()))
    requests, errors = [], []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        try:
            page = browser.new_page(viewport={"width": 1500, "height": 1000})
            page.route("**/*", lambda r: r.continue_() if r.request.url.startswith(("file://", "data:", "blob:"))
                       else (requests.append(r.request.url), r.abort()))
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto("file://" + path)
            page.wait_for_selector("body[data-layers='ready']", timeout=30_000)
            assert page.locator("#graph-pre g.node[id^='pre-L:']").count() == 8
            # no op of a layer on its own: only the program's last copy, which is in none
            assert page.locator("#graph-pre g.node[id^='pre-op:']").evaluate_all("ns => ns.map(n => n.id)") == ["pre-op:out"]
            # a layer double-clicked: its 140 ops before, its fusion after, the layer it reads as a box
            page.locator("#graph-pre [id='pre-L:layer3']").dispatch_event("dblclick", {"bubbles": True})
            page.wait_for_selector("#graph-pre .layer-view [id='pre-op:m3']", timeout=10_000)
            assert page.locator("#graph-pre .layer-view g.node[id^='pre-op:']").count() == 140
            assert page.locator("#graph-pre .layer-view [id='pre-op:t3']").count() == 1
            assert page.locator("#graph-pre .layer-view [id='pre-L:layer2']").count() == 1
            assert page.locator("#graph-post .layer-view [id='post-k:fusion.3']").count() == 1
            assert page.locator("#graph-pre .view[data-layers]").is_hidden()
            # the names are layer 3's, written into the shared layout: no zeroed placeholder shows
            texts = page.locator("#graph-post .layer-view text").all_text_contents()
            assert any("fusion.3" in t for t in texts) and not any("0000" in t for t in texts)
            page.screenshot(path=os.path.join(OUT, "layers-open.png"))
            # its kernel clicked: its ops light up (all 140 are in the one fusion)
            page.locator("#graph-post [id='post-k:fusion.3']").dispatch_event("click", {"bubbles": True})
            assert page.locator("#graph-pre g.node.xe-hl[id^='pre-op:']").count() == 140
            # another layer from the list, then back to all of them
            page.select_option("#xe-layer", "L:layer6")
            page.wait_for_selector("#graph-pre .layer-view [id='pre-op:m6']", timeout=10_000)
            assert page.locator("#graph-pre [id='pre-op:m3']").count() == 0
            page.click("#xe-all-layers")
            assert page.locator(".layer-view").count() == 0
            assert page.locator("#graph-pre .view[data-layers]").is_visible()
            # a kernel picked in the table opens its layer
            page.locator("a.kname[data-node='fusion.5']").click()
            page.wait_for_selector("#graph-post .layer-view [id='post-k:fusion.5'].xe-hl", timeout=10_000)
            assert page.input_value("#xe-layer") == "L:layer5"
        finally:
            browser.close()
    assert requests == [] and errors == [], (requests, errors)


def test_the_app_and_the_report_open_the_views_the_view_model_says():
    """One view model (``view_model.graph_views``): which views exist, which opens first, which
    are laid out ahead, how a layer opens; the app's payload and the report follow it."""
    from app.graph_payload import payload_core

    small, big = graph_views(_bundle()), graph_views(_big())
    small_layers = ["layers"] + [f"layers:net/blk{i}" for i in range(3)]
    assert small.names == ("default", "expanded", "collapsed", *small_layers) and small.first == "default"
    # a small program opens at default, its layers view laid out ahead, each layer opened in place when asked for
    assert small.eager == ("default", "expanded", "collapsed", "layers") and small.lazy == small_layers[1:]
    assert not small.as_layers and not small.layer_alone
    layers = ["layers"] + [f"layers:layer{i}" for i in range(8)]
    assert big.names == ("default", "expanded", "collapsed", *layers) and big.first == "layers"
    assert big.eager == ("layers",) and big.lazy == ["default", "expanded", "collapsed", *layers[1:]] and big.layer_alone
    p = payload_core(_big())
    assert p["open_variant"] == big.first and p["lazy"] == big.lazy
    assert all(set(g["variants"]) == set(big.eager) for g in p["graphs"].values())
    assert report_layers.layered_graphs(_bundle()) is None and report_layers.layered_graphs(_big()) is not None


def test_the_collapsed_view_is_the_apps_so_one_layout_serves_both():
    from app.graph_payload import variant_specs

    b = _big()
    lay = report_layers.layered_graphs(b)
    app = variant_specs(b, ["layers"])
    for side in ("pre", "post"):
        assert lay["sides"][side]["dot"] == app[side]["layers"].to_dot()  # the layout cache's key


def test_the_notebook_draws_a_big_program_as_its_layers():
    import xla_explorer as xe

    page = xe.show(_big()).html()
    assert "id='xe-layers'" in page and set(_page_data(page)["order"]) == {f"L:layer{i}" for i in range(8)}


def test_a_big_programs_graph_files_are_its_layers_view():
    from analysis.render.report import graph_exports

    files = graph_exports(_big())
    assert set(files) == {f"stack.{s}.{x}" for s in ("before", "after") for x in ("dot", "svg")}
    svg = files["stack.before.svg"][1].decode()
    assert all(f'id="L:layer{i}"' in svg for i in range(8)) and 'id="op:m3"' not in svg


def test_the_layer_graphs_made_while_xla_compiles_are_the_reports():
    """``compile_model(ahead=report_layers.LayersAhead())`` (the CLI's report) makes the layer
    graphs on a draft in the thread beside the compile; the compiled bundle finds that very
    value by its content, and a compile of the same program made without it makes the same."""
    import threading

    from analysis.compile.load import load_source
    from analysis.compile.stages import compile_model
    from sample_models._stack import stack_source

    made = []

    class Watched(report_layers.LayersAhead):
        def draft(self, draft):
            super().draft(draft)
            made.append((threading.current_thread() is not threading.main_thread(), report_layers.layer_graphs(draft)))

    report_layers.LAYER_GRAPHS.clear()
    loaded = load_source(stack_source(10), "stack10.py", "stack10")
    b = compile_model(loaded, "cpu", ahead=Watched()).bundle
    assert len(made) == 1 and made[0][0], "made once, beside the compile"
    got = report_layers.layer_graphs(b)
    assert got is not None and got is made[0][1]
    assert got["maps"]["order"] == [f"L:layer{i}" for i in range(10)]
    fresh = compile_model(load_source(stack_source(10), "stack10.py", "stack10"), "cpu").bundle
    report_layers.LAYER_GRAPHS.clear()  # made anew, not found
    again = report_layers.layer_graphs(fresh)
    assert again is not got
    assert [s["dot"] for s in again["sides"].values()] == [s["dot"] for s in got["sides"].values()]


def test_the_page_sections_made_while_xla_compiles_are_the_bundles_own():
    """The page's sections a draft holds all of (``report.draft_sections``: charts, kernel table,
    source, decisions, the graphs' links) are made on the draft beside the compile
    (``report.ReportAhead``, the CLI's report and ``xe.show``), found by the
    compiled bundle and put in its page; made from the compiled bundle itself they are the same."""
    from analysis.compile.load import load_source
    from analysis.compile.stages import compile_model
    from analysis.render import report
    from sample_models._stack import stack_source

    made = []

    class Watched(report.ReportAhead):
        def draft(self, draft):
            super().draft(draft)
            made.append(report.DRAFT_SECTIONS.get(draft, lambda: None))  # None: not made on the draft

    report.DRAFT_SECTIONS.clear()
    b = compile_model(load_source(stack_source(10), "stack10.py", "stack10"), "cpu", ahead=Watched()).bundle
    assert len(made) == 1 and made[0] is not None
    assert report.draft_sections(b) is made[0]
    page = report.html_report(b)
    assert all(made[0][k] in page for k in ("charts", "kernels", "source", "decisions", "links"))
    assert b.kernels and all(f"data-kernel='{k.name}'" in made[0]["kernels"] for k in b.kernels)
    report.DRAFT_SECTIONS.clear()
    own = report.draft_sections(b)  # made anew from the compiled bundle
    assert own is not made[0] and own == made[0]


def test_forms_that_differ_only_in_digit_counts_share_one_layout_as_wide_as_the_widest():
    from analysis.render.graph import Edge, GraphSpec, Node

    def layer(i: int, op: int) -> GraphSpec:
        g = GraphSpec(f"layer{i}")
        g.nodes["L:prev"] = Node("L:prev", f"layer{i - 1}\n3 ops", "op")
        g.nodes[f"op:add.{op}"] = Node(f"op:add.{op}", f"add.{op}\nf32[8]{{0}}", "op")
        g.edges = [Edge("L:prev", f"op:add.{op}")]
        return g

    forms: dict = {}
    for i, op in ((3, 7), (9, 12), (10, 123456), (11, 5)):  # layer10 reads from layer9, ...
        make, key, _ = report_layers.canonical_spec(layer(i, op))
        forms.setdefault(key, [make, []])[1].append(f"L:layer{i}")
    # three forms: layer3 and layer9 are one (names' numbers count four digits at least); layer11
    # reads from layer10 (one digit more), layer10's add.123456 has six
    assert len(forms) == 3
    merged = report_layers.merged(forms)
    assert len(merged) == 1 and merged[0][1] == ["L:layer3", "L:layer9", "L:layer10", "L:layer11"]
    spec = merged[0][0]()
    labels = sorted(n.label for n in spec.nodes.values())
    # each number as wide as its widest: "layer10" (2), "add.123456" (6), "f32" (2), "[8]" (1)
    assert labels == ["add.000000\nf00[0]{0}", "layer00\n0 ops"]
    # another graph (one more edge) is a layout of its own
    other = layer(12, 8)
    other.edges.append(Edge("op:add.8", "L:prev"))
    make, key, _ = report_layers.canonical_spec(other)
    forms[key] = [make, ["L:layer12"]]
    assert len(report_layers.merged(forms)) == 2


def test_each_layers_graph_before_optimization_made_ahead_is_the_one_made_after():
    # the report makes them from the module before optimization alone while XLA optimizes
    # (report_layers.LayersAhead.before), the boxes of the layers they read labelled once the
    # kernels are known: the same graphs as made from the whole bundle at once
    ahead_b = _bundle()
    report_layers.LayersAhead().before(ahead_b.module("hlo_before"))
    ahead = layer_graph.own_layer_specs(ahead_b)["pre"]
    fresh = layer_graph.own_layer_specs(_bundle())["pre"]
    assert list(ahead) == list(fresh)
    for name in fresh:
        assert ahead[name].to_dot() == fresh[name].to_dot() and ahead[name].title == fresh[name].title
    box = ahead["layers:net/blk1"].nodes["L:net/blk0"]
    assert "blk0" in box.label and "ops → 1 kernel" in box.label and "\x00" not in box.label + box.tooltip
    # a second bundle of the same module gets its own boxes: the graphs made ahead are not changed
    again = layer_graph.own_layer_specs(ahead_b)["pre"]
    assert again["layers:net/blk1"].nodes["L:net/blk0"].label == box.label


# ----------------------------------------------------------------------------- layers that share kernels


@pytest.fixture(scope="module")
def shared_stack():
    """A real compile of a six-layer decoder whose causal mask and rotary table are computed once
    and read by every layer (``sample_models._stack.shared_stack_source``): XLA's CSE merges what
    the layers compute alike, so kernels hold ops of several layers."""
    from analysis.compile.load import load_source
    from analysis.compile.stages import compile_model
    from sample_models._stack import shared_stack_source

    return compile_model(load_source(shared_stack_source(6), "shared6.py", "shared6"), "cpu").bundle


def test_layers_that_share_kernels_are_one_layout_up_to_what_they_share(shared_stack, monkeypatch):
    from analysis.program.layers import layers_of_bundle

    monkeypatch.setattr(layer_graph, "OPEN_AS_LAYERS", 100)  # opened as its layers, as a big one is
    b = shared_stack
    got = report_layers.layer_graphs(b)
    box = got["maps"]["kernel_box"]
    tops = layer_graph.top_layers(layers_of_bundle(b))
    assert [t.path for t in tops] == [(f"layer{i}",) for i in range(6)]
    # the program's layers share kernels: a middle layer holds ops of kernels another layer's box draws
    assert any(box.get(k) not in (None, "L:layer3") for k in tops[3].shared)
    views = got["sides"]["post"]["views"]
    for lid, (_, names, _) in views.items():
        kernels = [i.split(":", 1)[1] for i in names["ids"] if i.startswith(("k:", "f:"))]
        assert kernels, lid
        # each layer draws its own kernels (and the program's, in no layer) open, no other layer's
        assert all(box.get(k) in (lid, None) for k in kernels), (lid, [k for k in kernels if box.get(k) not in (lid, None)])
    # layers 1..4 are the same layer between two others: one layout on each side (layer0 reads
    # the input, layer5 makes the output)
    for side in ("pre", "post"):
        v = got["sides"][side]["views"]
        assert len({v[f"L:layer{i}"][0] for i in range(2, 5)}) == 1, side
        assert len(got["sides"][side]["templates"]) <= 3, side


@pytest.mark.browser
def test_three_layers_of_a_report_whose_layers_share_kernels_open_offline(shared_stack, monkeypatch):
    if not os.path.exists(CHROMIUM):
        pytest.fail("chromium is not installed (the README's test command installs it)")
    from playwright.sync_api import sync_playwright

    monkeypatch.setattr(layer_graph, "OPEN_AS_LAYERS", 100)
    b = shared_stack
    os.makedirs(OUT, exist_ok=True)
    path = os.path.join(OUT, "shared-layers.html")
    with open(path, "w", encoding="utf-8") as f:
        f.write(html_report(b))
    box = report_layers.layer_graphs(b)["maps"]["kernel_box"]
    requests, errors = [], []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        try:
            context = browser.new_context(offline=True, viewport={"width": 1500, "height": 1000})  # the network off
            page = context.new_page()
            page.route("**/*", lambda r: r.continue_() if r.request.url.startswith(("file://", "data:", "blob:"))
                       else (requests.append(r.request.url), r.abort()))
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto("file://" + path)
            page.wait_for_selector("body[data-layers='ready']", timeout=30_000)
            assert page.locator("#graph-pre g.node[id^='pre-L:']").count() == 6
            for i in (0, 3, 5):  # the first layer, one between two others, the last: three layouts
                lid = f"L:layer{i}"
                page.select_option("#xe-layer", lid)
                page.wait_for_selector("#graph-post .layer-view svg", timeout=10_000)
                assert page.locator("#graph-pre .layer-view g.node[id^='pre-op:']").count() > 10
                ids = page.locator("#graph-post .layer-view g.node[id^='post-k:'], #graph-post .layer-view "
                                   "g.cluster[id^='post-f:']").evaluate_all("ns => ns.map(n => n.id)")
                kernels = {x.split(":", 1)[1] for x in ids}
                mine = {k for k, where in box.items() if where == lid}
                assert mine <= kernels, (lid, mine - kernels)  # every kernel of its own box, drawn
                assert all(box.get(k) in (lid, None) for k in kernels), lid  # and no other layer's
                # the layer's own names written into its layout: no zeroed placeholder shows
                texts = page.locator("#graph-post .layer-view text").all_text_contents()
                assert not any("0000" in t for t in texts), lid
                if i:  # the layer it reads from, as that layer's box
                    assert page.locator(f"#graph-pre .layer-view [id='pre-L:layer{i - 1}']").count() == 1
                page.screenshot(path=os.path.join(OUT, f"shared-layer{i}.png"))
        finally:
            browser.close()
    assert requests == [] and errors == [], (requests, errors)
