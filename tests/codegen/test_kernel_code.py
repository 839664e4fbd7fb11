"""The generated code's core (analysis.codegen.kernel_code): facts read from hand-written LLVM IR and x86
assembly (expected values counted by hand in the snippets), the accessors over a hand-written
``code`` field, the bounds, and the field in a bundle's JSON (good and bad)."""

import json

import pytest

from analysis.codegen.finish import code_of
from analysis.codegen import kernel_code as code
from analysis.bundle.core import SCHEMA_VERSION, Bundle
from analysis.errors import ExplorerError

# A kernel as XLA:CPU writes it before LLVM's optimization: the entry reads its four buffers'
# addresses from the call frame (loads of pointers: not counted), the wrapped function reads
# three buffers (%0, %1, %2: 3 loads) and writes one (%3: 1 store). A load of the thread's
# dimension from the call frame is not a buffer load either.
IR_NO_OPT = """\
%XLA_CPU_KernelCallFrame = type { ptr, ptr, i64, ptr }
%XLA_CPU_KernelArg = type { ptr, i64 }

define ptr @sub_fusion(ptr %0) #0 {
  %2 = getelementptr inbounds %XLA_CPU_KernelCallFrame, ptr %0, i32 0, i32 3
  %3 = load ptr, ptr %2, align 8, !invariant.load !3
  %4 = getelementptr inbounds %XLA_CPU_KernelArg, ptr %3, i32 0, i32 0
  %5 = load ptr, ptr %4, align 8, !invariant.load !3, !dereferenceable !4
  %6 = getelementptr inbounds %XLA_CPU_KernelCallFrame, ptr %0, i32 0, i32 1
  %7 = load ptr, ptr %6, align 8
  %8 = load i64, ptr %7, align 4
  call void @sub_fusion_wrapped(ptr %5, ptr %5, ptr %5, ptr %5, i64 %8)
  ret ptr null
}

define internal void @sub_fusion_wrapped(ptr noalias align 64 dereferenceable(2048) %0, ptr noalias align 64 dereferenceable(2048) %1, ptr noalias align 64 dereferenceable(2048) %2, ptr noalias align 64 dereferenceable(2048) %3, i64 %4) #1 {
  br label %6

6:                                                ; preds = %9, %5
  %7 = phi i64 [ %16, %9 ], [ 0, %5 ]
  %8 = icmp slt i64 %7, 512
  br i1 %8, label %9, label %17

9:
  %10 = getelementptr inbounds [512 x float], ptr %0, i32 0, i64 %7
  %11 = load float, ptr %10, align 4
  %12 = getelementptr inbounds [512 x float], ptr %1, i32 0, i64 %7
  %13 = load float, ptr %12, align 4
  %p = getelementptr inbounds [512 x float], ptr %2, i32 0, i64 %7
  %x = load float, ptr %p, align 4
  %14 = fsub float %11, %13
  %y = fmul float %14, %x
  %15 = getelementptr inbounds [512 x float], ptr %3, i32 0, i64 %7
  store float %y, ptr %15, align 4
  %16 = add i64 %7, 1
  br label %6

17:
  ret void
}
"""
# instructions, counted by hand: the entry's gep, load, gep, load, gep, load, load, call, ret
# (9); the wrapped function's br, phi, icmp, br, gep, load, gep, load, gep, load, fsub, fmul,
# gep, store, add, br, ret (17)
IR_NO_OPT_INSTRUCTIONS = 9 + 17

# After optimization: the buffers' addresses are loaded in the entry (with !dereferenceable),
# a vector load of 8 floats (256 bits) and a scalar load from them, a vector store of 4 doubles
# (256 bits) through a phi of two pointers into buffer %6.
IR_OPT = """\
define noalias noundef ptr @sub_fusion(ptr nofree readonly captures(none) %0) local_unnamed_addr #0 {
  %2 = getelementptr inbounds nuw i8, ptr %0, i64 24
  %3 = load ptr, ptr %2, align 8, !invariant.load !3
  %4 = load ptr, ptr %3, align 8, !invariant.load !3, !dereferenceable !4
  %5 = getelementptr inbounds nuw i8, ptr %3, i64 16
  %6 = load ptr, ptr %5, align 8, !invariant.load !3, !dereferenceable !4
  br label %loop

loop:
  %q = phi ptr [ %6, %1 ], [ %next, %loop ]
  %wide.load = load <8 x float>, ptr %4, align 4, !invariant.load !3
  %s = load float, ptr %4, align 4
  store <4 x double> zeroinitializer, ptr %q, align 4
  %next = getelementptr inbounds nuw i8, ptr %q, i64 32
  br label %loop
}
"""

