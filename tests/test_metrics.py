"""Per-compile numbers (analysis.metrics): consistency between them, and that disabling
XLA's fusion passes moves them the way fusion explains."""

from __future__ import annotations

import os

import pytest

from analysis.hlo import parse_module
from analysis.kernels import ROUTES, kernels
from analysis.metrics import compute_metrics, unfused_bytes
from analysis.provenance import compute_ops, map_provenance
from sample_models import gallery

GALLERY = list(gallery())

# XLA:CPU pass names: "fusion" makes the loop fusions, "dot-library-rewriter" the
# YNNPACK/oneDNN fusions around dots (test_fusion_pass_names_exist checks they are real).
NO_FUSION = "fusion,dot-library-rewriter"


@pytest.mark.parametrize("name", GALLERY)
def test_gallery_metrics_are_consistent(gallery_bundle, name):
    b = gallery_bundle(name)
    m = b.metrics
    launching = [k for k in b.kernels if k.route != "control"]
    assert m["kernels_after"] == len(launching) > 0
    assert m["control_ops_after"] == len(b.kernels) - len(launching)
    assert set(m["kernels_by_route"]) == set(ROUTES)
    assert sum(m["kernels_by_route"].values()) == len(b.kernels)
    assert sum(m["kernels_by_library"].values()) == sum(1 for k in b.kernels if k.library)
    assert m["fused_bytes"] == sum(k.bytes for k in launching)
    assert m["flops"] == sum(k.flops for k in launching)
    assert m["multi_op_fusions"] == sum(1 for k in launching if k.is_multi_op_fusion)
    assert m["compute_ops_before"] == len(compute_ops(b.module("hlo_before")))
    assert m["unfused_bytes"] == unfused_bytes(b.module("hlo_before"))
    assert m["bytes_saved"] == m["unfused_bytes"] - m["fused_bytes"]
    assert m["bytes_saved_fraction"] == pytest.approx(m["bytes_saved"] / m["unfused_bytes"])
    assert 0.0 <= m["fusion_coverage"] <= 1.0
    assert m["provenance_mapped_fraction"] == b.provenance.mapped_fraction
    # A gallery model exists to show fusion: fewer kernels than ops, less traffic.
    assert m["kernels_after"] < m["compute_ops_before"]
    assert m["bytes_saved"] > 0
    assert m["fusion_coverage"] > 0


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
