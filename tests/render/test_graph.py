"""Graphs of a module: what the nodes, clusters and edges say, and that Graphviz lays them out."""

from __future__ import annotations

import re
import xml.dom.minidom

import pytest

from analysis.measures import kernel_times
from analysis.render.graph import HIGHLIGHT, LAYOUT_MARK, MAX_LABELLED_EDGES
from analysis.render.graphviz_runner import render_svg
from analysis.render.module_graphs import layout_is_default, post_graph, pre_graph, scope_of
from analysis.hlo import parse_module
from analysis.program.kernels import ROUTE_COLORS, kernels

LAYOUT_HLO = """HloModule t, is_scheduled=true

%fused_computation (p0: f32[64,32]) -> f32[64,32] {
  %p0 = f32[64,32]{1,0} parameter(0)
  ROOT %n = f32[64,32]{1,0} negate(%p0)
}

ENTRY %main (a: f32[32,64]) -> f32[64,32] {
  %a = f32[32,64]{1,0} parameter(0)
  %t = f32[64,32]{0,1} transpose(%a), dimensions={1,0}
  %c = f32[64,32]{1,0} copy(%t)
  ROOT %f = f32[64,32]{1,0} fusion(%c), kind=kLoop, calls=%fused_computation
}
"""


def test_post_graph_has_every_kernel_coloured_by_route(gallery_bundle):
    b = gallery_bundle("mlp")
    g = post_graph(b.module("hlo_after"), b.kernels)
    dot = g.to_dot()
    for k in b.kernels:
        node = g.nodes[f"k:{k.name}"]
        assert node.kind == "kernel" and node.route == k.route
        assert f'fillcolor="{ROUTE_COLORS[k.route]}"' in g._node_dot(node)
    # small fusions are clusters holding their fused instructions
    fusion = next(k for k in b.kernels if k.is_multi_op_fusion)
    cid = f"f:{fusion.name}"
    assert cid in g.clusters
    inside = [n for n in g.nodes.values() if n.cluster == cid and n.kind == "fused"]
    assert len(inside) >= 2
    assert f'subgraph "cluster_{cid}"' in dot
    # library kernels are labelled with their library
    for k in b.kernels:
        if k.route == "library":
            text = g.clusters[f"f:{k.name}"].label if f"f:{k.name}" in g.clusters else g.nodes[f"k:{k.name}"].label
            assert k.library in text
    # edges carry shapes with layouts
    assert any(re.fullmatch(r"f32\[\d+(,\d+)*\]\{[\d,]+\}", e.label) for e in g.edges)


def test_layout_changes_are_marked():
    m = parse_module(LAYOUT_HLO)
    ks = kernels(m)
    g = post_graph(m, ks)
    assert {k.name: k.route for k in ks} == {"t": "layout", "c": "layout", "f": "emitter"}
    assert g.nodes["k:t"].layout_change and g.nodes["k:c"].layout_change
    assert not g.nodes["k:f"].layout_change
    # the {0,1} value leaving the transpose is not the default layout: its edge is marked
    marked = [e for e in g.edges if e.layout_mark]
    assert [(e.src, e.dst) for e in marked] == [("k:t", "k:c")]
    assert LAYOUT_MARK in g.to_dot()
    assert not layout_is_default(m.entry.by_name["t"]) and layout_is_default(m.entry.by_name["c"])


def test_selection_and_highlight_are_drawn_and_the_rest_dimmed(gallery_bundle):
    b = gallery_bundle("mlp")
    k = next(k for k in b.kernels if k.is_multi_op_fusion)
    absorbed = set(b.provenance.kernel_to_pre[k.name])
    post = post_graph(b.module("hlo_after"), b.kernels, selected=k.name, highlight={k.name})
    assert post.clusters[f"f:{k.name}"].selected
    others = [n for n in post.nodes.values() if n.kind == "kernel" and n.id != f"k:{k.name}"]
    assert others and all(n.dimmed for n in others)
    pre = pre_graph(b.module("hlo_before"), highlight=absorbed)
    lit = {n.id.split(":", 1)[1] for n in pre.nodes.values() if n.highlighted}
    assert lit and lit <= absorbed
    assert HIGHLIGHT in pre.to_dot()


def test_pre_graph_groups_by_scope_and_inlines_nested_jits(gallery_bundle):
    b = gallery_bundle("mlp")
    g = pre_graph(b.module("hlo_before"))
    assert {"scope:dense1", "scope:dense2", "scope:dense1/relu"} <= set(g.clusters)
    assert g.clusters["scope:dense1/relu"].parent == "scope:dense1"
    # the ReLU's maximum (inside jit(relu)) is fed by the bias add of dense1
    maximum = next(n for n in g.nodes.values() if n.cluster == "scope:dense1/relu" and n.label.startswith("maximum"))
    feeders = {e.src for e in g.edges if e.dst == maximum.id}
    assert any(g.nodes[f].label.startswith("add") for f in feeders if f in g.nodes)
    assert scope_of("jit(model)/attention/jit(softmax)/exp") == "attention/softmax"


