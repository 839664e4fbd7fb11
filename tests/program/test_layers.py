"""The layer tree (analysis.program.layers) from hand-written HLO: names with brackets and quotes
(an ``nnx.List`` item, an ``nnx.Dict`` item) through the parser, sub-layers in the order the
program runs them, and every kernel in the layer it belongs to: a fusion across a border with
its result's layer, a copy XLA added with the layer it feeds, a computation two layers call
no reason to put a kernel outside every layer. The CLI's rows say how many kernels XLA added."""

from __future__ import annotations

from analysis.bundle.core import bundle_from_hlo
from analysis.hlo import parse_module
from analysis.program.layers import layer_path, layer_tree, layers_of_bundle
from analysis.render.layers import layer_dict, layer_lines


def test_list_and_dict_items_keep_their_brackets_and_quotes_in_a_layer_path():
    assert layer_path("jit(step)/layers[0]/attn/dot_general") == ("layers[0]", "attn")
    assert layer_path("jit(step)/transpose(jvp(layers[1]))/mlp/mul") == ("layers[1]", "mlp")
    assert layer_path("jit(step)/blocks['attn']/q/add") == ("blocks['attn']", "q")
    assert layer_path("jit(step)/grid[0][1]/tanh") == ("grid[0][1]",)


def test_an_einsums_spec_is_not_a_layer_with_or_without_its_output():
    # jnp.einsum scopes its ops under its spec; jax.scipy's BFGS writes one with the output implicit
    assert layer_path("jit(model)/fit/while/body/ij,jk,lk/dot_general") == ("fit",)
    assert layer_path("jit(model)/attn/...qhd,...khd->...hqk/dot_general") == ("attn",)


# HLO escapes a quote in a string: XLA prints op_name="...blocks[\'attn\']..."
QUOTED = r"""HloModule quoted

ENTRY %main (x: f32[4], w: f32[4]) -> f32[4] {
  %x = f32[4]{0} parameter(0), metadata={op_name="x"}
  %w = f32[4]{0} parameter(1), metadata={op_name="state[\'blocks\'][\'attn\'][\'w\']"}
  %a = f32[4]{0} add(%x, %w), metadata={op_name="jit(f)/blocks[\'attn\']/q/add"}
  %t = f32[4]{0} tanh(%a), metadata={op_name="jit(f)/layers[0]/tanh"}
  ROOT %n = f32[4]{0} negate(%t), metadata={op_name="jit(f)/transpose(jvp(layers[0]))/neg"}
}
"""


def test_a_quoted_key_in_hlo_metadata_is_the_layer_a_user_wrote():
    root = layer_tree(parse_module(QUOTED))
    assert list(root.children) == ["blocks['attn']", "layers[0]"]
    assert list(root.children["blocks['attn']"].children) == ["q"]
    assert root.children["layers[0]"].ops == ["t", "n"]  # forward and backward ops alike


# Printed as XLA prints a computation, in post order from its root, operands first: stage1's
# weight op (it squares its weight before it reads its input) comes before all of stage0.
POST_ORDER = """HloModule stages

ENTRY %main (x: f32[4], w0: f32[4], w1: f32[4]) -> f32[4] {
  %w1 = f32[4]{0} parameter(2), metadata={op_name="w1"}
  %w1s = f32[4]{0} multiply(%w1, %w1), metadata={op_name="jit(f)/stage1/mul"}
  %x = f32[4]{0} parameter(0), metadata={op_name="x"}
  %w0 = f32[4]{0} parameter(1), metadata={op_name="w0"}
  %w0s = f32[4]{0} multiply(%w0, %w0), metadata={op_name="jit(f)/stage0/mul"}
  %h0 = f32[4]{0} add(%x, %w0s), metadata={op_name="jit(f)/stage0/add"}
  %t0 = f32[4]{0} tanh(%h0), metadata={op_name="jit(f)/stage0/tanh"}
  %h1 = f32[4]{0} add(%t0, %w1s), metadata={op_name="jit(f)/stage1/add"}
  ROOT %t1 = f32[4]{0} tanh(%h1), metadata={op_name="jit(f)/stage1/tanh"}
}
"""


def test_sub_layers_are_in_the_order_the_program_runs_them_not_hlos_print_order():
    root = layer_tree(parse_module(POST_ORDER))
    # stage0's tanh hands its value to stage1's add: stage0 runs first
    assert list(root.children) == ["stage0", "stage1"]
    assert root.children["stage1"].ops == ["w1s", "h1", "t1"]


# A helper jitted once and called from two layers (jnp.tril, jnp.where in an attention): its
# ops are walked once for each call site, so they are in both layers.
SHARED_PRE = """HloModule shared

%helper (p: f32[4]) -> f32[4] {
  %p = f32[4]{0} parameter(0)
  ROOT %n = f32[4]{0} negate(%p), metadata={op_name="neg"}
}

ENTRY %main (x: f32[4]) -> f32[4] {
  %x = f32[4]{0} parameter(0), metadata={op_name="x"}
  %c0 = f32[4]{0} call(%x), to_apply=%helper, metadata={op_name="jit(f)/enc/jit(helper)"}
  %e = f32[4]{0} exponential(%c0), metadata={op_name="jit(f)/enc/exp"}
  %c1 = f32[4]{0} call(%e), to_apply=%helper, metadata={op_name="jit(f)/dec/jit(helper)"}
  ROOT %l = f32[4]{0} log(%c1), metadata={op_name="jit(f)/dec/log"}
}
"""

