"""The layers view (analysis.render.layer_graph): both graphs collapsed to the model's layers,
one layer opened in place, and what the browser gets to link them. Expected layers are the
attribute names the model files give their modules (sample_models/decoder_nnx.py: attn_norm,
attn, mlp_norm, mlp; cnn_linen.py: Net/conv1, conv2, head), and a hand-written HLO module
with named scopes."""

from __future__ import annotations

from analysis.bundle.core import bundle_from_hlo
from analysis.render.layer_graph import layer_maps, layer_variants, top_layers
from analysis.program.layers import layers_of_bundle

DECODER = {"L:attn_norm", "L:attn", "L:mlp_norm", "L:mlp"}


def _boxes(spec):
    return {n for n in spec.nodes if n.startswith("L:")}


def test_the_decoder_collapses_to_its_four_layers_on_both_sides(gallery_bundle):
    b = gallery_bundle("decoder_nnx")
    v = layer_variants(b)
    assert _boxes(v["pre"]["layers"]) == DECODER
    # before optimization no op of a layer is drawn on its own: only the residual adds between them
    ops = [n for n in v["pre"]["layers"].nodes if n.startswith("op:")]
    assert 0 < len(ops) <= 4
    assert _boxes(v["post"]["layers"]) <= DECODER and "L:attn" in _boxes(v["post"]["layers"])
    # the attention's parameters (q, k, v, o projections) are folded into its box
    assert "+4 parameters" in v["pre"]["layers"].nodes["L:attn"].label


def test_opening_one_layer_draws_its_ops_and_kernels_and_keeps_the_others_boxes(gallery_bundle):
    b = gallery_bundle("decoder_nnx")
    v = layer_variants(b)
    pre, post = v["pre"]["layers:attn"], v["post"]["layers:attn"]
    assert _boxes(pre) == DECODER - {"L:attn"}
    maps = layer_maps(b)
    attn_ops = set(maps["boxes"]["L:attn"]["ops"])
    drawn = {n[3:] for n in pre.nodes if n.startswith("op:")}
    from analysis.render.module_graphs import pre_graph

    every = {n[3:] for n in pre_graph(b.module("hlo_before"), collapse=False).nodes if n.startswith("op:")}
    assert every & attn_ops and every & attn_ops <= drawn  # each of its ops the full graph draws
    assert not drawn & (set(maps["boxes"]["L:mlp"]["ops"]) | set(maps["boxes"]["L:attn_norm"]["ops"]))
    attn_kernels = set(maps["boxes"]["L:attn"]["kernels"])
    shown = {n.split(":", 1)[1] for n in post.nodes if n.startswith(("k:",))} | \
        {c.split(":", 1)[1] for c in post.clusters if c.startswith("f:")}
    assert attn_kernels <= shown


def test_every_layer_can_be_found_and_a_kernel_names_its_box(gallery_bundle):
    b = gallery_bundle("decoder_nnx")
    maps = layer_maps(b)
    assert {"L:attn/q_proj", "L:attn/o_proj", "L:mlp/gate", "L:mlp/down"} <= set(maps["boxes"])
    assert {k for k, v in maps["boxes"].items() if v["box"]} == DECODER
    q = maps["boxes"]["L:attn/q_proj"]
    assert len(q["ops"]) == 1 and all(maps["kernel_box"][k] == "L:attn" for k in q["kernels"])
    assert all(maps["op_box"][op] == "L:attn" for op in maps["boxes"]["L:attn"]["ops"])


def test_a_wrapper_holding_every_layer_is_looked_through(gallery_bundle):
    b = gallery_bundle("cnn_linen")
    assert [t.path for t in top_layers(layers_of_bundle(b))] == [("Net", "conv1"), ("Net", "conv2"), ("Net", "head")]
    v = layer_variants(b)
    assert _boxes(v["pre"]["layers"]) == {"L:Net/conv1", "L:Net/conv2", "L:Net/head"}


HLO = """HloModule m

ENTRY %main (x: f32[8]) -> f32[8] {
  %x = f32[8]{0} parameter(0), metadata={op_name="x"}
  %a = f32[8]{0} negate(%x), metadata={op_name="jit(f)/enc/negate"}
  %b = f32[8]{0} exponential(%a), metadata={op_name="jit(f)/enc/exp"}
  %c = f32[8]{0} tanh(%b), metadata={op_name="jit(f)/dec/tanh"}
  ROOT %d = f32[8]{0} add(%c, %b), metadata={op_name="jit(f)/dec/add"}
}
"""


