"""The kernel legend (analysis.program.kernels): which instructions launch kernels, their route and
library, bytes and FLOPs.

Two sources: hand-written optimized HLO in the style XLA:GPU and XLA:CPU print (checked
against XLA's own parser, so it is real syntax), where every expected number is worked out
here from the shapes in the text; and the gallery models compiled on this machine, where
only properties that must hold for any compile are asserted.
"""

from __future__ import annotations

import pytest

from analysis.hlo import parse_module
from analysis.program.kernels import NO_KERNEL, ROUTE_COLORS, ROUTE_LABELS, ROUTES, Kernel, detect_platform, kernel_instruction_map, kernels
from sample_models import gallery

GALLERY = list(gallery())

# ----------------------------------------------------------------------------- GPU-style HLO

GPU_HLO = r'''HloModule jit_step, is_scheduled=true, entry_computation_layout={(f32[64,128]{1,0}, f32[128,256]{1,0}, f32[8,32,32,16]{3,2,1,0}, f32[3,3,16,32]{3,2,1,0}, bf16[2,4,128,64]{3,2,1,0}, bf16[2,4,128,64]{3,2,1,0}, bf16[2,4,128,64]{3,2,1,0}, pred[])->f32[64,256]{1,0}}

%fused_add_relu (param_0: f32[64,256], param_1: f32[256]) -> f32[64,256] {
  %param_0 = f32[64,256]{1,0} parameter(0)
  %param_1 = f32[256]{0} parameter(1)
  %broadcast.1 = f32[64,256]{1,0} broadcast(%param_1), dimensions={1}
  %add.1 = f32[64,256]{1,0} add(%param_0, %broadcast.1), metadata={op_name="jit(step)/dense/add" source_file="/m.py" source_line=7}
  %constant.1 = f32[] constant(0)
  %broadcast.2 = f32[64,256]{1,0} broadcast(%constant.1), dimensions={}
  ROOT %maximum.1 = f32[64,256]{1,0} maximum(%add.1, %broadcast.2), metadata={op_name="jit(step)/dense/max" source_file="/m.py" source_line=7}
}

%region_add (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %sum = f32[] add(%a, %b)
}

%fused_reduce (param_0.2: f32[64,256]) -> f32[64] {
  %param_0.2 = f32[64,256]{1,0} parameter(0)
  %constant.2 = f32[] constant(0)
  ROOT %reduce.1 = f32[64]{0} reduce(%param_0.2, %constant.2), dimensions={1}, to_apply=%region_add
}

%triton_gemm_computation (p0: f32[64,128], p1: f32[128,256]) -> f32[64,256] {
  %p0 = f32[64,128]{1,0} parameter(0)
  %p1 = f32[128,256]{1,0} parameter(1)
  ROOT %dot.2 = f32[64,256]{1,0} dot(%p0, %p1), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}

%nested_lhs (q0: f32[64,128]) -> f32[64,128] {
  %q0 = f32[64,128]{1,0} parameter(0)
  ROOT %negate.1 = f32[64,128]{1,0} negate(%q0)
}

%nested_rhs (r0: f32[128,256]) -> f32[128,256] {
  ROOT %r0 = f32[128,256]{1,0} parameter(0)
}

%nested_gemm_computation (n0: f32[64,128], n1: f32[128,256]) -> f32[64,256] {
  %n0 = f32[64,128]{1,0} parameter(0)
  %n1 = f32[128,256]{1,0} parameter(1)
  %lhs_fusion = f32[64,128]{1,0} fusion(%n0), kind=kCustom, calls=%nested_lhs, backend_config={"fusion_backend_config":{"kind":"__triton_nested_gemm_fusion","block_level_fusion_config":{"output_tiles":[{"sizes":["32","32"]}]}}}
  %rhs_fusion = f32[128,256]{1,0} fusion(%n1), kind=kCustom, calls=%nested_rhs, backend_config={"fusion_backend_config":{"kind":"__triton_nested_gemm_fusion","block_level_fusion_config":{"output_tiles":[{"sizes":["32","64"]}]}}}
  ROOT %dot.3 = f32[64,256]{1,0} dot(%lhs_fusion, %rhs_fusion), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}

%transpose_computation (t0: f32[64,256]) -> f32[256,64] {
  %t0 = f32[64,256]{1,0} parameter(0)
  ROOT %transpose.2 = f32[256,64]{1,0} transpose(%t0), dimensions={1,0}
}

%while_body (loop: (s32[], f32[64,256])) -> (s32[], f32[64,256]) {
  %loop = (s32[], f32[64,256]{1,0}) parameter(0)
  %i = s32[] get-tuple-element(%loop), index=0
  %acc = f32[64,256]{1,0} get-tuple-element(%loop), index=1
  %one = s32[] constant(1)
  %next = s32[] add(%i, %one)
  %body_exp = f32[64,256]{1,0} exponential(%acc), metadata={op_name="jit(step)/while/body/exp"}
  ROOT %body_tuple = (s32[], f32[64,256]{1,0}) tuple(%next, %body_exp)
}

%while_cond (cond_loop: (s32[], f32[64,256])) -> pred[] {
  %cond_loop = (s32[], f32[64,256]{1,0}) parameter(0)
  %ci = s32[] get-tuple-element(%cond_loop), index=0
  %limit = s32[] constant(4)
  ROOT %lt = pred[] compare(%ci, %limit), direction=LT
}

%branch_true (bt: f32[64,256]) -> f32[64,256] {
  %bt = f32[64,256]{1,0} parameter(0)
  ROOT %tanh.1 = f32[64,256]{1,0} tanh(%bt)
}

%branch_false (bf: f32[64,256]) -> f32[64,256] {
  %bf = f32[64,256]{1,0} parameter(0)
  ROOT %copy.3 = f32[64,256]{0,1} copy(%bf)
}

%summed (sa: f32[], sb: f32[]) -> f32[] {
  %sa = f32[] parameter(0)
  %sb = f32[] parameter(1)
  ROOT %ss = f32[] add(%sa, %sb)
}

%async_wrapped (aw: f32[64,256]) -> f32[64,256] {
  %aw = f32[64,256]{1,0} parameter(0)
  ROOT %sqrt.1 = f32[64,256]{1,0} sqrt(%aw)
}

ENTRY %main (x: f32[64,128], w: f32[128,256], img: f32[8,32,32,16], filt: f32[3,3,16,32], q: bf16[2,4,128,64], k: bf16[2,4,128,64], v: bf16[2,4,128,64], pick: pred[]) -> f32[64,256] {
  %x = f32[64,128]{1,0} parameter(0)
  %w = f32[128,256]{1,0} parameter(1)
  %img = f32[8,32,32,16]{3,2,1,0} parameter(2)
  %filt = f32[3,3,16,32]{3,2,1,0} parameter(3)
  %q = bf16[2,4,128,64]{3,2,1,0} parameter(4)
  %k = bf16[2,4,128,64]{3,2,1,0} parameter(5)
  %v = bf16[2,4,128,64]{3,2,1,0} parameter(6)
  %pick = pred[] parameter(7)
  %bias = f32[256]{0} constant({...})
  %cublas-gemm.1 = (f32[64,256]{1,0}, s8[4194304]{0}) custom-call(%x, %w), custom_call_target="__cublas$gemm", metadata={op_name="jit(step)/dense/dot_general" source_file="/m.py" source_line=6}, backend_config={"operation_queue_id":"0","wait_on_operation_queues":[],"gemm_backend_config":{"alpha_real":1,"beta":0,"dot_dimension_numbers":{"lhs_contracting_dimensions":["1"],"rhs_contracting_dimensions":["0"],"lhs_batch_dimensions":[],"rhs_batch_dimensions":[]},"alpha_imag":0,"precision_config":{"operand_precision":["DEFAULT","DEFAULT"],"algorithm":"ALG_UNSET"},"epilogue":"DEFAULT","lhs_stride":"8192","rhs_stride":"32768","grad_x":false,"grad_y":false,"damax_output":false},"force_earliest_schedule":false}
  %gemm_result = f32[64,256]{1,0} get-tuple-element(%cublas-gemm.1), index=0
  %loop_fusion = f32[64,256]{1,0} fusion(%gemm_result, %bias), kind=kLoop, calls=%fused_add_relu, metadata={op_name="jit(step)/dense/max" source_file="/m.py" source_line=7}, backend_config={"operation_queue_id":"0","wait_on_operation_queues":[],"fusion_backend_config":{"kind":"kLoop"},"force_earliest_schedule":false}
  %input_fusion = f32[64]{0} fusion(%loop_fusion), kind=kInput, calls=%fused_reduce, backend_config={"operation_queue_id":"0","wait_on_operation_queues":[],"fusion_backend_config":{"kind":"kInput"},"force_earliest_schedule":false}
  %cudnn-conv.1 = (f32[8,32,32,32]{3,2,1,0}, u8[0]{0}) custom-call(%img, %filt), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f, custom_call_target="__cudnn$convForward", backend_config={"operation_queue_id":"0","wait_on_operation_queues":[],"cudnn_conv_backend_config":{"activation_mode":"kNone","conv_result_scale":1,"side_input_scale":0,"leakyrelu_alpha":0},"force_earliest_schedule":false}
  %conv_result = f32[8,32,32,32]{3,2,1,0} get-tuple-element(%cudnn-conv.1), index=0
  %fmha = (bf16[2,4,128,64]{3,2,1,0}, u8[0]{0}) custom-call(%q, %k, %v), custom_call_target="__cudnn$fmhaSoftmax", backend_config={"operation_queue_id":"0","wait_on_operation_queues":[],"cudnn_fmha_backend_config":{"algorithm":{"algo_id":"0","math_type":"TENSOR_OP_MATH","tuning_knobs":{"17":"1","24":"0"},"is_cudnn_frontend":true,"workspace_size":"0"},"fmha_scale":0.125,"is_flash_attention":true,"mask_type":"NO_MASK","bmm1_dot_dimension_numbers":{"lhs_contracting_dimensions":["3"],"rhs_contracting_dimensions":["3"],"lhs_batch_dimensions":["0","1"],"rhs_batch_dimensions":["0","1"]},"bmm2_dot_dimension_numbers":{"lhs_contracting_dimensions":["3"],"rhs_contracting_dimensions":["2"],"lhs_batch_dimensions":["0","1"],"rhs_batch_dimensions":["0","1"]},"dropout_rate":0,"seed":42},"force_earliest_schedule":false}
  %attn = bf16[2,4,128,64]{3,2,1,0} get-tuple-element(%fmha), index=0
  %triton_gemm = f32[64,256]{1,0} fusion(%x, %w), kind=kCustom, calls=%triton_gemm_computation, backend_config={"operation_queue_id":"0","wait_on_operation_queues":[],"fusion_backend_config":{"kind":"__triton_gemm","triton_gemm_config":{"block_m":"64","block_n":"128","block_k":"32","split_k":"1","num_stages":"3","num_warps":"4","num_ctas":"1"}},"force_earliest_schedule":false}
  %nested_gemm = f32[64,256]{1,0} fusion(%x, %w), kind=kCustom, calls=%nested_gemm_computation, backend_config={"operation_queue_id":"0","wait_on_operation_queues":[],"fusion_backend_config":{"kind":"__triton_nested_gemm_fusion","block_level_fusion_config":{"output_tiles":[{"sizes":["32","64"]}],"num_warps":"4","num_ctas":1,"num_stages":1}},"force_earliest_schedule":false}
  %transpose_fusion = f32[256,64]{1,0} fusion(%triton_gemm), kind=kLoop, calls=%transpose_computation, backend_config={"operation_queue_id":"0","wait_on_operation_queues":[],"fusion_backend_config":{"kind":"kLoop"},"force_earliest_schedule":false}
  %copy.1 = f32[64,256]{0,1} copy(%nested_gemm)
  %transpose.1 = f32[256,64]{1,0} transpose(%nested_gemm), dimensions={1,0}
  %bitcast.1 = f32[256,64]{1,0} bitcast(%copy.1)
  %all-reduce-start = f32[64,256]{1,0} all-reduce-start(%loop_fusion), replica_groups={}, to_apply=%summed
  %all-reduce-done = f32[64,256]{1,0} all-reduce-done(%all-reduce-start)
  %zero = s32[] constant(0)
  %init = (s32[], f32[64,256]{1,0}) tuple(%zero, %all-reduce-done)
  %while.1 = (s32[], f32[64,256]{1,0}) while(%init), condition=%while_cond, body=%while_body
  %loop_out = f32[64,256]{1,0} get-tuple-element(%while.1), index=1
  %conditional.1 = f32[64,256]{1,0} conditional(%pick, %loop_out, %loop_out), true_computation=%branch_true, false_computation=%branch_false
  %async-start = ((f32[64,256]{1,0}), f32[64,256]{1,0}, u32[]) async-start(%conditional.1), calls=%async_wrapped
  ROOT %async-done = f32[64,256]{1,0} async-done(%async-start)
}
'''

