"""The readers of a user's text take time linear in it: they import no ``re`` and compile every
pattern through ``analysis.linear_re`` (RE2), which this checks in their source; the lines that
made the backtracking patterns hang give the right answer; and where a reader reads the usual
line with str methods instead of its pattern (to stay as fast as ``re`` was), it reads it as the
pattern does, on random lines."""

from __future__ import annotations

import ast
import importlib
import inspect
import random

import pytest

from analysis import linear_re

# The modules that read what a user uploads (dumps, logs, traces, bundles' texts and names)
READERS = (
    "analysis.codegen.llvm_ir", "analysis.codegen.ptx", "analysis.codegen.gpu_read", "analysis.codegen.links", "analysis.codegen.cpu_read",
    "analysis.codegen.disassemble", "analysis.fusion.log", "analysis.fusion.gpu_dump", "analysis.fusion.decisions",
    "analysis.program.memory", "analysis.studies.passes", "analysis.inputs.dump", "analysis.timing.profiles", "analysis.codegen.kernel_code",
)
BACKTRACKING = {"re", "regex", "sre_compile", "sre_parse", "fnmatch", "glob"}  # fnmatch and glob compile with re


def _tree(name: str) -> ast.Module:
    return ast.parse(inspect.getsource(importlib.import_module(name)))


@pytest.mark.parametrize("name", READERS)
def test_a_reader_imports_no_backtracking_matcher(name):
    imported = set()
    for node in ast.walk(_tree(name)):
        if isinstance(node, ast.Import):
            imported |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            imported.add(node.module.split(".")[0])
    assert not imported & (BACKTRACKING | {"re2"}), f"{name} imports {sorted(imported & (BACKTRACKING | {'re2'}))}"


