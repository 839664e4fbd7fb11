"""The generated code read from XLA:CPU's dump files (analysis.codegen.cpu_read, analysis.codegen.disassemble,
analysis.codegen.links): file names, links from a hand-written HLO fusion and its IR, real
compiles of softmax_layernorm with fusion on and off, damaged object files."""

import pytest

from analysis.codegen.finish import code_of
from analysis.codegen import kernel_code as code
from analysis.codegen.links import RenamedLinks, canonical_ops, kernel_ops, link_asm, link_llvm
from analysis.codegen.cpu_read import code_files, code_from_files
from analysis.codegen.disassemble import disassemble
from analysis.errors import ExplorerError
from analysis.hlo import parse_module
from analysis.options import FUSION_PASSES

HLO = """\
HloModule m, is_scheduled=true

%fused (param_0: f32[512], param_1: f32[512], param_2: f32[512]) -> f32[512] {
  %param_0 = f32[512]{0} parameter(0)
  %param_1 = f32[512]{0} parameter(1)
  %sub.1 = f32[512]{0} subtract(%param_0, %param_1)
  %param_2 = f32[512]{0} parameter(2)
  ROOT %mul.2 = f32[512]{0} multiply(%sub.1, %param_2)
}

ENTRY %main (a: f32[512], b: f32[512], c: f32[512]) -> f32[512] {
  %a = f32[512]{0} parameter(0)
  %b = f32[512]{0} parameter(1)
  %c = f32[512]{0} parameter(2)
  ROOT %sub_fusion = f32[512]{0} fusion(%a, %b, %c), kind=kLoop, calls=%fused
}
"""

# the kernel XLA:CPU would write for it (before LLVM's optimization): line numbers matter below
IR = """\
define ptr @sub_fusion(ptr %0) {
  %2 = getelementptr inbounds %XLA_CPU_KernelCallFrame, ptr %0, i32 0, i32 3
  %3 = load ptr, ptr %2, align 8
  %4 = getelementptr inbounds %XLA_CPU_KernelArg, ptr %3, i32 0, i32 0
  %5 = load ptr, ptr %4, align 8, !dereferenceable !4
  %6 = getelementptr inbounds %XLA_CPU_KernelArg, ptr %3, i32 1, i32 0
  %7 = load ptr, ptr %6, align 8, !dereferenceable !4
  %8 = getelementptr inbounds %XLA_CPU_KernelArg, ptr %3, i32 2, i32 0
  %9 = load ptr, ptr %8, align 8, !dereferenceable !4
  %10 = getelementptr inbounds %XLA_CPU_KernelArg, ptr %3, i32 3, i32 0
  %11 = load ptr, ptr %10, align 8, !dereferenceable !4
  call void @sub_fusion_wrapped(ptr %5, ptr %7, ptr %9, ptr %11)
  ret ptr null
}

define internal void @sub_fusion_wrapped(ptr noalias %0, ptr noalias %1, ptr noalias %2, ptr noalias %3) {
  %i = add i64 0, 1
  %p0 = getelementptr inbounds [512 x float], ptr %0, i32 0, i64 %i
  %x = load float, ptr %p0, align 4
  %p1 = getelementptr inbounds [512 x float], ptr %1, i32 0, i64 %i
  %y = load float, ptr %p1, align 4
  %d = fsub float %x, %y
  %p2 = getelementptr inbounds [512 x float], ptr %2, i32 0, i64 %i
  %z = load float, ptr %p2, align 4
  %m = fmul float %d, %z
  %p3 = getelementptr inbounds [512 x float], ptr %3, i32 0, i64 %i
  store float %m, ptr %p3, align 4
  ret void
}
"""


def test_links_from_a_hand_written_fusion_and_its_ir():
    ops = kernel_ops(parse_module(HLO), "sub_fusion")
    assert ops.params == ["param_0", "param_1", "param_2"] and ops.outputs == ["mul.2"]
    links = link_llvm(IR, ops)
    assert links == {
        1: ["sub_fusion"],  # the kernel's function
        19: ["param_0"], 21: ["param_1"],  # loads through buffers 0 and 1
        22: ["sub.1"],  # fsub float: the subtract
        24: ["param_2"], 25: ["mul.2"],  # fmul float: the multiply
        27: ["mul.2"],  # the store: the result
    }  # `add i64` (line 17) is index arithmetic: not the float ops' kind
    f = code.llvm_facts(IR)
    assert (f["global_loads"], f["global_stores"]) == (3, 1)


