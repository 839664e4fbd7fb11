"""Library epilogues are fusion (analysis.program.kernels.library_epilogue, provenance's
"epilogue" matches, metrics' fusion coverage): a cuBLASLt call that does a matmul's bias add and
ReLU, a cuDNN convolution with its bias and activation, a oneDNN matmul with post-ops, a
YNNPACK fusion around a dot. The HLO is written here in the form XLA prints (the backend configs'
fields as XLA:GPU writes them, checked against the recorded H200 compiles); every expected value
is worked out from the text."""

from __future__ import annotations

import os

import pytest

from analysis.bundle.core import Bundle, analyze
from analysis.hlo import parse_module
from analysis.program.kernels import epilogue_text, kernels, library_epilogue
from analysis.program.metrics import compute_metrics
from analysis.program.provenance import map_provenance
from tests.paths import ROOT

# relu(x @ w + b) as JAX writes it: the bias broadcast, the add, the ReLU in a nested jit.
PRE = """HloModule jit_f
%relu (x.1: f32[64,32]) -> f32[64,32] {
  %x.1 = f32[64,32]{1,0} parameter(0)
  %zero = f32[] constant(0)
  %zb = f32[64,32]{1,0} broadcast(%zero), dimensions={}, metadata={op_name="max"}
  ROOT %max = f32[64,32]{1,0} maximum(%x.1, %zb), metadata={op_name="max"}
}
ENTRY %main (x: f32[64,16], w: f32[16,32], b: f32[32]) -> f32[64,32] {
  %x = f32[64,16]{1,0} parameter(0)
  %w = f32[16,32]{1,0} parameter(1)
  %b = f32[32]{0} parameter(2)
  %dot = f32[64,32]{1,0} dot(%x, %w), lhs_contracting_dims={1}, rhs_contracting_dims={0}, metadata={op_name="jit(f)/dense/dot_general"}
  %bb = f32[64,32]{1,0} broadcast(%b), dimensions={1}, metadata={op_name="jit(f)/dense/add"}
  %add = f32[64,32]{1,0} add(%dot, %bb), metadata={op_name="jit(f)/dense/add"}
  ROOT %r = f32[64,32]{1,0} call(%add), to_apply=%relu, metadata={op_name="jit(f)/dense/jit(relu)"}
}
"""


def _gemm(epilogue: str, alpha: str = "1", beta: str = "0") -> str:
    return ('{"operation_queue_id":"0","gemm_backend_config":{"selected_algorithm":"0","alpha_real":' + alpha
            + ',"beta":' + beta + ',"dot_dimension_numbers":{"lhs_contracting_dimensions":["1"],'
            '"rhs_contracting_dimensions":["0"],"lhs_batch_dimensions":[],"rhs_batch_dimensions":[]},'
            '"alpha_imag":0,"epilogue":"' + epilogue + '","grad_x":false,"grad_y":false}}')


def _post(epilogue: str) -> str:
    """XLA:GPU with Triton GEMMs off: one cuBLASLt call with the bias as its third operand."""
    return f"""HloModule jit_f, is_scheduled=true
ENTRY %main (x: f32[64,16], w: f32[16,32], b: f32[32]) -> f32[64,32] {{
  %x = f32[64,16]{{1,0}} parameter(0)
  %w = f32[16,32]{{1,0}} parameter(1)
  %b = f32[32]{{0}} parameter(2)
  %lt = (f32[64,32]{{1,0}}, s8[4194304]{{0}}) custom-call(%x, %w, %b), custom_call_target="__cublas$lt$matmul", metadata={{op_name="jit(f)/dense/dot_general"}}, backend_config={_gemm(epilogue)}
  ROOT %g = f32[64,32]{{1,0}} get-tuple-element(%lt), index=0, metadata={{op_name="jit(f)/dense/dot_general"}}
}}
"""


# The same program with the matmul a plain cuBLAS call and the bias add and ReLU in a loop fusion.
POST_APART = """HloModule jit_f, is_scheduled=true
%fused (p0: f32[64,32], p1: f32[32]) -> f32[64,32] {
  %p0 = f32[64,32]{1,0} parameter(0)
  %p1 = f32[32]{0} parameter(1)
  %bb.1 = f32[64,32]{1,0} broadcast(%p1), dimensions={1}, metadata={op_name="jit(f)/dense/add"}
  %add.1 = f32[64,32]{1,0} add(%p0, %bb.1), metadata={op_name="jit(f)/dense/add"}
  %zero.1 = f32[] constant(0)
  %zb.1 = f32[64,32]{1,0} broadcast(%zero.1), dimensions={}
  ROOT %max.1 = f32[64,32]{1,0} maximum(%add.1, %zb.1), metadata={op_name="jit(f)/dense/jit(relu)/max"}
}
ENTRY %main (x: f32[64,16], w: f32[16,32], b: f32[32]) -> f32[64,32] {
  %x = f32[64,16]{1,0} parameter(0)
  %w = f32[16,32]{1,0} parameter(1)
  %b = f32[32]{0} parameter(2)
  %gemm = (f32[64,32]{1,0}, s8[4194304]{0}) custom-call(%x, %w), custom_call_target="__cublas$gemm", metadata={op_name="jit(f)/dense/dot_general"}, backend_config=""" + _gemm("DEFAULT") + """
  %g = f32[64,32]{1,0} get-tuple-element(%gemm), index=0
  ROOT %loop_fusion = f32[64,32]{1,0} fusion(%g, %b), kind=kLoop, calls=%fused
}
"""