@pytest.mark.parametrize("name", READERS)
def test_every_pattern_a_reader_compiles_is_linear_re_s(name):
    bad = []
    for node in ast.walk(_tree(name)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "compile":
            owner = node.func.value
            if not (isinstance(owner, ast.Name) and owner.id == "linear_re"):
                bad.append(f"line {node.lineno}: {ast.unparse(node.func)}")
        if isinstance(node, ast.Name) and node.id in BACKTRACKING | {"re2"}:
            bad.append(f"line {node.lineno}: {node.id}")
    assert not bad, f"{name}: " + "; ".join(bad)


# -- analysis.linear_re ------------------------------------------------------------------------

@pytest.mark.parametrize("pattern", [r"a(?=b)", r"(?!x)a", r"(?<=a)b", r"(a)\1", r"a*+", r"(?>a)", r"a\Z"])
def test_a_pattern_re2_cannot_take_is_refused_when_compiled(pattern):
    with pytest.raises(ValueError) as e:
        linear_re.compile(pattern)
    assert repr(pattern) in str(e.value)


def test_a_pattern_has_re_s_methods():
    p = linear_re.compile(r"(?P<name>\w+)=(\d+)")
    m = p.search("  a=1, b=22")
    assert (m.group("name"), m.groups(), m.groupdict(), m.span(2)) == ("a", ("a", "1"), {"name": "a"}, (4, 5))
    assert p.match("a=1") and not p.match(" a=1") and p.fullmatch("a=1") and not p.fullmatch("a=1 ")
    assert p.findall("a=1 b=2") == [("a", "1"), ("b", "2")]
    assert [m.group(0) for m in p.finditer("a=1 b=2")] == ["a=1", "b=2"]
    assert p.sub("x", "a=1 b=2") == "x x" and linear_re.compile(r"[;,]").split("a;b,c") == ["a", "b", "c"]
    assert (p.groups, p.pattern) == (2, r"(?P<name>\w+)=(\d+)")


def test_a_text_with_a_lone_surrogate_is_matched_not_refused():
    # json decodes "\ud800" from a trace or a bundle: such a str cannot be encoded to UTF-8
    p = linear_re.compile(r"^(.*)\((\d+)\)$")
    m = p.match("jit_\ud800f(42)")
    assert m.group(2) == "42" and m.span(1) == (0, 6)
    assert linear_re.compile("a").findall("\udc80a") == ["a"]


def test_dollar_ends_the_text_only():
    assert linear_re.compile(r"a$").search("a\n") is None and linear_re.compile(r"a\z").search("a")


# -- the lines that hung the backtracking readers ----------------------------------------------

KERNEL = """\
define ptr @k(ptr %0) {
  %2 = getelementptr inbounds %XLA_CPU_KernelCallFrame, ptr %0, i32 0, i32 3
  %3 = load ptr, ptr %2, align 8
  %4 = getelementptr inbounds %XLA_CPU_KernelArg, ptr %3, i32 0, i32 0
  %5 = load ptr, ptr %4, align 8
  %6 = load float, ptr %5, align 4
HOSTILE
  ret ptr null
}
"""
WORDS = " ".join(["noalias", "nonnull", "noundef"] * 10)  # 30 attribute words: minutes under re
HOSTILE_IR = {
    "a load of ptr and 30 attribute words, no value": f"  %x = load float, ptr {WORDS} ;",
    "a 200,000-character line of ptr": "  %y = load float, " + "ptr " * 50_000,
    "a long getelementptr line": "  %z = getelementptr " + "getelementptr %XLA_CPU_KernelArg, ptr %3, i32 " * 8_000,
    "a long getelementptr line of i8 offsets": "  %w = getelementptr " + "getelementptr i8, " * 24_000 + "1",
    "a long call line": "  call " + "call " * 80_000,
    "a store through ptr and attribute words": f"  store float 0.0, ptr {WORDS} ;",
}


@pytest.mark.parametrize("case", HOSTILE_IR)
def test_hostile_llvm_ir_lines_add_no_access(case):
    from analysis.codegen.links import llvm_lines
    from analysis.codegen.llvm_ir import Access, accesses

    text = KERNEL.replace("HOSTILE", HOSTILE_IR[case])
    found, instructions = accesses(text)
    assert found == [Access(line=6, kind="load", buffers=frozenset({0}), bits=None)]  # the kernel's own load
    assert instructions == 7
    assert (1, "define", "k") in llvm_lines(text)


def test_a_define_line_of_parentheses_defines_nothing_that_reads():
    from analysis.codegen.llvm_ir import accesses

    assert accesses("define void @f(" + ")" * 200_000 + "\n}\n") == ([], 0)


def test_hostile_ptx_lines_are_read():
    from analysis.codegen.ptx import ptx_facts, ptxas_facts, sass_facts, split_ptx

    labels = ptx_facts(".visible .entry k() {\n" + "$L:" * 100_000 + " ld.global.f32 %f1, [%rd1];\n}\n")
    assert (labels["instructions"], labels["global_loads"]) == (1, 1)
    report = ptxas_facts("ptxas info    : Used 12 registers, " + "1" * 200_000)
    assert (report["registers"], report["spills"], report["shared_bytes"]) == (12, None, 0)
    sass = sass_facts("        /*0000*/  " + "LDG." * 50_000 + "\n        /*0010*/  LDG.E.128 R4, [R2.64] ;\n")
    assert (sass["instructions"], sass["global_loads"], sass["vector_width"]) == (2, 2, 128)
    shared = ptx_facts(".visible .entry k() {\n" + ".shared .align 4 " * 12_000 + ";\n}\n")
    assert shared["shared_bytes"] is None
    header, funcs = split_ptx(".visible " * 22_000 + "\n")
    assert funcs == {}


LOG = "I0101 00:00:00.000000 1 {file}:1] {message}"


def test_hostile_fusion_log_lines_are_read():
    from analysis.fusion.log import parse_log

    lines = [
        LOG.format(file="hlo_pass_pipeline.cc", message="Running HLO pass pipeline on module m: fusion"),
        LOG.format(file="priority_fusion.cc", message="Fusing " + "a into " * 28_000),  # no consumer: no decision
        "I0101 " + "0" * 200_000,  # not a log line
        LOG.format(file="priority_fusion.cc", message="Fusing %a = f32[] a(), op_name=\"" + "\\x" * 100_000
                   + " into %b = f32[] b(" + "(" * 100_000 + ")"),
        LOG.format(file="priority_fusion.cc", message="Cannot fuse " + "x" * 200_000 + " with y, because: no"),
    ]
    records, facts = parse_log("\n".join(lines) + "\n")
    assert facts["log_lines"] == 4
    assert [(r.decision, r.producer, r.consumer, r.producer_opcode, r.consumer_opcode, r.producer_op_name)
            for r in records] == [("fused", "a", "b", "a", "b", ""), ("not fused", "x" * 200_000, "y", "", "", "")]


def test_hostile_dump_texts_and_names_are_read():
    from analysis.inputs.dump import AFTER_FILE, PASS_FILE
    from analysis.program.memory import parse_live_range

    ranges = parse_live_range("HloLiveRange (max 3):\n  BufferLiveRange:\n    " + "{" * 200_000 + "\n    x{}:0-3\n")
    assert ranges.ranges == {"x{}": (0, 3)} and ranges.end == 3
    assert PASS_FILE.match("a.0000.p.after_" + ".before_" * 8_000) is None
    assert AFTER_FILE.match("a." + "._" * 30_000) is None


# -- the str-method reads agree with their patterns --------------------------------------------

def _lines(seed: int, pieces: list[str], n: int = 3000, longest: int = 9) -> list[str]:
    rnd = random.Random(seed)
    return ["".join(rnd.choice(pieces) for _ in range(rnd.randint(0, longest))) for _ in range(n)]


def _agree(read, pattern, lines, groups=lambda m: m.groups(), search=False):
    for line in lines:
        m = pattern.search(line) if search else pattern.match(line)
        assert read(line) == (groups(m) if m else None), repr(line)


def test_the_llvm_ir_reads_agree_with_their_patterns():
    from analysis.codegen import llvm_ir

    pieces = ["%", "x", "1", ".", "$", "-", "_", " ", "\t", "=", " = ", ":", "ptr", "ptr %", " ptr ", "noalias ",
              "align 4 ", ",", "@", "é", "\u3000", "\v"]
    lines = _lines(1, pieces)
    _agree(llvm_ir.assignment, linear_re.compile(r"^\s*%([\w.$-]+)\s*=\s*(.*)$"), lines)
    _agree(lambda line: llvm_ir.is_label(line) or None, linear_re.compile(r"^[\w.$-]+:"), lines, groups=lambda m: True)
    value = linear_re.compile(r"%([\w.$-]+)")
    assert all(llvm_ir.values(line) == value.findall(line) for line in lines)
    for line in lines:
        p = llvm_ir.PTR.search(line)
        assert llvm_ir.pointer_of(line) == (p.group(1) if p else None), repr(line)


def test_the_link_reads_agree_with_their_patterns():
    from analysis.codegen import links
    asm = linear_re.compile(r"^\s*[0-9a-f]+:\s+([a-z][a-z0-9]*)\b")
    _agree(links.mnemonic_of, asm, _lines(2, ["  ", "1f", "a0", ":", "\t", " ", "vaddps", "mov", "x", "A", "_",
                                                 "9", ",", "é"]), groups=lambda m: m.group(1))
    types = _lines(3, ["<8", "<", " x ", "x", "float>", "float", "i32", "i", "3", "contract", " ", "%a,", ">", "é",
                       "\t", "half", ".", "<4 x i8>"])
    _agree(links.element_type, links.TYPE, types, groups=lambda m: m.group(1) or m.group(2), search=True)
    assert all(links.element_type(t) is not None or not links.TYPE.search(t) for t in types)


def test_the_ptx_reads_agree_with_their_patterns():
    from analysis.codegen import ptx as code_ptx

    ops = _lines(4, ["@", "!", "%", "p1", " ", "\t", "ld", ".global", ".v4", ".f32", "::cta", ":", "_", "X", "9",
                     "{", ";", "é", "\v"])
    _agree(code_ptx.statement_op, code_ptx.STATEMENT_OP, ops, groups=lambda m: m.group(1))
    sass = _lines(5, ["        ", "/*", "0040", "*/", "ab", " ", "\t", "@", "!", "U", "P0", "LDG", ".E", ".128",
                      "R4,", ";", "x", "\v", "."])
    _agree(lambda line: code_ptx.sass_instruction(line, False), code_ptx.SASS_INST, sass)
    _agree(lambda line: code_ptx.sass_instruction(line, True), code_ptx.SASS_INST,
           [line for line in sass if code_ptx.plain_whitespace(line)])  # "plain": said of the whole text
    label = linear_re.compile(r"^[$\w]+:\s*")
    for s in _lines(6, ["$L", "_1", ":", " ", "\t", "add", "%r", "@", "é"]):
        rest = s
        while (m := label.match(rest)) is not None:
            rest = rest[m.end():]
        assert code_ptx.after_labels(s) == rest, repr(s)


def test_the_fusion_log_reads_agree_with_their_patterns():
    from analysis.fusion import gpu_dump as fusion_dump, log as fusion_log

    prefixes = _lines(7, ["I", "W", "0101", "0", " ", "12:00:00.1", ":", ".", "\t", "6209", "a", "_", ".cc", ".h",
                          "]", "] ", "x", "\v"], longest=12)
    _agree(fusion_log.log_line, fusion_log.LOG_PREFIX, prefixes + ["I0101 12:00:00.643435    6209 a_b.cc:303] m"],
           groups=lambda m: (m.group("file"), m.end()))
    instrs = _lines(8, ["%", "a.1", " = ", "=", " ", "f32[]", "fusion(", "(", ")", "}", "]", "tuple", ", ",
                        'op_name="', '"', "\\", "stack_frame_id=", "7", "-", "\t", "\n", "A"], longest=12)
    _agree(fusion_log.instr_parts, fusion_log.INSTR, instrs)
    for rest in instrs:
        op = fusion_log.OPCODE.search(rest)
        assert fusion_log.opcode_of(rest) == (op.group(1) if op else ""), repr(rest)
        i = rest.find('op_name="')
        on = fusion_log.OPNAME.search(rest[i:]) if i >= 0 else None
        assert fusion_log.op_name_of(rest) == (on.group(1) if on else ""), repr(rest)
        i = rest.find("stack_frame_id=")
        fr = fusion_log.FRAME.search(rest[i:]) if i >= 0 else None
        assert fusion_log.frame_of(rest) == (int(fr.group(1)) if fr else None), repr(rest)
    intos = _lines(9, [" into ", "%", "a", ".", "-", " = ", " ", "=", "into", "\t", "é"])
    _agree(fusion_log.into_of, fusion_log.INTO, intos, groups=lambda m: (m.start(), m.start(1)), search=True)
    _agree(fusion_log.pass_run, fusion_log.PASS, _lines(10, ["  ", "HLO pass ", "fusion", " ", "\t", "x", "\v"]),
           groups=lambda m: m.group(1))
    fields = _lines(11, ['"', "\\", " ", ": ", "a", "_", "x y", "\t", "\v", "é", ":", "  name", "1"])
    _agree(fusion_dump.field_of, fusion_dump.FIELD, fields,
           groups=lambda m: (m.group(1), m.group(2) if m.group(2) is not None else m.group(3)))


def test_the_buffer_assignment_reads_agree_with_their_patterns():
    from analysis.program import memory

    values = _lines(12, ["value: <", "12", " ", "fusion.3", "{", "}", "{1}", " (phi)", " @", "0", "> (size=",
                         "1024", ",offset=", "): ", "f32[4]{0}", ">", "\t", "\n"], longest=12)
    values += ["value: <12 fusion.3{1} (phi) @0> (size=1024,offset=0): f32[4]{0}"]
    _agree(memory.value_fields, memory.VALUE, values)
    allocations = _lines(13, ["allocation ", "3", ": size ", "1024", ", parameter ", "shape ", "is ", "|", "f32[4]",
                              "color ", " ", ":", "\n"], longest=12)
    _agree(memory.allocation_of, memory.ALLOC, allocations)
    for attrs in allocations:
        for words, pattern in (("parameter ", memory.PARAM), ("color ", memory.COLOR)):
            m = pattern.search(attrs)
            assert memory.number_after(attrs, words, pattern) == (int(m.group(1)) if m else None), repr(attrs)
        m = memory.SHAPE.search(attrs)
        assert memory.shape_of(attrs) == (m.group(1) if m else None), repr(attrs)
    ranges = _lines(14, ["x.1", "{", "}", "{0}", ":", "5", "-", "6", " ", "\t", "a{b}"])
    _agree(memory.live_range_of, memory.RANGE, ranges)
    _agree(memory.sequence_step, memory.SEQ, ranges)


def test_a_module_run_s_name_is_read_as_its_pattern_reads_it():
    from analysis.timing import profiles

    for name in _lines(15, ["(", ")", "1", "42", "jit_f", " ", "\n", "x(", "é"]):
        m = profiles.MODULE_RUN.match(name.strip())
        assert profiles.module_run_name(name) == ((m.group(1), int(m.group(2))) if m else (name.strip(), None))


def test_a_code_file_s_name_is_read_as_its_pattern_reads_it():
    from analysis.codegen import cpu_read as code_read

    names = _lines(16, ["module_", "0034", ".", "jit_f", ".obj-file", "__compute_module_", "_kernel_module",
                        ".ir-no-opt.ll", ".ir-with-opt.ll", ".o", "o", "x", "\n"])
    _agree(code_read.code_file, code_read.CODE_FILE, names)
    _agree(code_read.kernel_part, code_read.KERNEL_PART, names, groups=lambda m: m.group(1) or m.group(2))


def test_the_disassembly_reads_agree_with_their_patterns():
    from analysis.codegen import kernel_code as code

    lines = _lines(17, ["  ", "1f", ":", "\t", " ", "vmovups", "ab", "c5 ", "fc ", "x", ".", "A", "_", "ymm0", ",",
                        "[rsp + 8]", "[", "]", "rip", "9", "é", "\n", "mov"], longest=10)
    _agree(code.asm_line, code.ASM_LINE, lines)
    regs = _lines(18, ["xmm", "ymm1", "zmm", "mm", "x", "1", "0", "_", " ", ",", "a", "é"])
    assert all(code.simd_registers(r) == code.SIMD_REG.findall(r) for r in regs)
    operands = _lines(19, ["[", "]", "rsp", "rbp", "esp", "sp", "bp", "rip", "r", " + ", "8", "_", "x", "é"])
    _agree(code.memory_operand, code.MEM, operands, groups=lambda m: m.group(1), search=True)
    assert all(code.on_stack(o) == bool(code.STACK.search(o)) for o in operands)


def test_a_hostile_disassembly_line_is_read():
    from analysis.codegen.kernel_code import asm_facts

    facts = asm_facts("  0:\tmov " + "[" * 100_000 + "\n  4:\tvmovups ymm0, ymmword ptr [rdi]\n")
    assert (facts["instructions"], facts["global_loads"], facts["vector_width"]) == (2, 1, 256)


def test_an_instructions_operands_are_read_with_or_without_printed_shapes():
    from analysis.fusion.log import operands_of, parse_instr

    # names only (the quick split at commas) and printed shapes (the walk that counts brackets)
    assert parse_instr("%add.3 = f32[8]{0} add(%a.1, %b.2), metadata={op_name=\"x\"}").operands == ("a.1", "b.2")
    assert parse_instr("%add.3 = f32[8]{0} add(f32[8]{0} %a.1, f32[8]{0} %b.2)").operands == ("a.1", "b.2")
    assert parse_instr("%t = (f32[], s32[]) tuple(%x, %y.5)").operands == ("x", "y.5")
    assert parse_instr("%c = f32[] constant(1)").operands == ()
    assert parse_instr("%r = f32[] rng()").operands == ()
    rest = "f32[8]{0} add(%a, %b"  # the list never closes: nothing read
    assert operands_of(rest, "add", rest.find("add(")) == ()
    rest = "f32[8]{0} add(%a, %b]"  # a stray closing bracket ends the list with what came before it
    assert operands_of(rest, "add", rest.find("add(")) == ("a",)
