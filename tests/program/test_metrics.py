"""Per-compile numbers (analysis.program.metrics): consistency between them, and that disabling
XLA's fusion passes moves them the way fusion explains."""

from __future__ import annotations

import os

import pytest

from analysis.hlo import parse_module
from analysis.program.kernels import kernels
from analysis.program.metrics import compute_metrics
from analysis.program.provenance import map_provenance
from sample_models import gallery

GALLERY = list(gallery())

# XLA:CPU pass names: "fusion" makes the loop fusions, "dot-library-rewriter" the
# YNNPACK/oneDNN fusions around dots (test_fusion_pass_names_exist checks they are real).
NO_FUSION = "fusion,dot-library-rewriter"


# A dense layer with bias, ReLU and a row sum, before and after a hand-written optimization: the
# dot stays a library call (Eigen on CPU), the other five ops become one kInput fusion.
LAYER_PRE = """HloModule m
%sum (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(%a, %b)
}
ENTRY %main (x: f32[4,8], w: f32[8,16], b: f32[16]) -> f32[4] {
  %x = f32[4,8]{1,0} parameter(0)
  %w = f32[8,16]{1,0} parameter(1)
  %b = f32[16]{0} parameter(2)
  %dot = f32[4,16]{1,0} dot(%x, %w), lhs_contracting_dims={1}, rhs_contracting_dims={0}, metadata={op_name="jit(f)/dot_general"}
  %bb = f32[4,16]{1,0} broadcast(%b), dimensions={1}, metadata={op_name="jit(f)/add"}
  %add = f32[4,16]{1,0} add(%dot, %bb), metadata={op_name="jit(f)/add"}
  %zero = f32[] constant(0)
  %zb = f32[4,16]{1,0} broadcast(%zero), dimensions={}, metadata={op_name="jit(f)/max"}
  %relu = f32[4,16]{1,0} maximum(%add, %zb), metadata={op_name="jit(f)/max"}
  ROOT %r = f32[4]{0} reduce(%relu, %zero), dimensions={1}, to_apply=%sum, metadata={op_name="jit(f)/reduce_sum"}
}
"""
LAYER_POST = """HloModule m, is_scheduled=true
%sum (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(%a, %b)
}
%fused (p0: f32[4,16], p1: f32[16]) -> f32[4] {
  %p0 = f32[4,16]{1,0} parameter(0)
  %p1 = f32[16]{0} parameter(1)
  %bb.1 = f32[4,16]{1,0} broadcast(%p1), dimensions={1}, metadata={op_name="jit(f)/add"}
  %add.1 = f32[4,16]{1,0} add(%p0, %bb.1), metadata={op_name="jit(f)/add"}
  %zero.1 = f32[] constant(0)
  %zb.1 = f32[4,16]{1,0} broadcast(%zero.1), dimensions={}, metadata={op_name="jit(f)/max"}
  %relu.1 = f32[4,16]{1,0} maximum(%add.1, %zb.1), metadata={op_name="jit(f)/max"}
  ROOT %r.1 = f32[4]{0} reduce(%relu.1, %zero.1), dimensions={1}, to_apply=%sum, metadata={op_name="jit(f)/reduce_sum"}
}
ENTRY %main (x: f32[4,8], w: f32[8,16], b: f32[16]) -> f32[4] {
  %x = f32[4,8]{1,0} parameter(0)
  %w = f32[8,16]{1,0} parameter(1)
  %b = f32[16]{0} parameter(2)
  %dot = f32[4,16]{1,0} dot(%x, %w), lhs_contracting_dims={1}, rhs_contracting_dims={0}, metadata={op_name="jit(f)/dot_general"}
  ROOT %fusion = f32[4]{0} fusion(%dot, %b), kind=kInput, calls=%fused
}
"""


def test_metrics_of_a_hand_worked_layer():
    pre, post = parse_module(LAYER_PRE), parse_module(LAYER_POST)
    ks = kernels(post, "cpu")
    m = compute_metrics(pre, post, ks, map_provenance(pre, post, ks))
    # compute ops: dot, two broadcasts, add, maximum, reduce (parameters and the constant are plumbing)
    assert m["compute_ops_before"] == 6
    assert m["kernels_after"] == 2 and m["control_ops_after"] == 0
    assert m["kernels_by_route"] == {"library": 1, "triton": 0, "emitter": 1, "layout": 0, "collective": 0,
                                     "control": 0}
    assert m["kernels_by_library"] == {"Eigen": 1}
    assert m["multi_op_fusions"] == 1
    # Unfused, each op reads its operands once and writes its result (f32 = 4 bytes):
    #   dot 128 + 512 + 256 = 896; broadcast(b) 64 + 256 = 320; add 256 + 256 + 256 = 768;
    #   broadcast(0) 4 + 256 = 260; maximum 768; reduce 256 + 4 + 16 = 276  -> 3288.
    # Fused: the dot 896, the fusion reads dot's 256 and b's 64 and writes 16 -> 1232.
    assert m["unfused_bytes"] == 3288 and m["fused_bytes"] == 1232
    assert m["bytes_saved"] == 2056 and m["bytes_saved_fraction"] == pytest.approx(2056 / 3288)
    # 5 of the 6 ops ended in the multi-op fusion (the dot is on its own)
    assert m["fusion_coverage"] == pytest.approx(5 / 6)
    # dot 2*4*16*8 = 1024; add 64, maximum 64, reduce 64 input elements (broadcasts move data)
    assert m["flops"] == 1024 + 64 + 64 + 64
    # instructions: 3 (sum) + 6 (entry... 10 in pre's entry) and 3 + 8 + 5 after
    assert m["instructions_before"] == 3 + 10 and m["instructions_after"] == 3 + 8 + 5