# XLA:CPU style: a YNNPACK fusion, a plain dot (Eigen) and a partitioned loop fusion.
CPU_HLO = r'''HloModule jit_cpu, is_scheduled=true, entry_computation_layout={(f32[32,64]{1,0}, f32[64,16]{1,0}, f32[16]{0})->f32[32,16]{1,0}}

%ynn_computation (y0: f32[32,64], y1: f32[64,16]) -> f32[32,16] {
  %y0 = f32[32,64]{1,0} parameter(0)
  %y1 = f32[64,16]{1,0} parameter(1)
  ROOT %dot.1 = f32[32,16]{1,0} dot(%y0, %y1), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}

%bias_computation (b0: f32[32,16], b1: f32[16]) -> f32[32,16] {
  %b0 = f32[32,16]{1,0} parameter(0)
  %b1 = f32[16]{0} parameter(1)
  %bb = f32[32,16]{1,0} broadcast(%b1), dimensions={1}
  ROOT %badd = f32[32,16]{1,0} add(%b0, %bb)
}

ENTRY %main (a: f32[32,64], b: f32[64,16], c: f32[16]) -> f32[32,16] {
  %a = f32[32,64]{1,0} parameter(0)
  %b = f32[64,16]{1,0} parameter(1)
  %c = f32[16]{0} parameter(2)
  %ynn_fusion = f32[32,16]{1,0} fusion(%a, %b), kind=kCustom, calls=%ynn_computation, backend_config={"fusion_config":{"kind":"__ynn_fusion"},"outer_dimension_partitions":[]}
  %dot.2 = f32[32,16]{1,0} dot(%a, %b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  %sum = f32[32,16]{1,0} add(%ynn_fusion, %dot.2)
  ROOT %loop_fusion = f32[32,16]{1,0} fusion(%sum, %c), kind=kLoop, calls=%bias_computation, backend_config={"outer_dimension_partitions":["2"]}
}
'''


