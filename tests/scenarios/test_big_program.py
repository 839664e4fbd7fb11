"""A big program opens collapsed to its layers and lays out only that view: every other view
(all ops, every kernel, each layer opened) is built and laid out when asked for. The program is
a hand-written stack (tests/stack_hlo.py): 8 layers of 140 ops, 1,122 instructions before
optimization (above the 1,000 at which the app opens layers), one fusion per layer after."""

from __future__ import annotations

import json
import re

from analysis.bundle.core import bundle_from_hlo
from analysis.render.details import pack_light, unpack_light
from analysis.render import layout_cache
from app import graph_payload, views
from app.explorer_state import KEY, ExplorerState
from tests.stack_hlo import stack_texts

LAYERS = 8
PER_LAYER = 140


def _big():
    pre, post = stack_texts(LAYERS, per_layer=PER_LAYER)
    return bundle_from_hlo(post, name="stack", before_text=pre)


def _ids(svg: str) -> set[str]:
    return set(re.findall(r'<g id="([^"]+)" class="(?:node|cluster)"', svg))


def test_a_big_program_lays_out_only_its_layers_view_first():
    b = _big()
    assert len(b.module("hlo_before").entry.instructions) == LAYERS * PER_LAYER + 4 > graph_payload.OPEN_AS_LAYERS
    p = graph_payload.graph_payload(b)
    assert p["open_variant"] == "layers"
    for side in ("pre", "post"):
        g = p["graphs"][side]
        assert list(g["variants"]) == ["layers"] and len(g["svgs"]) == 1
        assert {f"L:layer{i}" for i in range(LAYERS)} <= _ids(g["svgs"][0])
        assert not {i for i in _ids(g["svgs"][0]) if i.startswith("op:m")}  # no op of a layer drawn
    assert set(p["lazy"]) == {"default", "expanded", "collapsed"} | {f"layers:layer{i}" for i in range(LAYERS)}


def test_opening_a_layer_lays_out_it_and_its_neighbours_only():
    b = _big()
    p = graph_payload.graph_payload(b)
    assert graph_payload.add_variant(b, p, "layers:layer3")
    assert "layers:layer3" not in p["lazy"]
    pre = p["graphs"]["pre"]
    ids = _ids(pre["svgs"][pre["variants"]["layers:layer3"]])
    # layer 3's ops are drawn (its multiply and the chain's last op); the layer it reads from and
    # the one it feeds are boxes; no other layer is drawn at all
    assert {"op:m3", "op:t3"} <= ids
    assert {i for i in ids if i.startswith("L:")} == {"L:layer2", "L:layer4"}
    assert not {i for i in ids if i.startswith("op:") and not i.endswith("3") and "3_" not in i}
    post = p["graphs"]["post"]
    pids = _ids(post["svgs"][post["variants"]["layers:layer3"]])
    assert {"k:fusion.3", "f:fusion.3"} & pids
    assert {i for i in pids if i.startswith("L:")} == {"L:layer2", "L:layer4"}
    # the views it opened with are untouched
    assert pre["variants"]["layers"] == 0


def test_a_view_that_is_no_view_of_this_program_is_refused():
    b = _big()
    p = graph_payload.graph_payload(b)
    before = {s: list(g["svgs"]) for s, g in p["graphs"].items()}
    for name in ("layers:nope", "../../etc", "", None, 3, {"a": 1}, "layers"):
        assert not graph_payload.add_variant(b, p, name)
    assert {s: g["svgs"] for s, g in p["graphs"].items()} == before


def test_a_small_program_gets_its_views_at_once_and_each_layer_when_opened(gallery_bundle):
    p = graph_payload.graph_payload(gallery_bundle("decoder_nnx"))
    assert p["open_variant"] == "default"
    assert {"default", "expanded", "collapsed", "layers"} <= set(p["graphs"]["pre"]["variants"])
    assert sorted(p["lazy"]) == ["layers:attn", "layers:attn_norm", "layers:mlp", "layers:mlp_norm"]