def test_a_twin_kernel_links_like_its_first_up_to_names():
    # a stack's layers: the same fused computation with other names, running the first's
    # function; links are made once on the canonical form and renamed (code_links.RenamedLinks)
    ops = kernel_ops(parse_module(HLO), "sub_fusion")
    twin = kernel_ops(parse_module(HLO.replace("param_", "arg_").replace("sub.1", "sub.71")
                                   .replace("mul.2", "mul.72").replace("sub_fusion", "sub_fusion.9")), "sub_fusion.9")
    twin.function = "sub_fusion"  # it runs the first twin's compiled function
    ops.function = "sub_fusion"
    key, canon, names = canonical_ops(ops)
    twin_key, _, twin_names = canonical_ops(twin)
    assert twin_key == key and twin_names != names
    made = link_llvm(IR, canon)
    assert RenamedLinks(made, names) == link_llvm(IR, ops)
    assert dict(RenamedLinks(made, twin_names)) == {
        1: ["sub_fusion.9"], 19: ["arg_0"], 21: ["arg_1"], 22: ["sub.71"], 24: ["arg_2"], 25: ["mul.72"], 27: ["mul.72"]}
    other = kernel_ops(parse_module(HLO.replace("subtract(", "add(")), "sub_fusion")
    assert canonical_ops(other)[0] != key  # another op: another form


def test_links_in_assembly_by_mnemonic():
    ops = kernel_ops(parse_module(HLO), "sub_fusion")
    asm = "sub_fusion:\n  0:\tvsubps ymm0, ymm0, ymm1\n  4:\tvmulps ymm0, ymm0, ymm2\n  8:\tret\n"
    assert link_asm(asm, ops) == {1: ["sub_fusion"], 2: ["sub.1"], 3: ["mul.2"]}


def test_code_file_names():
    names = ["module_0003.jit_f.k_fusion_kernel_module.ir-no-opt.ll",
             "module_0003.jit_f.obj-file.k_fusion_kernel_module.o",
             "module_0003.jit_f.__compute_module_wrapped_add.1.ir-with-opt.ll",
             "module_0003.jit_f.obj-file.__compute_module_wrapped_add.1.o",
             "module_0001.jit_f.old_kernel_module.ir-no-opt.ll",  # an earlier compile of the module
             "module_0004.jit_g.other_kernel_module.ir-no-opt.ll",  # another module
             "module_0003.jit_f.cpu_after_optimizations.txt"]
    assert code_files(names, "jit_f") == {
        "k_fusion": {"llvm-ir": names[0], "asm": names[1]},
        "wrapped_add.1": {"llvm-ir-opt": names[2], "asm": names[3]}}


def test_a_damaged_object_file_is_one_line():
    for data in (b"", b"not an object", b"\x7fELF\x02\x01\x01" + b"\0" * 9 + b"\x01"):
        with pytest.raises(ExplorerError) as e:
            disassemble(data, "k.o")
        assert e.value.phase == "code" and "k.o" in e.value.one_line() and "\n" not in e.value.one_line()


def _dump_of(bundle_module_name, kernel, obj: bytes):
    files = {f"module_0001.{bundle_module_name}.{kernel}_kernel_module.ir-no-opt.ll": IR.encode(),
             f"module_0001.{bundle_module_name}.obj-file.{kernel}_kernel_module.o": obj}
    return list(files), lambda name, limit: files[name][:limit]


def test_a_damaged_object_in_a_dump_leaves_its_stage_out_and_says_so():
    from analysis.bundle.core import bundle_from_hlo

    b = bundle_from_hlo(HLO, "m")
    names, read = _dump_of("m", "sub_fusion", b"\x7fELF garbage")
    c = code_from_files(names, read, b)
    b.code = c
    k = code_of(b, "sub_fusion")  # disassembled when first asked for: the damage is found then
    assert list(k.stages) == ["llvm-ir"] and k.facts["global_loads"] == 3
    assert len(k.problems) == 1 and "sub_fusion_kernel_module.o" in k.problems[0] and "damaged" in k.problems[0]
    names, read = _dump_of("m", "sub_fusion", b"not an object at all")  # no ELF header: found as it is read
    c = code_from_files(names, read, b)
    assert "sub_fusion_kernel_module.o" in c["note"] and "1 code file(s) not read" in c["note"]