@pytest.fixture(scope="module")
def gpu():
    m = parse_module(GPU_HLO)
    return m, {k.name: k for k in kernels(m)}, kernels(m)


@pytest.fixture(scope="module")
def cpu():
    m = parse_module(CPU_HLO)
    return m, {k.name: k for k in kernels(m)}


@pytest.mark.parametrize("text", [GPU_HLO, CPU_HLO], ids=["gpu", "cpu"])
def test_handwritten_hlo_is_real_xla_syntax(text):
    """XLA's own parser accepts the snippets and sees the same instructions we do."""
    _hlo = pytest.importorskip("jaxlib._hlo")
    theirs = _hlo.hlo_module_from_text(text)
    ours = parse_module(text)
    assert {c.name for c in theirs.computations()} == {c.name for c in ours.computations}
    for comp in theirs.computations():
        assert [i.name for i in comp.instructions()] == [i.name for i in ours.by_name[comp.name].instructions]


def test_platform_is_read_from_the_text(gpu, cpu):
    assert detect_platform(gpu[0]) == "gpu"
    assert detect_platform(cpu[0]) == "cpu"


def test_instructions_that_launch_nothing_are_not_kernels(gpu):
    m, by_name, _ = gpu
    for name in ("x", "bias", "gemm_result", "conv_result", "attn", "bitcast.1", "init", "loop_out",
                 "zero", "all-reduce-done", "async-done", "i", "body_tuple"):
        assert name not in by_name, name
    assert not any(k.opcode in NO_KERNEL for k in by_name.values())


