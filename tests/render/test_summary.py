"""The summary's one-line notes on what the program is (analysis.render.summary): a matmul XLA
ran in a wider type than the program wrote (fp8 on a target without an fp8 kernel) is said on
the CLI's summary, the report's and the page's, from the two modules alone; the expected words
come from the modules the tests write."""

from __future__ import annotations

import pytest

from analysis.bundle.core import bundle_from_hlo
from analysis.render.summary import program_notes, summary_html, summary_text, widened_note

# an fp8 dot as the program wrote it, and as a target without fp8 kernels ran it: each operand
# converted to f32 in a kernel of its own, the dot in f32 (the same op_name on all three)
BEFORE = """HloModule m
ENTRY %main (a: f8e4m3fn[4,8], b: f8e4m3fn[8,2]) -> f32[4,2] {
  %a = f8e4m3fn[4,8]{1,0} parameter(0)
  %b = f8e4m3fn[8,2]{1,0} parameter(1)
  ROOT %dot.7 = f32[4,2]{1,0} dot(%a, %b), lhs_contracting_dims={1}, rhs_contracting_dims={0}, metadata={op_name="jit(m)/dot_general"}
}
"""

AFTER = """HloModule m, is_scheduled=true
%fused_dot (p0: f32[4,8], p1: f32[8,2]) -> f32[4,2] {
  %p0 = f32[4,8]{1,0} parameter(0)
  %p1 = f32[8,2]{1,0} parameter(1)
  ROOT %dot.0 = f32[4,2]{1,0} dot(%p0, %p1), lhs_contracting_dims={1}, rhs_contracting_dims={0}, metadata={op_name="jit(m)/dot_general"}
}
%wrapped_convert (q: f8e4m3fn[4,8]) -> f32[4,8] {
  %q = f8e4m3fn[4,8]{1,0} parameter(0)
  ROOT %convert.2 = f32[4,8]{1,0} convert(%q), metadata={op_name="jit(m)/dot_general"}
}
%wrapped_convert.1 (r: f8e4m3fn[8,2]) -> f32[8,2] {
  %r = f8e4m3fn[8,2]{1,0} parameter(0)
  ROOT %convert.3 = f32[8,2]{1,0} convert(%r), metadata={op_name="jit(m)/dot_general"}
}
ENTRY %main (a: f8e4m3fn[4,8], b: f8e4m3fn[8,2]) -> f32[4,2] {
  %a = f8e4m3fn[4,8]{1,0} parameter(0)
  %b = f8e4m3fn[8,2]{1,0} parameter(1)
  %ca = f32[4,8]{1,0} fusion(%a), kind=kLoop, calls=%wrapped_convert
  %cb = f32[8,2]{1,0} fusion(%b), kind=kLoop, calls=%wrapped_convert.1
  ROOT %f = f32[4,2]{1,0} fusion(%ca, %cb), kind=kOutput, calls=%fused_dot
}
"""

# the same dot run on fp8 operands (a target with fp8 kernels): nothing to say
NATIVE = AFTER.replace("%p0 = f32[4,8]", "%p0 = f8e4m3fn[4,8]").replace("%p1 = f32[8,2]", "%p1 = f8e4m3fn[8,2]") \
    .replace("(p0: f32[4,8], p1: f32[8,2])", "(p0: f8e4m3fn[4,8], p1: f8e4m3fn[8,2])") \
    .replace("fusion(%ca, %cb)", "fusion(%a, %b)")


def test_an_fp8_dot_run_in_f32_is_said_once_everywhere():
    b = bundle_from_hlo(AFTER, "m", before_text=BEFORE)
    b.environment["platform"] = "cpu"
    note = widened_note(b)
    assert note is not None and "\n" not in note
    assert note.startswith("XLA for the CPU has no f8e4m3fn matmul here")
    assert "operands of 1 op (dot.7) to f32" in note
    assert program_notes(b) == [note]
    assert f"note                    : {note}" in summary_text(b)
    assert "has no f8e4m3fn matmul here" in summary_html(b)


@pytest.mark.parametrize("after", [NATIVE, None])
def test_nothing_is_said_where_the_dot_ran_as_written_or_there_is_no_optimized_module(after):
    b = bundle_from_hlo(after, "m", before_text=BEFORE) if after else bundle_from_hlo(BEFORE, "m")
    assert widened_note(b) is None


def test_an_fp8_program_compiled_on_the_cpu_says_it_ran_in_f32(source_bundle):
    pytest.importorskip("jax")
    b = source_bundle("import jax, jax.numpy as jnp\n\n\ndef model(a, b):\n"
                      "    return jnp.dot(a, b, preferred_element_type=jnp.float32)\n\n\n"
                      "def example_inputs():\n    a = jnp.ones((16, 32), jnp.float8_e4m3fn)\n"
                      "    return (a, jnp.ones((32, 8), jnp.float8_e5m2))\n", "fp8_dot")
    note = widened_note(b)
    assert note is not None and "f8e4m3fn, f8e5m2" in note and "to f32" in note


# ----------------------------------------------------------------------------- the traffic headline

def _fc(unfused_bytes: int, default_bytes: int) -> dict:
    return {"platform": "cpu", "disabled_passes": ["fusion"], "measured": False, "note": "",
            "unfused": {"kernels": 4, "bytes": unfused_bytes}, "default": {"kernels": 3, "bytes": default_bytes}}


def test_one_program_has_one_traffic_headline_with_its_baseline_on_the_line():
    """Every op its own kernel (BEFORE's dot alone): 32 + 16 B read, 32 B written = 80 B. The
    compile's kernels: the converts 32 -> 128 B and 16 -> 64 B, the dot 128 + 64 -> 32 B: 464 B,
    so 384 B added (+480%) against that estimate. A fusion-off compile beside it moving 1,000 B
    (536 B saved against it) changes no headline: it is a second number, named."""
    import dataclasses

    b = bundle_from_hlo(AFTER, before_text=BEFORE)
    plain = summary_text(b)
    head = "memory traffic          : 384 B added (+480%) vs every op its own kernel: 80 B -> 464 B with fusion"
    assert head in plain
    with_fc = dataclasses.replace(b, fusion_comparison=_fc(1000, 464))
    text = summary_text(with_fc)
    assert head in text
    assert "saved" not in text.split(head)[0]
    assert "536 B saved (54%) vs the fusion-off compile" in summary_html(with_fc)
    cards = {c.label: c for c in summarize_cards(with_fc)}
    assert "Memory traffic added vs every op its own kernel" in cards
    assert cards["Memory traffic added vs every op its own kernel"].value == "384 B"
    assert [c.label for c in summarize_cards(b) if c.label.startswith("Memory traffic")] == \
        ["Memory traffic added vs every op its own kernel"]


def test_every_saved_or_added_names_its_baseline():
    import dataclasses
    import re

    b = dataclasses.replace(bundle_from_hlo(AFTER, before_text=BEFORE), fusion_comparison=_fc(1000, 464))
    for text in (summary_text(b), summary_html(b)):
        for line in text.splitlines():
            for m in re.finditer(r"\b(saved|added)\b", line):
                assert "vs every op its own kernel" in line or "vs the fusion-off compile" in line, line


def summarize_cards(b):
    from analysis.render.summary import summarize

    return summarize(b).cards()