def test_large_graphs_collapse_and_open_on_request(gallery_bundle):
    b = gallery_bundle("transformer_block")
    pre = b.module("hlo_before")
    folded = pre_graph(pre, collapse=True)
    assert set(folded.collapsed) == {"ln1", "attention", "ln2", "mlp"}
    assert all(n.kind != "op" or n.cluster is None for n in folded.nodes.values())
    opened = pre_graph(pre, collapse=True, expand_scopes={"attention"})
    assert "attention" not in opened.collapsed and any(c.startswith("scope:attention") for c in opened.clusters)
    post = post_graph(b.module("hlo_after"), b.kernels, collapse_all=True)
    assert not post.clusters and len(post.collapsed) == sum(1 for k in b.kernels if k.fused_ops)
    one = post.collapsed[0]
    post2 = post_graph(b.module("hlo_after"), b.kernels, collapse_all=True, expand={one})
    assert list(post2.clusters) == [f"f:{one}"]


def test_neighbourhood_keeps_only_nearby_nodes(gallery_bundle):
    b = gallery_bundle("transformer_block")
    g = post_graph(b.module("hlo_after"), b.kernels, collapse_all=True)
    center = f"k:{b.kernels[len(b.kernels) // 2].name}"
    near = g.neighbourhood(center, hops=1)
    assert center in near.nodes and len(near.nodes) < len(g.nodes)
    for e in near.edges:
        assert e.src in near.nodes and e.dst in near.nodes
    assert all(center in (e.src, e.dst) for e in near.edges)


def test_graphviz_lays_it_out_with_clickable_ids(gallery_bundle):
    b = gallery_bundle("mlp")
    g = post_graph(b.module("hlo_after"), b.kernels)
    svg = g.to_svg()
    doc = xml.dom.minidom.parseString(svg)
    ids = {el.getAttribute("id") for el in doc.getElementsByTagName("g")}
    assert {f"k:{k.name}" for k in b.kernels} <= ids
    assert any(i.startswith("f:") for i in ids)  # clusters are clickable too


DEEP = """
import jax
import jax.numpy as jnp

def model(x, w):
    for i in range(16):
        with jax.named_scope(f"layer{i}"):
            h = jnp.tanh(x @ w)
            x = (h - h.mean()) * jax.nn.sigmoid(x) + x * 0.5
    return x

def example_inputs():
    return (jnp.ones((8, 16)), jnp.ones((16, 16)))
"""


def test_many_edges_move_shapes_to_tooltips(source_bundle):
    b = source_bundle(DEEP, "deep")
    g = pre_graph(b.module("hlo_before"), collapse=False)
    assert len(g.edges) > MAX_LABELLED_EDGES
    dot = g.to_dot()
    assert "->" in dot and not re.search(r'->[^\n]*label="', dot)
    assert re.search(r'->[^\n]*tooltip="f32', dot)
    assert re.search(r'->[^\n]*label="f32', g.to_dot(edge_labels=True))


def test_render_svg_reports_graphviz_errors():
    import pytest

    with pytest.raises(RuntimeError, match="Graphviz failed"):
        render_svg("digraph { a -> }")


def test_measured_kernels_are_shaded_by_their_share_of_the_step(gallery_bundle):
    b = gallery_bundle("mlp")
    names = [k.name for k in b.kernels]
    shares = {n: (0.9 if i == 0 else 0.01) for i, n in enumerate(names)}
    timings = kernel_times({"step_median_s": 1e-3, "kernels": {n: {"median_s": 1e-4 * shares[n], "share": shares[n]}
                                                                for n in names}})
    g = post_graph(b.module("hlo_after"), b.kernels, timings=timings, collapse_all=True)
    fills = {n: re.search(r'fillcolor="(#[0-9A-Fa-f]{6})"', g._node_dot(g.nodes[f"k:{n}"])).group(1).upper()
             for n in names}
    top = b.kernels[0]
    assert fills[top.name] == ROUTE_COLORS[top.route].upper()  # the big one in full colour
    for k in b.kernels[1:]:
        assert fills[k.name] != ROUTE_COLORS[k.route].upper()  # the small ones paler
    assert "90% of step" in g.nodes[f"k:{top.name}"].label and "1.0% of step" in g.nodes[f"k:{names[1]}"].label


def test_a_node_feeding_many_is_drawn_without_those_edges():
    """One exp read by 20 negates (and each negate read by the final tuple): the exp says it
    feeds 20 and draws no edge to them; every other edge stays."""
    from analysis.hlo import parse_module
    from analysis.render.module_graphs import HUB_FANOUT, pre_graph

    n = HUB_FANOUT + 4
    lines = ["HloModule fan", "", "ENTRY %main (x: f32[4]) -> f32[4] {", "  %x = f32[4]{0} parameter(0)",
             "  %e = f32[4]{0} exponential(%x)"]
    lines += [f"  %n{i} = f32[4]{{0}} negate(%e)" for i in range(n)]
    acc = "n0"
    for i in range(1, n):
        lines.append(f"  %a{i} = f32[4]{{0}} add(%{acc}, %n{i})")
        acc = f"a{i}"
    lines += [f"  ROOT %r = f32[4]{{0}} copy(%{acc})", "}"]
    g = pre_graph(parse_module("\n".join(lines) + "\n"), collapse=False)
    pairs = {(e.src, e.dst) for e in g.edges}
    assert f"feeds {n}" in g.nodes["op:e"].label
    assert not [p for p in pairs if p[0] == "op:e"]
    assert ("p:x", "op:e") in pairs and ("op:n1", "op:a1") in pairs and ("op:a1", "op:a2") in pairs