def test_fused_instructions_belong_to_their_fusion(gpu):
    m, by_name, _ = gpu
    for name in ("add.1", "maximum.1", "reduce.1", "dot.2", "dot.3", "transpose.2", "sum", "ss"):
        assert name not in by_name, name
    assert by_name["loop_fusion"].fused_opcodes == ("broadcast", "add", "constant", "broadcast", "maximum")
    assert by_name["loop_fusion"].is_multi_op_fusion
    assert not by_name["transpose_fusion"].is_multi_op_fusion


def test_cublas_gemm(gpu):
    _, by_name, _ = gpu
    k = by_name["cublas-gemm.1"]
    assert (k.route, k.library, k.custom_call_target) == ("library", "cuBLAS", "__cublas$gemm")
    # FLOPs from the dimension numbers in backend_config: M=64, N=256, K=x's dim 1 = 128.
    assert k.flops == 2 * 64 * 256 * 128
    # Operands x, w and the result; the s8 workspace is scratch, not traffic.
    assert k.bytes == (64 * 128 + 128 * 256 + 64 * 256) * 4
    assert k.op_names == ("jit(step)/dense/dot_general",)
    assert k.source_lines == (("/m.py", 6),)


def test_cudnn_conv_and_fused_attention(gpu):
    _, by_name, _ = gpu
    conv = by_name["cudnn-conv.1"]
    assert (conv.route, conv.library) == ("library", "cuDNN")
    # Every output element is a dot over the 3x3 window and the 16 input features.
    assert conv.flops == 2 * (8 * 32 * 32 * 32) * (3 * 3 * 16)
    assert conv.bytes == (8 * 32 * 32 * 16 + 3 * 3 * 16 * 32 + 8 * 32 * 32 * 32) * 4
    fmha = by_name["fmha"]
    assert (fmha.route, fmha.library, fmha.custom_call_target) == ("library", "cuDNN", "__cudnn$fmhaSoftmax")
    b, h, s, d = 2, 4, 128, 64
    assert fmha.flops == 2 * b * h * s * s * d * 2  # Q.K^T and P.V
    assert fmha.bytes == 4 * (b * h * s * d) * 2  # q, k, v read, one output written; bf16