@pytest.fixture(scope="module")
def fused(gallery_bundle):
    b = gallery_bundle("softmax_layernorm")
    if b.code is None:
        pytest.skip("a recorded compile without code")
    return b


def test_a_real_compile_has_every_emitted_kernel_s_code(fused):
    post = fused.module("hlo_after")
    by_name = {i.name: i for i in post.instructions()}
    emitted = [k for k in fused.kernels if k.route == "emitter"]
    assert emitted and code.totals(fused)["kernels"] == len(emitted)
    assert code.code_stages(fused) == ["llvm-ir", "llvm-ir-opt", "asm"]
    for k in emitted:
        kc = code_of(fused, k.name)
        assert set(kc.stages) == {"llvm-ir", "llvm-ir-opt", "asm"}
        assert f"@{k.name}(" in kc.stages["llvm-ir"] and f"\n{k.name}:\n" in kc.stages["asm"]
        # the lesson: a fused kernel loads each of its inputs once and stores its result once
        inputs = len(set(by_name[k.name].operands))
        assert (kc.facts["global_loads"], kc.facts["global_stores"]) == (inputs, 1), k.name
        assert kc.facts["vector_width"] in (128, 256, 512)
        linked = {n for lines in kc.ops.values() for names in lines.values() for n in names}
        root = post.by_name[by_name[k.name].called_computations[0]].root.name
        assert k.name in linked and root in linked
    for k in fused.kernels:
        if k.route == "library":  # YNNPACK's fusions: their code is the library's
            assert code_of(fused, k.name) is None
            assert code.library_call(fused, k.name)["library"] == k.library == "YNNPACK"


def test_with_fusion_off_every_op_stores_its_own_result(fused, gallery_bundle):
    off = gallery_bundle("softmax_layernorm", xla_disable_hlo_passes=",".join(FUSION_PASSES["cpu"]))
    emitted = [k for k in off.kernels if k.route == "emitter"]
    # identical kernels share one function: those without files of their own run their twin's
    assert code.totals(off)["kernels"] == len(emitted)
    for k in emitted:
        kc = code_of(off, k.name)
        assert kc.facts["global_stores"] >= 1
        assert [k.name] in kc.ops["llvm-ir"].values()  # its own name on the function it runs
    assert code.totals(off)["global_stores"] > code.totals(fused)["global_stores"]
    # twins (one function, one object file) are disassembled once: their machine code is one text
    raw = off.code["kernels"]
    by_object: dict = {}
    for k in emitted:
        if isinstance(raw[k.name].get("elf"), bytes):
            by_object.setdefault((raw[k.name]["elf"], raw[k.name].get("elf_file")), []).append(k.name)
    shared = [names for names in by_object.values() if len(names) > 1]
    assert shared, "fusion off's identical kernels share an object file"
    for names in shared:
        texts = [code_of(off, n).stages["asm"] for n in names]
        assert all(t is texts[0] for t in texts)
        links = [code_of(off, n).ops["llvm-ir"] for n in names]
        assert all([n] in lk.values() for n, lk in zip(names, links))  # each linked to its own name