def test_layouts_started_run_beside_the_caller_and_each_keeps_its_own_outcome():
    """``render_svgs_start`` returns before Graphviz is done; what it returns gives each graph's
    SVG, or the error for one Graphviz refuses, in the order they were given."""
    from analysis.render.graphviz_runner import render_svgs_start

    finish = render_svgs_start(['digraph G { "alpha" -> "beta"; }', "digraph G { a -> ; }"])
    good, bad = finish()
    assert good.startswith("<svg") and ">alpha<" in good and ">beta<" in good
    assert isinstance(bad, RuntimeError) and str(bad).startswith("Graphviz failed")


def test_a_big_payload_goes_deflated_and_comes_back_whole():
    import base64
    import json
    import zlib

    from app.graph_payload import PACK_OVER, packed_args

    small = {"data_key": "k1", "graphs": {"pre": {"svgs": ["<svg/>"]}}}
    assert packed_args(small, 3) == {**small, "rev": 3}  # as it is
    big = {"data_key": "k2", "graphs": {"pre": {"svgs": ["<svg>" + "x" * PACK_OVER + "</svg>"]}},
           "details": {"op:a": {"title": "ä \u2028 \"quoted\""}}}
    out = packed_args(big, 7)
    assert set(out) == {"z", "data_key", "rev"} and out["data_key"] == "k2" and out["rev"] == 7
    assert len(out["z"]) < PACK_OVER // 10  # a run of one character deflates to almost nothing
    assert json.loads(zlib.decompress(base64.b64decode(out["z"])).decode()) == big


def test_an_async_collective_is_drawn_around_the_compute_it_overlaps():
    # all-reduce-start, then a fusion XLA scheduled before the done: both in one box
    from analysis.program.kernels import kernels as find_kernels
    from analysis.render.module_graphs import post_graph

    m = parse_module("""HloModule jit_ov, is_scheduled=true, num_partitions=2
%add (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(%a, %b)
}
%fe (x: f32[64]) -> f32[64] {
  %x = f32[64]{0} parameter(0)
  ROOT %e = f32[64]{0} exponential(%x)
}
ENTRY %main (p: f32[64], q: f32[64]) -> (f32[64], f32[64]) {
  %p = f32[64]{0} parameter(0)
  %q = f32[64]{0} parameter(1)
  %ars = f32[64]{0} all-reduce-start(%p), replica_groups={{0,1}}, to_apply=%add
  %exp_fusion = f32[64]{0} fusion(%q), kind=kLoop, calls=%fe
  %ard = f32[64]{0} all-reduce-done(%ars)
  ROOT %t = (f32[64]{0}, f32[64]{0}) tuple(%ard, %exp_fusion)
}
""")
    g = post_graph(m, find_kernels(m, "gpu"))
    assert "a:ars" in g.clusters and "overlaps 1 kernel" in g.clusters["a:ars"].label
    assert g.nodes["k:ars"].cluster == "a:ars"
    assert g.nodes["k:exp_fusion"].cluster == "a:ars" or g.clusters[g.nodes["k:exp_fusion"].cluster].parent == "a:ars"
    assert 'subgraph "cluster_a:ars"' in g.to_dot()
    assert 'id="a:ars"' in render_svg(g.to_dot())  # Graphviz draws the box


def test_a_layout_asked_for_while_it_is_being_made_is_made_once(monkeypatch):
    # the report starts its layers' layouts as soon as they are made and asks for them again
    # with the page: Graphviz runs once per DOT text, and both get its SVG
    from analysis.render import graphviz_runner, layout_cache

    calls = []
    real = graphviz_runner.run_dot

    def counted(dot, timeout):
        calls.append(dot)
        return real(dot, timeout)

    monkeypatch.setattr(graphviz_runner, "run_dot", counted)
    dot = 'digraph "once" { a -> b -> c }'
    with layout_cache.SVG_LOCK:
        layout_cache.SVG_CACHE.pop(dot, None)
    first = layout_cache.layout_dots_start([dot])  # nobody waits for this one
    second = layout_cache.layout_dots_start([dot, dot])
    second()
    first()
    assert calls == [dot]
    assert "<svg" in layout_cache.layout_svg(dot) and calls == [dot]  # cached: not laid out again
    bad = "digraph { a -> "  # Graphviz refuses it: both callers hear why, once
    with pytest.raises(RuntimeError):
        layout_cache.layout_dots_start([bad])()
    with pytest.raises(RuntimeError):
        layout_cache.layout_dots_start([bad])()
    assert calls.count(bad) == 1