def test_triton_gemm_fusion(gpu):
    _, by_name, _ = gpu
    k = by_name["triton_gemm"]
    assert (k.route, k.library, k.fusion_kind) == ("triton", "Triton", "__triton_gemm")
    cfg = k.triton_config
    assert cfg["block_m"] == 64 and cfg["block_n"] == 128 and cfg["block_k"] == 32
    assert all(isinstance(cfg[f], int) for f in ("block_m", "block_n", "block_k", "split_k", "num_stages", "num_warps"))
    assert k.flops == 2 * 64 * 256 * 128
    assert k.bytes == (64 * 128 + 128 * 256 + 64 * 256) * 4


def test_triton_nested_gemm_fusion_is_one_kernel(gpu):
    _, by_name, _ = gpu
    outer = by_name["nested_gemm"]
    assert (outer.route, outer.fusion_kind) == ("triton", "__triton_nested_gemm_fusion")
    # The nested fusions launch nothing of their own; their work is the outer kernel's.
    assert "lhs_fusion" not in by_name and "rhs_fusion" not in by_name
    assert "negate.1" in outer.fused_ops and "dot.3" in outer.fused_ops
    assert "fusion" not in outer.fused_opcodes
    assert outer.flops == 2 * 64 * 256 * 128 + 64 * 128  # the dot and the negate
    assert outer.triton_config["output_tiles"] == [{"sizes": [32, 64]}]
    assert outer.triton_config["num_warps"] == 4


def test_emitter_fusions_and_flops(gpu):
    _, by_name, _ = gpu
    loop, inp = by_name["loop_fusion"], by_name["input_fusion"]
    assert (loop.route, loop.fusion_kind, loop.library) == ("emitter", "kLoop", None)
    assert (inp.route, inp.fusion_kind) == ("emitter", "kInput")
    assert loop.flops == 2 * 64 * 256  # add and maximum, one per output element each
    assert inp.flops == 64 * 256  # the reduction reads every input element once
    assert loop.bytes == (64 * 256 + 256 + 64 * 256) * 4
    assert inp.bytes == (64 * 256 + 64) * 4
    assert set(loop.op_names) == {"jit(step)/dense/add", "jit(step)/dense/max"}