def _one(text: str, name: str):
    return next(i for i in parse_module(text).instructions() if i.name == name)


@pytest.mark.parametrize("epilogue,alpha,beta,words", [
    ("BIAS_RELU", "1", "0", ("bias", "ReLU")),
    ("DEFAULT", "1", "0", ()),
    ("BIAS", "1", "0", ("bias",)),
    ("RELU", "1", "0", ("ReLU",)),
    ("BIAS_GELU", "1", "0", ("bias", "GELU")),
    ("GELU_AUX", "1", "0", ("GELU",)),
    # alpha other than 1: a scale XLA folded into the call; beta other than 0: it adds its output
    # operand (a residual); in the order the call applies them: alpha*(A.B) + bias, act, + beta*C
    ("BIAS", "0.125", "1", ("scale", "bias", "residual add")),
    ("DEFAULT", "1", "1", ("residual add",)),
])
def test_a_cublas_calls_epilogue_is_read_from_its_backend_config(epilogue, alpha, beta, words):
    text = _post(epilogue).replace(_gemm(epilogue), _gemm(epilogue, alpha, beta))
    inst = _one(text, "lt")
    assert library_epilogue(inst) == words
    (k,) = [k for k in kernels(parse_module(text), "gpu")]
    assert k.epilogue == words and k.fuses_ops == bool(words)


def test_cudnn_and_onednn_epilogues():
    conv = r"""HloModule m, is_scheduled=true
ENTRY %main (a: f32[1,8,8,4], w: f32[3,3,4,8], b: f32[8], s: f32[1,8,8,8]) -> f32[1,8,8,8] {
  %a = f32[1,8,8,4]{3,2,1,0} parameter(0)
  %w = f32[3,3,4,8]{3,2,1,0} parameter(1)
  %b = f32[8]{0} parameter(2)
  %s = f32[1,8,8,8]{3,2,1,0} parameter(3)
  %c = (f32[1,8,8,8]{3,2,1,0}, u8[0]{0}) custom-call(%a, %w, %b, %s), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f, custom_call_target="__cudnn$convBiasActivationForward", backend_config={"operation_queue_id":"0","cudnn_conv_backend_config":{"activation_mode":"kRelu","conv_result_scale":1,"side_input_scale":1,"leakyrelu_alpha":0}}
  %plain = (f32[1,8,8,8]{3,2,1,0}, u8[0]{0}) custom-call(%a, %w), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f, custom_call_target="__cudnn$convForward", backend_config={"operation_queue_id":"0","cudnn_conv_backend_config":{"activation_mode":"kNone","conv_result_scale":1,"side_input_scale":0,"leakyrelu_alpha":0}}
  ROOT %g = f32[1,8,8,8]{3,2,1,0} get-tuple-element(%c), index=0
}
"""
    # bias (the target), the side input added (scale 1), then the ReLU
    assert library_epilogue(_one(conv, "c")) == ("bias", "residual add", "ReLU")
    assert library_epilogue(_one(conv, "plain")) == ()
    ks = {k.name: k for k in kernels(parse_module(conv), "gpu")}
    assert epilogue_text(ks["c"]) == "cuDNN convolution + bias + residual add + ReLU epilogue"
    assert epilogue_text(ks["plain"]) == ""
    onednn = r"""HloModule m, is_scheduled=true
ENTRY %main (x: f32[4,8], w: f32[8,16], b: f32[16]) -> f32[4,16] {
  %x = f32[4,8]{1,0} parameter(0)
  %w = f32[8,16]{1,0} parameter(1)
  %b = f32[16]{0} parameter(2)
  ROOT %mm = f32[4,16]{1,0} custom-call(%x, %w, %b), custom_call_target="__onednn$matmul", backend_config={"onednn_matmul_config":{"fusions":{"ops":["BIAS","GELU_TANH"]}}}
}
"""
    (k,) = kernels(parse_module(onednn), "cpu")
    assert k.library == "oneDNN" and k.epilogue == ("bias", "GELU (tanh)")
    assert epilogue_text(k) == "oneDNN matmul + bias + GELU (tanh) epilogue"