# Intel syntax as a disassembler prints it: 7 instructions; the widest register ymm (256);
# a load through rdi and one through rsi (2), a store through rdx (1); the stack and the
# instruction pointer are not buffers; lea reads no memory.
ASM = """\
sub_fusion:
  0:	55                   	push rbp
  1:	c5 fc 10 07          	vmovups ymm0, ymmword ptr [rdi]
  5:	c5 fc 5c 06          	vsubps ymm0, ymm0, ymmword ptr [rsi + 32]
  9:	c5 fc 11 02          	vmovups ymmword ptr [rdx], ymm0
  d:	48 8b 45 f8          	mov rax, qword ptr [rbp - 8]
  11:	48 8d 05 00 00 00 00 	lea rax, [rip + 0]
  18:	c3                   	ret
"""


def test_llvm_facts_count_the_buffer_loads_and_stores_written():
    f = code.llvm_facts(IR_NO_OPT)
    assert (f["global_loads"], f["global_stores"]) == (3, 1)
    assert f["vector_width"] is None  # scalar code
    assert f["instructions"] == IR_NO_OPT_INSTRUCTIONS


def test_llvm_facts_follow_pointers_loaded_from_the_call_frame_and_vectors():
    f = code.llvm_facts(IR_OPT)
    assert (f["global_loads"], f["global_stores"]) == (2, 1)
    assert f["vector_width"] == 256
    assert f["instructions"] == 12


def test_asm_facts():
    f = code.asm_facts(ASM)
    assert f["instructions"] == 7
    assert f["vector_width"] == 256
    assert (f["global_loads"], f["global_stores"]) == (2, 1)
    assert code.asm_facts("  vaddps zmm1, zmm2, zmm3\n  addss xmm0, xmm1\n")["vector_width"] == 512


def test_facts_of_nothing():
    assert code.llvm_facts("")["global_loads"] == 0
    assert code.asm_facts("garbage ::: %%%\n")["vector_width"] is None


def hand_code():
    return code.make_code(
        {"sub_fusion": {"stages": {"llvm-ir": IR_NO_OPT, "llvm-ir-opt": IR_OPT, "asm": ASM},
                        "ops": {"llvm-ir": {27: ["subtract.1"], 30: ["multiply.2"]}}}},
        library={"dot.3": {"target": "__onednn$matmul", "library": "oneDNN", "config": "{}"}})


def bundle_with(c):
    b = Bundle(stages={}, created="2026-01-01T00:00:00+00:00")
    b.code = c
    return b


def test_accessors_on_a_hand_written_code_field():
    b = bundle_with(hand_code())
    assert code.code_stages(b) == ["llvm-ir", "llvm-ir-opt", "asm"]
    k = code_of(b, "sub_fusion")
    assert k.stages["llvm-ir"] == IR_NO_OPT and k.stages["asm"] == ASM
    # loads and stores from the IR before optimization, width and count from the machine code
    assert k.facts == {"global_loads": 3, "global_stores": 1, "vector_width": 256, "instructions": 7,
                       "registers": None, "spills": None, "shared_bytes": None, "stage": "llvm-ir"}
    assert k.ops["llvm-ir"] == {27: ["subtract.1"], 30: ["multiply.2"]}
    assert k.lines_of("llvm-ir", "multiply.2") == [30]
    assert code_of(b, "dot.3") is None
    assert code.library_call(b, "dot.3") == {"target": "__onednn$matmul", "library": "oneDNN", "config": "{}"}
    assert code.library_call(b, "sub_fusion") is None
    assert code.totals(b) == {"kernels": 1, "global_loads": 3, "global_stores": 1}
    none = bundle_with(None)
    assert code_of(none, "x") is None and code.code_stages(none) == []
    assert code.totals(none) == {"kernels": 0, "global_loads": 0, "global_stores": 0}