def test_named_scopes_of_plain_jax_make_layers_too():
    b = bundle_from_hlo(HLO, name="scopes")
    v = layer_variants(b)
    g = v["pre"]["layers"]
    assert _boxes(g) == {"L:enc", "L:dec"}
    assert g.nodes["L:enc"].label.splitlines()[1] == "2 ops → 0 kernels"  # no optimized module here
    # enc feeds dec once: the two boxes are joined by one edge, the parameter folded into enc
    assert [(e.src, e.dst) for e in g.edges] == [("L:enc", "L:dec")]
    assert "+1 parameter" in g.nodes["L:enc"].label


def test_a_model_without_layers_has_no_layers_view(gallery_bundle):
    assert layer_variants(gallery_bundle("softmax")) == {} and layer_maps(gallery_bundle("softmax")) is None


def test_the_collapsed_layers_view_is_laid_out_with_the_compile_and_each_layer_when_opened(gallery_bundle):
    """The payload of a compile lays out its layers view; a view with one layer open is a layout
    of the whole module, made when that layer is opened (``add_variant``), for a small program as
    for a big one."""
    from app.graph_payload import add_variant, graph_payload

    lines = ["HloModule big", "", "ENTRY %main (x: f32[8]) -> f32[8] {", '  %x = f32[8]{0} parameter(0)']
    prev = "x"
    for layer in ("enc", "dec"):
        for i in range(600):  # a big program: it opens as its layers
            lines.append(f'  %{layer}{i} = f32[8]{{0}} negate(%{prev}), metadata={{op_name="jit(f)/{layer}/neg"}}')
            prev = f"{layer}{i}"
    lines += [f"  ROOT %r = f32[8]{{0}} tanh(%{prev})", "}"]
    for b in (bundle_from_hlo("\n".join(lines) + "\n", name="big"), gallery_bundle("decoder_nnx")):
        payload = graph_payload(b)
        laid_out = set(payload["graphs"]["pre"]["variants"])
        opened = [n for n in payload["lazy"] if n.startswith("layers:")]
        assert "layers" in laid_out and opened and not laid_out & set(opened)
        assert add_variant(b, payload, opened[0]) and opened[0] in payload["graphs"]["pre"]["variants"]


def test_only_the_graph_before_optimization_reads_the_fusion_decisions(gallery_bundle):
    """The app makes the optimized graph before a worker's decisions come (``graph_payload._undecided``):
    it must be the same without them, while the graph before optimization marks each boundary's why."""
    import dataclasses

    from analysis.render.view_model import graph_views, variant_specs

    b = gallery_bundle("decoder_nnx")
    assert b.fusion_decisions and b.fusion_decisions["records"]
    undecided = dataclasses.replace(b, fusion_decisions=None)
    names = [n for n in graph_views(b).names if not n.startswith("layers:")] + ["layers:attn"]
    for side, same in (("post", True), ("pre", False)):
        with_them = variant_specs(b, names, sides=(side,))
        assert list(with_them) == [side] and set(with_them[side]) == set(names)
        without = variant_specs(undecided, names, sides=(side,))[side]
        assert {n: sp.to_dot() == without[n].to_dot() for n, sp in with_them[side].items()} == dict.fromkeys(names, same)


from tests.stack_hlo import stack_texts as _stack_texts  # noqa: E402


def test_a_constant_without_an_op_name_does_not_pull_a_layers_kernel_out_of_its_box():
    pre, post = _stack_texts()
    b = bundle_from_hlo(post, name="stack", before_text=pre)
    maps = layer_maps(b)
    # each layer's kernel holds its multiply and tanh, and the shared broadcast of the constant
    assert [maps["kernel_box"].get(f"fusion.{i}") for i in range(8)] == [f"L:layer{i}" for i in range(8)]
    post_layers = layer_variants(b)["post"]["layers"]
    assert not [n for n in post_layers.nodes if n.startswith("k:")]  # every kernel inside its layer


def test_a_node_joined_to_many_layer_boxes_is_drawn_without_those_edges():
    from analysis.render.module_graphs import HUB_LAYERS

    # an op of the model outside every layer that each layer reads
    pre, _ = _stack_texts(HUB_LAYERS + 2, '  %bc = f32[8]{0} exponential(%x), metadata={op_name="jit(f)/exp"}')
    b = bundle_from_hlo(pre, name="stack")
    spec = layer_variants(b)["pre"]["layers"]
    # it feeds all eight layer boxes: it stays, labelled, with no edge to any box
    hub = spec.nodes["op:bc"]
    assert f"joins {HUB_LAYERS + 2} layers" in hub.label
    assert not [e for e in spec.edges if "op:bc" in (e.src, e.dst) and "L:" in e.src + e.dst]
    assert ("p:x", "op:bc") in {(e.src, e.dst) for e in spec.edges}  # its own input is still drawn
    # the chain between the layers is still drawn: layer i feeds layer i+1
    assert ("L:layer0", "L:layer1") in {(e.src, e.dst) for e in spec.edges}