def test_layout_kernels(gpu):
    _, by_name, _ = gpu
    for name in ("copy.1", "transpose.1", "transpose_fusion"):
        assert by_name[name].route == "layout", name
        assert by_name[name].flops == 0
        assert by_name[name].bytes == 2 * 64 * 256 * 4


def test_collectives(gpu):
    _, by_name, _ = gpu
    k = by_name["all-reduce-start"]
    assert k.route == "collective"
    assert "ss" not in by_name  # the reducer is part of the collective


def test_control_flow_and_context(gpu):
    _, by_name, ordered = gpu
    names = [k.name for k in ordered]
    for name in ("while.1", "conditional.1", "async-start"):
        assert by_name[name].route == "control" and by_name[name].bytes == 0
    body = by_name["body_exp"]
    assert body.context == "while.1 body" and body.computation == "while_body"
    assert body.route == "emitter" and body.flops == 64 * 256
    assert by_name["next"].context == "while.1 body"
    assert by_name["lt"].context == "while.1 condition"
    # Both branches, each with its own context naming the conditional.
    assert by_name["tanh.1"].context.startswith("conditional.1 ")
    assert by_name["copy.3"].context.startswith("conditional.1 ")
    assert by_name["tanh.1"].context != by_name["copy.3"].context
    assert by_name["copy.3"].route == "layout"
    assert by_name["sqrt.1"].context.startswith("async-start")
    # The work of control flow comes after its launcher.
    assert names.index("while.1") < names.index("body_exp")
    assert names.index("conditional.1") < names.index("tanh.1")
    assert names.index("async-start") < names.index("sqrt.1")
    # Entry kernels have no context.
    assert by_name["loop_fusion"].context == "" and by_name["loop_fusion"].computation == "main"


def test_every_route_is_in_the_legend(gpu):
    _, by_name, _ = gpu
    assert {k.route for k in by_name.values()} == set(ROUTES)
    assert set(ROUTE_LABELS) == set(ROUTES) == set(ROUTE_COLORS)


def test_kernel_instruction_map(gpu):
    m, by_name, _ = gpu
    kim = kernel_instruction_map(m)
    assert set(kim) == set(by_name)
    assert kim["loop_fusion"][0] == "loop_fusion" and "maximum.1" in kim["loop_fusion"]
    assert kim["copy.1"] == ["copy.1"]


def test_cpu_routes(cpu):
    _, by_name = cpu
    ynn = by_name["ynn_fusion"]
    assert (ynn.route, ynn.library, ynn.fusion_kind) == ("library", "YNNPACK", "__ynn_fusion")
    assert ynn.flops == 2 * 32 * 16 * 64
    dot = by_name["dot.2"]
    assert (dot.route, dot.library) == ("library", "Eigen")
    assert dot.flops == 2 * 32 * 16 * 64
    assert dot.bytes == (32 * 64 + 64 * 16 + 32 * 16) * 4
    loop = by_name["loop_fusion"]
    assert (loop.route, loop.fusion_kind, loop.library) == ("emitter", "kLoop", None)
    assert loop.flops == 32 * 16
    add = by_name["sum"]
    assert add.route == "emitter" and add.flops == 32 * 16
    # The same operand twice is read once.
    assert add.bytes == (32 * 16) * 4 * 3


def test_kernel_dict_round_trip(gpu):
    for k in gpu[2]:
        assert Kernel.from_dict(k.to_dict()) == k


# ----------------------------------------------------------------------------- gallery on CPU


def _expected_bytes(module, k):
    comp = module.by_name[k.computation]
    inst = comp.by_name[k.name]
    operands = dict.fromkeys(inst.operands)
    return sum(comp.by_name[o].shape.byte_size for o in operands) + inst.shape.byte_size