def test_stage_labels_in_pipeline_order():
    order = list(code.STAGE_LABELS).index
    assert order("llvm-ir") < order("llvm-ir-opt") < order("asm")
    # a Triton fusion's IR is lowered to the LLVM IR that becomes PTX, then SASS
    assert order("triton-ttir") < order("triton-ttgir") < order("llvm-ir") < order("ptx") < order("sass")
    assert code.stage_label("asm") == "x86-64 assembly"
    assert code.stage_label("triton-foo") == "Triton IR (foo)"


def test_a_long_text_is_cut_with_a_note():
    text = "".join(f"  %{i} = add i64 %a, 1\n" for i in range(code.MAX_CODE_LINES + 10))
    c = code.make_code({"k": {"stages": {"llvm-ir": text}}})
    k = c["kernels"]["k"]
    lines = k["stages"]["llvm-ir"].splitlines()
    assert len(lines) == code.MAX_CODE_LINES + 1
    assert lines[-1] == f"… cut at {code.MAX_CODE_LINES:,} of {code.MAX_CODE_LINES + 10:,} lines"
    assert k["cut"] == {"llvm-ir": code.MAX_CODE_LINES + 10}
    assert code.bound_text("x" * (code.MAX_LINE_CHARS + 5))[0].startswith("x" * code.MAX_LINE_CHARS + " …")


def test_code_round_trips_through_json_deflated():
    b = bundle_with(hand_code())
    d = json.loads(b.to_json())
    assert d["schema_version"] == SCHEMA_VERSION == 6
    stored = d["code"]["kernels"]["sub_fusion"]["stages"]["llvm-ir"]
    assert set(stored) == {"z"} and "define" not in json.dumps(stored)  # deflated, not plain
    back = Bundle.from_json(json.dumps(d))
    assert back.code == b.code
    assert code_of(back, "sub_fusion").ops["llvm-ir"][27] == ["subtract.1"]


def test_older_bundles_load_without_code():
    b = Bundle.from_json(json.dumps({"schema_version": 5, "stages": {}}))
    assert b.code is None and code_of(b, "x") is None


def test_facts_in_a_file_are_checked():
    d = json.loads(bundle_with(hand_code()).to_json())
    d["code"]["kernels"]["sub_fusion"]["facts"]["global_stores"] = "1"
    with pytest.raises(ExplorerError) as e:
        Bundle.from_json(json.dumps(d))
    assert "facts.global_stores must be a whole number" in e.value.message


@pytest.mark.parametrize("bad, says", [
    ([1, 2], "'code' must be an object or null"),
    ({"kernels": []}, "needs objects 'kernels' and 'library'"),
    ({"kernels": {"k": {"stages": {"asm": {"z": "not base64!"}}}}}, "not deflated text"),
    ({"kernels": {"k": {"stages": {"asm": 5}}}}, "must be a text"),
    ({"kernels": {"k": {"stages": {"asm": "nop"}, "ops": {"asm": {"one": ["x"]}}}}}, "line numbers"),
    ({"kernels": {"k": {"stages": {"ptx": "x"}, "facts": {"global_loads": -1}}}}, "whole number"),
    ({"kernels": {}, "library": {"k": {"target": 5}}}, "needs text target"),
    ({"kernels": {}, "note": ["x"]}, "note must be text"),
])
def test_malformed_code_is_one_load_error(bad, says):
    with pytest.raises(ExplorerError) as e:
        Bundle.from_json(json.dumps({"schema_version": 6, "code": bad}))
    assert e.value.phase == "load" and says in e.value.message and "\n" not in e.value.one_line()


def test_a_deflate_bomb_is_refused():
    import base64
    import zlib
    bomb = base64.b64encode(zlib.compress(b"a" * (code.MAX_TEXT_BYTES + 10), 9)).decode()
    with pytest.raises(ExplorerError) as e:
        Bundle.from_json(json.dumps({"schema_version": 6, "code": {"kernels": {"k": {"stages": {"asm": {"z": bomb}}}}}}))
    assert "inflates past" in e.value.message