# enc's tanh is fused with dec's multiply: XLA pulled the producer into its consumer, so the
# kernel's result (its root, the multiply) is dec's; the bias b feeds a kernel of each layer
CROSS_PRE = """HloModule cross

ENTRY %main (x: f32[8], b: f32[8]) -> f32[8] {
  %x = f32[8]{0} parameter(0), metadata={op_name="x"}
  %b = f32[8]{0} parameter(1), metadata={op_name="b"}
  %a = f32[8]{0} add(%x, %b), metadata={op_name="jit(f)/enc/add"}
  %t = f32[8]{0} tanh(%a), metadata={op_name="jit(f)/enc/tanh"}
  %m = f32[8]{0} multiply(%t, %b), metadata={op_name="jit(f)/dec/mul"}
  ROOT %n = f32[8]{0} negate(%m), metadata={op_name="jit(f)/dec/neg"}
}
"""

CROSS_POST = """HloModule cross, is_scheduled=true

%fused_e (p0: f32[8], p1: f32[8]) -> f32[8] {
  %p0 = f32[8]{0} parameter(0)
  %p1 = f32[8]{0} parameter(1)
  ROOT %a = f32[8]{0} add(%p0, %p1), metadata={op_name="jit(f)/enc/add"}
}

%fused_x (q0: f32[8], q1: f32[8]) -> f32[8] {
  %q0 = f32[8]{0} parameter(0)
  %q1 = f32[8]{0} parameter(1)
  %t = f32[8]{0} tanh(%q0), metadata={op_name="jit(f)/enc/tanh"}
  ROOT %m = f32[8]{0} multiply(%t, %q1), metadata={op_name="jit(f)/dec/mul"}
}

ENTRY %main (x: f32[8], b: f32[8]) -> f32[8] {
  %x = f32[8]{0} parameter(0)
  %b = f32[8]{0} parameter(1)
  %fusion.e = f32[8]{0} fusion(%x, %b), kind=kLoop, calls=%fused_e
  %fusion.x = f32[8]{0} fusion(%fusion.e, %b), kind=kLoop, calls=%fused_x
  ROOT %n = f32[8]{0} negate(%fusion.x), metadata={op_name="jit(f)/dec/neg"}
}
"""


def test_a_fusion_across_a_layers_border_is_in_the_layer_its_result_belongs_to():
    from analysis.render.layer_graph import border_kernels

    b = bundle_from_hlo(CROSS_POST, name="cross", before_text=CROSS_PRE)
    root = layers_of_bundle(b)
    tops = top_layers(root)
    enc, dec = (next(t for t in tops if t.path == (n,)) for n in ("enc", "dec"))
    # fusion.x does enc's tanh and dec's multiply, its result: it is dec's, and shared by enc
    assert dec.kernels == ["fusion.x", "n"] and enc.kernels == ["fusion.e"] and enc.shared == ["fusion.x"]
    assert not root.kernels and border_kernels(b, root, tops) == {}
    maps = layer_maps(b)
    assert maps["kernel_box"]["fusion.x"] == "L:dec" and maps["kernel_box"]["fusion.e"] == "L:enc"
    assert any("1 kernel shared with other layers" in f for f in maps["boxes"]["L:enc"]["facts"])
    post = layer_variants(b)["post"]["layers"]
    # a chain of two boxes: no kernel of its own, no back edge, no parameter ellipse
    assert set(post.nodes) == {"L:enc", "L:dec"}
    assert [(e.src, e.dst) for e in post.edges] == [("L:enc", "L:dec")]
    # b feeds both boxes: drawn in enc, where the chain starts, and named in both tooltips
    assert "+2 parameters" in post.nodes["L:enc"].label
    assert "parameter b (also read by dec)" in post.nodes["L:enc"].tooltip
    assert "parameter b (drawn in enc)" in post.nodes["L:dec"].tooltip
    # opening enc draws its own kernel; the fusion it shares with dec is dec's box, where enc's
    # value leaves (its exit): a layer's own form, whatever it shares with others
    for isolate in (False, True):
        opened = layer_variants(b, names=["layers:enc"], isolate=isolate)["post"]["layers:enc"]
        drawn = {n.split(":", 1)[1] for n in opened.nodes if n.startswith("k:")} | \
            {c.split(":", 1)[1] for c in opened.clusters if c.startswith("f:")}
        assert "fusion.e" in drawn and "fusion.x" not in drawn and "L:dec" in opened.nodes
        assert ("k:fusion.e", "L:dec") in {(e.src, e.dst) for e in opened.edges}