def test_graph_downloads_are_the_view_the_graphs_opened_with(gallery_bundle):
    big = _big()
    svg = views.graph_file(big, "pre", "svg", layered=True).decode()
    assert svg.startswith("<?xml") and {f"L:layer{i}" for i in range(LAYERS)} <= _ids(svg)
    assert views.graph_file(big, "post", "dot", layered=True).decode().startswith("digraph")
    small = gallery_bundle("softmax")
    svg = views.graph_file(small, "post", "svg", layered=False).decode()
    assert svg.startswith("<?xml") and any(i.startswith("k:") for i in _ids(svg))
    assert views.graph_file(small, "nope", "svg", layered=False) == b""


def test_a_long_stage_text_is_drawn_from_its_start_and_searched_in_full():
    """A 3,600-line module: the Text views draw its first SHOWN_LINES lines (a browser stalls on
    a code block of tens of thousands), say so, and the search still finds its last layer."""
    from streamlit.testing.v1 import AppTest

    from tests.app.test_app import APP, TIMEOUT

    pre, post = stack_texts(12, per_layer=300)
    b = bundle_from_hlo(post, name="long", before_text=pre)
    n = len(pre.splitlines())
    assert n > views.SHOWN_LINES
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.session_state[KEY] = ExplorerState(bundle=b, link_applied=True)
    at.session_state["source_kind"] = "Upload HLO / bundle"
    at.session_state["view_tab"] = "Text views"  # only the open tab is made
    at.run()
    assert not at.exception, at.exception
    shown = [c.value for c in at.code if c.value.startswith("HloModule stack\n")]
    assert shown and all(len(v.splitlines()) == views.SHOWN_LINES for v in shown)
    assert any(f"Lines 1–{views.SHOWN_LINES:,} of {n:,}" in c.value for c in at.caption)
    at.text_input(key="q_hlo_before").set_value("layer11/mul").run()
    assert any("layer11/mul" in c.value for c in at.code)


def test_a_treemap_of_many_kernels_draws_the_biggest_and_groups_the_rest():
    from analysis.render.charts import TREEMAP_KERNELS, treemap_figure

    pre, post = stack_texts(TREEMAP_KERNELS + 100)
    b = bundle_from_hlo(post, name="many", before_text=pre)
    assert len(b.kernels) == TREEMAP_KERNELS + 100
    t = treemap_figure(b).data[0]
    leaves = [lab for lab, c in zip(t.labels, t.customdata) if c]
    assert len(leaves) == TREEMAP_KERNELS + 1 and "100 smaller kernels" in leaves
    # the total is kept: the grouped box holds the bytes of the 100 it stands for
    assert abs(sum(v for v, c in zip(t.values, t.customdata) if c) - sum(k.bytes for k in b.kernels) / 2 ** 20) < 1e-6


def test_a_graph_graphviz_cannot_lay_out_fails_once_not_on_every_ask(monkeypatch, tmp_path):
    """Real Graphviz refuses a broken DOT text; asked again (the next line of the same run, a
    rerun), the app says so at once instead of running Graphviz again (for a graph that timed
    out, that was another minute each time)."""
    import os

    import pytest

    bad = "digraph G { a -> ; }"
    with pytest.raises(RuntimeError, match="Graphviz failed"):
        layout_cache.layout_svg(bad)
    # from now on the only Graphviz on the PATH is one that notes each time it is run
    ran = tmp_path / "dot-ran"
    fake = tmp_path / "bin" / "dot"
    fake.parent.mkdir()
    fake.write_text(f"#!/bin/sh\necho run >> {ran}\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake.parent}{os.pathsep}{os.environ.get('PATH', '')}")
    with pytest.raises(RuntimeError, match="Graphviz failed"):
        layout_cache.layout_svg(bad)
    assert not ran.exists(), "Graphviz was run again for a graph that had failed"
    assert layout_cache.svg_or_error(bad).startswith("<p>Graphviz failed")