# XLA inlined both calls into the fusion of the layer that made them; the fusion of dec reads
# enc's result through a copy XLA added (a layout change, no op of the program).
SHARED_POST = """HloModule shared, is_scheduled=true

%fused_enc (p0: f32[4]) -> f32[4] {
  %p0 = f32[4]{0} parameter(0)
  %n.1 = f32[4]{0} negate(%p0), metadata={op_name="jit(f)/enc/jit(helper)/neg"}
  ROOT %e = f32[4]{0} exponential(%n.1), metadata={op_name="jit(f)/enc/exp"}
}

%fused_dec (q0: f32[4]) -> f32[4] {
  %q0 = f32[4]{0} parameter(0)
  %n.2 = f32[4]{0} negate(%q0), metadata={op_name="jit(f)/dec/jit(helper)/neg"}
  ROOT %l = f32[4]{0} log(%n.2), metadata={op_name="jit(f)/dec/log"}
}

ENTRY %main (x: f32[4]) -> f32[4] {
  %x = f32[4]{0} parameter(0)
  %fusion.enc = f32[4]{0} fusion(%x), kind=kLoop, calls=%fused_enc
  %copy.1 = f32[4]{0} copy(%fusion.enc)
  ROOT %fusion.dec = f32[4]{0} fusion(%copy.1), kind=kLoop, calls=%fused_dec
}
"""


def test_every_kernel_is_with_its_layer_and_none_is_left_outside_every_layer():
    b = bundle_from_hlo(SHARED_POST, name="shared", before_text=SHARED_PRE)
    root = layers_of_bundle(b)
    enc, dec = root.children["enc"], root.children["dec"]
    assert enc.ops == ["n", "e"] and dec.ops == ["n", "l"]  # the helper's negate in each
    # each fusion holds the helper's negate (in both layers) and one op of its own layer alone
    assert enc.kernels == ["fusion.enc"]
    # the copy does no op: it is with the layer that reads it, and counted as XLA's
    assert sorted(dec.kernels) == ["copy.1", "fusion.dec"] and dec.added == ["copy.1"]
    assert root.kernels == []
    lines = layer_lines(root)
    assert "  dec: 2 ops -> 2 kernels" in lines[2] and "1 added by XLA, doing no op of the program" in lines[2]
    assert "added by XLA" not in lines[1]
    assert not any("outside every layer" in line for line in lines)
    as_data = layer_dict(root)
    assert [c["added_kernels"] for c in as_data["children"]] == [0, 1]


# A constant XLA merged from two layers into one (the same 1/sqrt(d) in each attention), read by
# a fusion of the second layer: the fusion holds an op of each layer and its result is dec's.
MERGED_PRE = """HloModule merged

ENTRY %main (x: f32[4]) -> f32[4] {
  %x = f32[4]{0} parameter(0), metadata={op_name="x"}
  %k0 = f32[] constant(2), metadata={op_name="jit(f)/enc/div"}
  %b0 = f32[4]{0} broadcast(%k0), dimensions={}, metadata={op_name="jit(f)/enc/div"}
  %d0 = f32[4]{0} divide(%x, %b0), metadata={op_name="jit(f)/enc/div"}
  %k1 = f32[] constant(2), metadata={op_name="jit(f)/dec/div"}
  %b1 = f32[4]{0} broadcast(%k1), dimensions={}, metadata={op_name="jit(f)/dec/div"}
  %s = f32[4]{0} sine(%d0), metadata={op_name="jit(f)/dec/sin"}
  ROOT %d1 = f32[4]{0} divide(%s, %b1), metadata={op_name="jit(f)/dec/div"}
}
"""

MERGED_POST = """HloModule merged, is_scheduled=true

%fused_enc (p0: f32[4]) -> f32[4] {
  %p0 = f32[4]{0} parameter(0)
  %k0 = f32[] constant(2), metadata={op_name="jit(f)/enc/div"}
  %b0 = f32[4]{0} broadcast(%k0), dimensions={}, metadata={op_name="jit(f)/enc/div"}
  ROOT %d0 = f32[4]{0} divide(%p0, %b0), metadata={op_name="jit(f)/enc/div"}
}

%fused_dec (q0: f32[4]) -> f32[4] {
  %q0 = f32[4]{0} parameter(0)
  %k0.1 = f32[] constant(2), metadata={op_name="jit(f)/enc/div"}
  %b0.1 = f32[4]{0} broadcast(%k0.1), dimensions={}, metadata={op_name="jit(f)/enc/div"}
  %s = f32[4]{0} sine(%q0), metadata={op_name="jit(f)/dec/sin"}
  ROOT %d1 = f32[4]{0} divide(%s, %b0.1), metadata={op_name="jit(f)/dec/div"}
}

ENTRY %main (x: f32[4]) -> f32[4] {
  %x = f32[4]{0} parameter(0)
  %fusion.enc = f32[4]{0} fusion(%x), kind=kLoop, calls=%fused_enc
  ROOT %fusion.dec = f32[4]{0} fusion(%fusion.enc), kind=kLoop, calls=%fused_dec
}
"""


def test_a_fusion_holding_ops_of_two_layers_is_with_the_layer_of_its_result():
    b = bundle_from_hlo(MERGED_POST, name="merged", before_text=MERGED_PRE)
    root = layers_of_bundle(b)
    enc, dec = root.children["enc"], root.children["dec"]
    assert set(b.provenance.kernel_to_pre["fusion.dec"]) & set(enc.ops)  # the merged constant is enc's
    assert dec.kernels == ["fusion.dec"] and enc.kernels == ["fusion.enc"] and root.kernels == []
    assert enc.shared == ["fusion.dec"]