def test_the_summary_shows_the_code_totals_beside_fusion_off():
    from analysis.studies.compare import fusion_side
    from analysis.render.summary import summarize, summary_text

    b = bundle_with(hand_code())  # one kernel: 3 loads, 1 store (counted by hand above)
    b.fusion_comparison = {"measured": False, "disabled_passes": ["fusion"],
                           "default": fusion_side([], None, {"kernels": 1, "global_loads": 3, "global_stores": 1}),
                           "unfused": fusion_side([], None, {"kernels": 2, "global_loads": 4, "global_stores": 2})}
    text = summary_text(b)
    assert ("generated code          : 3 loads and 1 stores through the buffers of 1 kernel with generated code; "
            "fusion off: 4 loads and 2 stores in 2 kernels") in text
    assert "stores in the generated code        : 2 -> 1" in text
    card = [c for c in summarize(b).cards() if c.label == "Generated code"][0]
    assert card.value == "3 loads · 1 stores"
    assert "stores in the generated code 2 → 1" in [c for c in summarize(b).cards() if c.label == "Fusion off → on"][0].note
    assert not [c for c in summarize(bundle_with(None)).cards() if c.label == "Generated code"]


def test_a_fusion_side_s_code_is_checked_on_load():
    from analysis.bundle.checks import check_fusion_comparison

    side = {"kernels": 2, "bytes": 10, "code": {"kernels": 3, "global_loads": 1, "global_stores": 1}}
    with pytest.raises(ExplorerError) as e:
        check_fusion_comparison({"fusion_comparison": {"default": side, "unfused": dict(side, code=None)}})
    assert "fusion_comparison.default.code" in e.value.message  # 3 kernels with code in a side of 2


def test_identical_kernels_store_their_shared_code_once():
    c = code.make_code({"a": {"stages": {"llvm-ir": IR_NO_OPT, "asm": ASM}},
                        "b": {"stages": {"llvm-ir": IR_NO_OPT, "asm": ASM}}})
    d = json.loads(bundle_with(c).to_json())
    assert d["code"]["kernels"]["b"]["stages"] == {"llvm-ir": {"ref": ["a", "llvm-ir"]}, "asm": {"ref": ["a", "asm"]}}
    back = Bundle.from_json(json.dumps(d))
    assert code_of(back, "b").stages["asm"] == ASM
    assert code_of(back, "b").facts == code_of(back, "a").facts
    d["code"]["kernels"]["b"]["stages"]["asm"] = {"ref": ["zzz", "asm"]}
    with pytest.raises(ExplorerError) as e:
        Bundle.from_json(json.dumps(d))
    assert "refers to no earlier kernel's stage" in e.value.message


def test_a_gpu_kernel_s_facts_come_from_its_reader_and_its_text_is_bounded():
    ptx = "ld.global.v4.f32 {%f1, %f2, %f3, %f4}, [%rd1];\n" * (code.MAX_CODE_LINES + 3)
    given = {"global_loads": 1, "global_stores": 0, "vector_width": 128, "instructions": code.MAX_CODE_LINES + 3,
             "registers": 12, "spills": 0, "shared_bytes": 0, "stage": "ptx"}
    c = code.make_code({"fusion_1": {"stages": {"ptx": ptx}, "facts": given}}, None, "SASS not made: no nvdisasm")
    back = Bundle.from_json(bundle_with(c).to_json())
    k = code_of(back, "fusion_1")
    assert k.facts == given and k.cut == {"ptx": code.MAX_CODE_LINES + 3}
    assert code.code_stages(back) == ["ptx"] and code.note(back) == "SASS not made: no nvdisasm"


def test_loads_and_stores_without_finishing_a_kernel():
    b = bundle_with(hand_code())
    assert code.loads_stores(b, "sub_fusion") == (3, 1)
    assert code.loads_stores(b, "dot.3") is None and code.loads_stores(bundle_with(None), "x") is None