@pytest.mark.parametrize("name", GALLERY)
def test_gallery_kernels(gallery_bundle, name):
    b = gallery_bundle(name)
    post = b.module("hlo_after")
    assert detect_platform(post) == "cpu"
    assert b.kernels, "a compiled model has kernels"
    fused_names = set()
    for comp in post.computations:
        for inst in comp.instructions:
            if inst.opcode == "fusion":
                for c in inst.called_computations:
                    fused_names.update(i.name for i in post.by_name[c].instructions)
    for k in b.kernels:
        assert k.route in ROUTES
        assert k.opcode not in NO_KERNEL
        assert k.name not in fused_names, "an instruction inside a fusion is not a kernel"
        if k.route != "control":
            assert k.bytes == _expected_bytes(post, k)
        assert k.flops >= 0
        if k.opcode == "fusion" and (k.fusion_kind or "").startswith("__"):
            assert k.route in ("library", "triton")
        if k.fusion_kind in ("__ynn_fusion", "__xnn_fusion"):
            assert k.library in ("YNNPACK", "XNNPACK")
        if k.opcode in ("dot", "convolution"):
            assert (k.route, k.library) == ("library", "Eigen")
        if k.fusion_kind == "kLoop":
            assert k.route in ("emitter", "layout")
    # Every matmul of the model runs as a library call on CPU (YNNPACK or Eigen).
    for k in b.kernels:
        if "dot" in k.fused_opcodes or k.opcode == "dot":
            assert k.route == "library"
    # Kernels together do at least the model's matmul FLOPs.
    pre = b.module("hlo_before")
    dot_flops = 0
    for comp in pre.computations:
        for inst in comp.instructions:
            if inst.opcode == "dot":
                lhs = comp.by_name[inst.operands[0]]
                k_dims = [int(d) for d in inst.attributes["lhs_contracting_dims"].strip("{}").split(",") if d]
                kk = 1
                for d in k_dims:
                    kk *= lhs.shape.dimensions[d]
                dot_flops += 2 * inst.shape.num_elements * kk
    # (a sharded program's kernels are one device's: together the devices do the model's share)
    from analysis.devices.collectives import module_devices

    assert sum(k.flops for k in b.kernels) * module_devices(post) >= dot_flops


def test_cpu_loop_fusions_with_partitions_are_emitter_kernels(gallery_bundle):
    seen = 0
    for name in GALLERY:
        b = gallery_bundle(name)
        post = b.module("hlo_after")
        for k in b.kernels:
            inst = post.by_name[k.computation].by_name[k.name]
            bc = inst.backend_config if isinstance(inst.backend_config, dict) else {}
            if k.fusion_kind == "kLoop" and "outer_dimension_partitions" in bc:
                seen += 1
                assert k.route in ("emitter", "layout")
    if not seen:
        pytest.skip("this XLA prints no outer_dimension_partitions")


def test_mlp_matmuls_without_ynnpack_run_through_eigen(gallery_bundle):
    """With XLA:CPU's library rewriter off, the dots stay plain dots: Eigen library calls."""
    b = gallery_bundle("mlp", xla_disable_hlo_passes="fusion,dot-library-rewriter")
    dots = [k for k in b.kernels if k.opcode == "dot"]
    assert len(dots) == 2
    assert all((k.route, k.library) == ("library", "Eigen") for k in dots)
    assert sorted(k.flops for k in dots) == sorted([2 * 128 * 512 * 256, 2 * 128 * 128 * 512])


def test_tile_text_reads_both_triton_config_forms():
    from analysis.program.kernels import tile_text

    gemm = {"block_m": 64, "block_n": 128, "block_k": 32, "split_k": 4, "num_warps": 4, "num_stages": 3}
    assert tile_text(gemm) == "tile 64×128×32 (m×n×k) · split-K 4 · 4 warps"
    assert tile_text(gemm, full=True).endswith("· 3 stages")
    generic = {"output_tiles": [{"sizes": [1, 16, 8]}], "num_warps": 1, "num_ctas": 1}
    assert tile_text(generic) == "tile 1×16×8 · 1 warp"
    assert tile_text({"output_tiles": [{"sizes": [4, 512]}, {"sizes": [4]}]}) == "tiles 4×512, 4"
    assert tile_text(None) == "" and tile_text({}) == ""