def test_the_softmax_layernorm_lesson_quotes_its_code(fused, gallery_bundle):
    import copy

    from analysis.studies.compare import fusion_side
    from sample_models.lessons import lesson

    post = fused.module("hlo_after")
    by_name = {i.name: i for i in post.instructions()}
    emitted = [k.name for k in fused.kernels if k.route == "emitter"]
    loads = sum(len(set(by_name[n].operands)) for n in emitted)  # each input once (from the HLO)
    les = lesson(fused)
    assert f"the {len(emitted)} kernels XLA emitted hold {loads} loads and {len(emitted)} stores" in les.text
    widest = max(emitted, key=lambda n: len(set(by_name[n].operands)))  # broadcast_add_fusion: 6 inputs
    w = len(set(by_name[widest].operands))
    assert f"`{widest}` reads its {w} inputs with {w} loads and writes its result with 1 store" in les.text
    once = [c for c in les.checks if c.claim.startswith("each emitted kernel's code loads")]
    assert once and once[0].holds and f"({len(emitted)} of {len(emitted)} kernels)" in once[0].claim
    off = gallery_bundle("softmax_layernorm", xla_disable_hlo_passes=",".join(FUSION_PASSES["cpu"]))
    b = copy.copy(fused)
    b.fusion_comparison = {"measured": False, "disabled_passes": ["fusion"],
                           "default": fusion_side(fused.kernels, None, code.totals(fused)),
                           "unfused": fusion_side(off.kernels, None, code.totals(off))}
    les = lesson(b)
    stores_off = code.totals(off)["global_stores"]
    assert f"With fusion off the code holds {stores_off} stores in" in les.text
    assert [c.holds for c in les.checks if c.claim.startswith("fusion off stores more")] == [True]


def test_the_mlp_lesson_says_its_matmuls_have_no_generated_code(gallery_bundle):
    from sample_models.lessons import lesson

    b = gallery_bundle("mlp")
    if b.code is None:
        pytest.skip("a recorded compile without code")
    dots = [k.name for k in b.kernels if k.route == "library"]
    les = lesson(b)
    assert "XLA generated no code for the matmuls" in les.text
    claim = [c for c in les.checks if "have no generated code" in c.claim]
    assert claim and claim[0].holds and all(code_of(b, n) is None for n in dots)


def _zip(files: dict) -> bytes:
    import io
    import zipfile

    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in files.items():
            z.writestr(name, data)
    return buf.getvalue()


def test_an_imported_dump_zip_brings_its_code(tmp_path):
    jax = pytest.importorskip("jax")
    import os

    from analysis.inputs.dump import bundles_from_dump_zip
    from sample_models import softmax_layernorm as m

    # (as docs/code.md tells a user to dump: XLA 0.11 and later write LLVM IR only when asked)
    jax.jit(m.model).lower(*m.example_inputs()).compile(
        compiler_options={"xla_dump_to": str(tmp_path), "xla_dump_emitter_re": "llvm"})
    files = {n: open(os.path.join(tmp_path, n), "rb").read() for n in os.listdir(tmp_path)}
    objects = sorted(n for n in files if n.endswith(".o"))
    assert objects  # XLA:CPU wrote its kernels' objects
    files[objects[0]] = b"\x7fELF but damaged"
    b = bundles_from_dump_zip(_zip(files), "dump.zip")[0]
    post = b.module("hlo_after")
    by_name = {i.name: i for i in post.instructions()}
    emitted = [k.name for k in b.kernels if k.route == "emitter"]
    assert code.totals(b) == {"kernels": len(emitted), "global_stores": len(emitted),
                              "global_loads": sum(len(set(by_name[n].operands)) for n in emitted)}
    damaged = [n for n in emitted if "asm" not in code_of(b, n).stages]
    assert len(damaged) == 1 and damaged[0] in objects[0]
    assert objects[0] in code_of(b, damaged[0]).problems[0]


def test_a_dump_without_llvm_ir_says_how_to_get_it(tmp_path):
    jax = pytest.importorskip("jax")
    import os

    from analysis.codegen.cpu_read import NOTE_NO_IR
    from analysis.inputs.dump import bundles_from_dump_zip
    from sample_models import softmax_layernorm as m

    jax.jit(m.model).lower(*m.example_inputs()).compile(compiler_options={"xla_dump_to": str(tmp_path)})
    files = {n: open(os.path.join(tmp_path, n), "rb").read() for n in os.listdir(tmp_path)
             if not n.endswith(".ll")}  # what jax 0.11 and later write with --xla_dump_to alone
    b = bundles_from_dump_zip(_zip(files), "dump.zip")[0]
    assert code.totals(b)["kernels"] > 0
    assert b.code["note"] == NOTE_NO_IR
    assert "--xla_dump_emitter_re=llvm" in NOTE_NO_IR