def test_the_ops_a_cublaslt_epilogue_absorbed_are_fused_and_counted_in_coverage():
    pre = parse_module(PRE)
    post = parse_module(_post("BIAS_RELU"))
    ks = kernels(post, "gpu")
    assert [k.name for k in ks] == ["lt"] and epilogue_text(ks[0]) == "cuBLASLt matmul + bias + ReLU epilogue"
    prov = map_provenance(pre, post, ks)
    # the five compute ops: dot, bb, add (entry), zb, max (the nested relu); all in the one call
    assert prov.pre_to_kernels == {n: ["lt"] for n in ("dot", "bb", "add", "zb", "max")}
    # the dot by its metadata; what the call did after it (the add and ReLU reached from the dot,
    # the broadcasts that feed them) is its epilogue, not "the op it reads"
    assert prov.how == {"dot": "metadata", "bb": "epilogue", "add": "epilogue", "zb": "epilogue", "max": "epilogue"}
    m = compute_metrics(pre, post, ks, prov)
    assert m["fusion_coverage"] == 1.0  # 5 of 5 ops ended in a kernel that does several of them
    assert m["multi_op_fusions"] == 0  # it is no fusion instruction


def test_a_library_call_without_an_epilogue_fuses_nothing():
    pre = parse_module(PRE)
    post = parse_module(_post("DEFAULT"))
    ks = kernels(post, "gpu")
    prov = map_provenance(pre, post, ks)
    assert "epilogue" not in prov.how.values()
    assert compute_metrics(pre, post, ks, prov)["fusion_coverage"] == 0.0
    # the matmul a plain call, the bias add and ReLU a loop fusion: 4 of the 5 ops (all but the dot)
    post = parse_module(POST_APART)
    ks = kernels(post, "gpu")
    assert [k.epilogue for k in ks] == [(), ()]
    prov = map_provenance(pre, post, ks)
    assert prov.pre_to_kernels["dot"] == ["gemm"] and prov.how["dot"] == "metadata"
    assert compute_metrics(pre, post, ks, prov)["fusion_coverage"] == pytest.approx(4 / 5)


def test_a_ynnpack_fusion_holding_a_dot_and_its_bias_and_relu():
    post = parse_module("""HloModule jit_f, is_scheduled=true
%ynn (p0: f32[64,16], p1: f32[16,32], p2: f32[32]) -> f32[64,32] {
  %p0 = f32[64,16]{1,0} parameter(0)
  %p1 = f32[16,32]{1,0} parameter(1)
  %p2 = f32[32]{0} parameter(2)
  %dot.1 = f32[64,32]{1,0} dot(%p0, %p1), lhs_contracting_dims={1}, rhs_contracting_dims={0}, metadata={op_name="jit(f)/dense/dot_general"}
  %bb.1 = f32[64,32]{1,0} broadcast(%p2), dimensions={1}, metadata={op_name="jit(f)/dense/add"}
  %add.1 = f32[64,32]{1,0} add(%dot.1, %bb.1), metadata={op_name="jit(f)/dense/add"}
  %zero.1 = f32[] constant(0)
  %zb.1 = f32[64,32]{1,0} broadcast(%zero.1), dimensions={}
  ROOT %max.1 = f32[64,32]{1,0} maximum(%add.1, %zb.1), metadata={op_name="jit(f)/dense/jit(relu)/max"}
}
ENTRY %main (x: f32[64,16], w: f32[16,32], b: f32[32]) -> f32[64,32] {
  %x = f32[64,16]{1,0} parameter(0)
  %w = f32[16,32]{1,0} parameter(1)
  %b = f32[32]{0} parameter(2)
  ROOT %ynn_fusion = f32[64,32]{1,0} fusion(%x, %w, %b), kind=kCustom, calls=%ynn, backend_config={"fusion_config":{"kind":"__ynn_fusion"}}
}
""")
    (k,) = kernels(post, "cpu")
    assert (k.route, k.library) == ("library", "YNNPACK")
    assert k.epilogue == ("add", "maximum") and k.fuses_ops
    assert epilogue_text(k) == "YNNPACK matmul fused with add + maximum"
    pre = parse_module(PRE)
    prov = map_provenance(pre, post, [k])
    assert compute_metrics(pre, post, [k], prov)["fusion_coverage"] == 1.0


def test_recorded_h200_mlp_with_triton_gemms_off_reports_its_epilogue_and_coverage():
    """The issue's case: XLA:GPU (H200 target, Triton GEMMs off) made mlp's 14 ops two cuBLASLt
    calls, dense1's with the BIAS_RELU epilogue and dense2's with BIAS."""
    path = os.path.join(ROOT, "sample_models", "recorded", "h200", "mlp.triton-gemm-off.bundle.json")
    b = analyze(Bundle.load(path))
    assert sorted(epilogue_text(k) for k in b.kernels) == [
        "cuBLASLt matmul + bias + ReLU epilogue", "cuBLASLt matmul + bias epilogue"]
    # every op ended in one of the two calls, each of which does several: all 14 are fused
    assert b.metrics["compute_ops_before"] == 14
    assert b.metrics["fusion_coverage"] == 1.0
    how = b.provenance.how
    dense1 = {n for n, ks in b.provenance.pre_to_kernels.items() if ks == ["cublas-lt-matmul.3"]}
    assert {how[n] for n in dense1 if n != "dot_general.2"} == {"epilogue"} and how["dot_general.2"] == "metadata"
    assert {"max.3", "add.11"} <= dense1