def test_after_a_view_is_laid_out_only_the_new_svgs_are_sent_again():
    graphs = {"pre": {"title": "t", "svgs": ["<a/>", "<b/>", "<c/>"], "variants": {"layers": 0, "x": 2}},
              "post": {"title": "u", "svgs": ["<d/>"], "variants": {"layers": 0}}, "none": None}
    got = graph_payload.graphs_since(graphs, {"pre": 2, "post": 1})
    assert got["pre"]["svgs"] == ["<c/>"] and got["pre"]["svgs_from"] == 2
    assert got["pre"]["variants"] == {"layers": 0, "x": 2}  # the views' names go whole
    assert got["post"]["svgs"] == [] and got["post"]["svgs_from"] == 1
    assert got["none"] is None
    assert graphs["pre"]["svgs"] == ["<a/>", "<b/>", "<c/>"]  # the payload itself is untouched
    # counts the browser made up: that side goes whole
    for bad in ({"pre": 9}, {"pre": -1}, {"pre": "2"}, {"pre": True}, {"pre": 0}, "x", None):
        got = graph_payload.graphs_since(graphs, bad)
        assert got["pre"]["svgs"] == graphs["pre"]["svgs"] and "svgs_from" not in got["pre"], bad


def test_a_big_program_sends_full_details_for_what_it_draws_and_the_rest_when_drawn_or_picked():
    b = _big()
    p = graph_payload.graph_payload(b)
    det = p["details"]
    # every op is there for the search and the source highlight, light (no instruction text),
    # in the JSON text of what never changes, with the links and the layer maps
    packed = json.loads(p["packed"])
    assert p["links"] is None and p["layers"] is None and packed["links"]["k2pre"] and packed["layers"]["boxes"]
    # what the frame derives is not sent: op -> kernels (k2pre inverted), op -> box (the boxes' ops)
    assert "pre2k" not in packed["links"] and "op_box" not in packed["layers"]
    light = unpack_light(packed["light"])
    assert light["op:m3"]["light"] and "text" not in light["op:m3"]
    assert light["op:m3"]["name"] == "m3" and light["op:m3"]["side"] == "pre"
    assert "op:m3" not in det
    drawn = _ids(p["graphs"]["pre"]["svgs"][0]) | _ids(p["graphs"]["post"]["svgs"][0])
    full = [i for i in drawn if i in light]
    assert full and all("%" + det[i]["name"] + " = " in det[i]["text"] for i in full)
    rev0 = p.get("rev", 0)
    assert graph_payload.add_variant(b, p, "layers:layer3")
    assert det["op:m3"]["text"].startswith("%m3 = ")
    assert "op:m5" not in det  # not drawn by that view
    since = graph_payload.details_since(p, rev0)
    assert "op:m3" in since and "op:m5" not in since
    assert graph_payload.details_since(p, p["rev"]) == {}
    # a selection outside every drawn view: its details now, under a new revision
    assert graph_payload.add_details(b, p, ["op:m5", "op:no-such-op", 7])
    assert det["op:m5"]["text"].startswith("%m5 = ") and "op:no-such-op" not in det
    assert set(graph_payload.details_since(p, p["rev"] - 1)) == {"op:m5"}
    assert not graph_payload.add_details(b, p, ["op:m5"])  # already full: nothing to send
    for bad in (None, "3", True, 1.5):  # a revision the browser made up: everything added
        assert {"op:m3", "op:m5"} <= set(graph_payload.details_since(p, bad))


def test_light_details_go_by_column_and_come_back_as_they_were():
    light = {
        "op:add.1": {"side": "pre", "name": "add.1", "title": "add.1 — add", "op_name": "jit(f)/l0/add",
                     "lines": [3], "light": True},
        "op:add.2": {"side": "pre", "name": "add.2", "title": "add.2 — add", "op_name": "jit(f)/l1/add",
                     "lines": [3], "light": True},
        # a parameter's title is its op name, not its own: kept whole
        "p:Arg_0.1": {"side": "pre", "name": "Arg_0.1", "title": "x — parameter", "lines": [], "light": True},
        "k:fusion.3": {"side": "post", "name": "fusion.3", "title": "fusion.3 — fusion · XLA loop (emitted)",
                       "route": "emitted", "color": "#2CA02C", "n_fused": 2, "lines": [3], "light": True},
        # a name that is not the id's stays
        "op:odd": {"side": "pre", "name": "other", "title": "other — mul", "op_name": "", "lines": [],
                   "light": True},
    }
    packed = pack_light(light)
    text = json.dumps(packed, ensure_ascii=False)
    assert '"name"' in text and text.count("add.1") == 1  # the id only: not its name, not its title's
    assert "— add" in text and text.count("— add") == 1  # the tail both adds share, once
    assert unpack_light(json.loads(text)) == light