WHILE_POST = """HloModule w, is_scheduled=true
%cond (s: (s32[], f32[8])) -> pred[] {
  %s = (s32[], f32[8]{0}) parameter(0)
  %i = s32[] get-tuple-element(%s), index=0
  %n = s32[] constant(3)
  ROOT %lt = pred[] compare(%i, %n), direction=LT
}
%body (s: (s32[], f32[8])) -> (s32[], f32[8]) {
  %s = (s32[], f32[8]{0}) parameter(0)
  %i = s32[] get-tuple-element(%s), index=0
  %v = f32[8]{0} get-tuple-element(%s), index=1
  %one = s32[] constant(1)
  %i2 = s32[] add(%i, %one)
  %e = f32[8]{0} exponential(%v)
  ROOT %t = (s32[], f32[8]{0}) tuple(%i2, %e)
}
ENTRY %main (p: f32[8]) -> (s32[], f32[8]) {
  %p = f32[8]{0} parameter(0)
  %z = s32[] constant(0)
  %init = (s32[], f32[8]{0}) tuple(%z, %p)
  ROOT %loop = (s32[], f32[8]{0}) while(%init), condition=%cond, body=%body
}
"""


def test_control_flow_is_not_counted_as_a_kernel():
    post = parse_module(WHILE_POST)
    ks = kernels(post, "cpu")
    m = compute_metrics(None, post, ks, None)
    # the loop itself (control) plus the kernels of its body and condition: add, exponential, compare
    assert m["control_ops_after"] == 1
    assert m["kernels_after"] == 3
    assert sum(m["kernels_by_route"].values()) == 4


@pytest.mark.parametrize("name", GALLERY)
def test_every_gallery_model_shows_fusion(gallery_bundle, name):
    """A gallery model exists to show fusion: fewer kernels than ops, less traffic, some ops fused;
    a sharded one, the collectives XLA put in (its traffic before optimization is of the global
    shapes, after it of one device's: not compared here)."""
    b = gallery_bundle(name)
    m = b.metrics
    assert 0 < m["kernels_after"] < m["compute_ops_before"]
    assert 0 < m["fusion_coverage"] <= 1.0
    if b.options.get("devices", 1) > 1:
        assert m["kernels_by_route"].get("collective", 0) > 0
    else:
        assert m["bytes_saved"] > 0


def test_disabling_fusion_gives_more_kernels(gallery_bundle):
    fused = gallery_bundle("mlp").metrics
    unfused = gallery_bundle("mlp", xla_disable_hlo_passes=NO_FUSION).metrics
    assert unfused["kernels_after"] > fused["kernels_after"]
    assert unfused["multi_op_fusions"] < fused["multi_op_fusions"]
    assert unfused["fusion_coverage"] < fused["fusion_coverage"]
    assert unfused["fused_bytes"] > fused["fused_bytes"]
    # The program before optimization is the same either way.
    assert unfused["compute_ops_before"] == fused["compute_ops_before"]
    assert unfused["unfused_bytes"] == fused["unfused_bytes"]


def test_fusion_pass_names_exist(tmp_path):
    """xla_disable_hlo_passes ignores names it does not know, so check ours run: with
    xla_dump_hlo_pass_re=.* XLA dumps a snapshot named after every pass that changed the module."""
    jax = pytest.importorskip("jax")
    from analysis.compile.load import load_gallery

    m = load_gallery("mlp")
    jax.jit(m.model).lower(*m.inputs).compile(
        compiler_options={"xla_dump_to": str(tmp_path), "xla_dump_hlo_pass_re": ".*"})
    names = " ".join(os.listdir(tmp_path))
    for p in NO_FUSION.split(","):
        assert f".after_{p}." in names, p


def test_metrics_without_pre_module():
    post = parse_module('''HloModule m, is_scheduled=true
ENTRY %main (p: f32[8]) -> f32[8] {
  %p = f32[8]{0} parameter(0)
  ROOT %n = f32[8]{0} negate(%p)
}
''')
    m = compute_metrics(None, post, kernels(post), None)
    assert m["kernels_after"] == 1 and m["fused_bytes"] == 64 and m["flops"] == 8
    assert "unfused_bytes" not in m and "fusion_coverage" not in m


def test_bytes_saved_by_a_hand_written_fusion():
    pre = parse_module('''HloModule m
ENTRY %main (p: f32[100]) -> f32[100] {
  %p = f32[100]{0} parameter(0)
  %a = f32[100]{0} negate(%p), metadata={op_name="jit(f)/neg"}
  ROOT %e = f32[100]{0} exponential(%a), metadata={op_name="jit(f)/exp"}
}
''')
    post = parse_module('''HloModule m, is_scheduled=true
%fc (x: f32[100]) -> f32[100] {
  %x = f32[100]{0} parameter(0)
  %a.1 = f32[100]{0} negate(%x), metadata={op_name="jit(f)/neg"}
  ROOT %e.1 = f32[100]{0} exponential(%a.1), metadata={op_name="jit(f)/exp"}
}
ENTRY %main (p: f32[100]) -> f32[100] {
  %p = f32[100]{0} parameter(0)
  ROOT %fusion = f32[100]{0} fusion(%p), kind=kLoop, calls=%fc
}
''')
    ks = kernels(post)
    m = compute_metrics(pre, post, ks, map_provenance(pre, post, ks))
    # Unfused: negate reads 400 B and writes 400 B, exp the same. Fused: 400 in, 400 out.
    assert m["unfused_bytes"] == 1600 and m["fused_bytes"] == 800 and m["bytes_saved"] == 800
    assert m["bytes_saved_fraction"] == 0.5
    assert m["compute_ops_before"] == 2 and m["kernels_after"] == 1
    assert m["fusion_coverage"] == 1.0 and m["flops"] == 200
