"""The measured numbers' definitions (analysis/measures.py, docs/numbers.md) on hand-written
traces and bundles: the step holds its parts (no kernel longer than it, shares adding up to at
most 100% even where kernels overlap on threads), verdicts only where the spreads part, and one
bundle's numbers read the same in the app's cards, the CLI and the report. Pure: no JAX."""

from __future__ import annotations

import random

import pytest

from analysis import measures as numbers
from analysis.bundle.core import Bundle
from analysis.hlo import parse_module
from analysis.program.kernels import kernels
from analysis.timing.profiles import TraceEvent, attribute, attributed_time



_FUSED_TEXT = """HloModule jit_f, is_scheduled=true
%fa (x: f32[256]) -> f32[256] {
  %x = f32[256]{0} parameter(0)
  ROOT %n = f32[256]{0} negate(%x)
}
%fb (y: f32[256]) -> f32[256] {
  %y = f32[256]{0} parameter(0)
  ROOT %e = f32[256]{0} exponential(%y)
}
ENTRY %main (p: f32[256], q: f32[256]) -> (f32[256], f32[256]) {
  %p = f32[256]{0} parameter(0)
  %q = f32[256]{0} parameter(1)
  %a = f32[256]{0} fusion(%p), kind=kLoop, calls=%fa
  %b = f32[256]{0} fusion(%q), kind=kLoop, calls=%fb
  ROOT %t = (f32[256]{0}, f32[256]{0}) tuple(%a, %b)
}
"""
FUSED = parse_module(_FUSED_TEXT)

LOOP = parse_module("""HloModule jit_loop, is_scheduled=true
%fe (x: f32[8]) -> f32[8] {
  %x = f32[8]{0} parameter(0)
  ROOT %y = f32[8]{0} exponential(%x)
}
%body (p: (s32[], f32[8])) -> (s32[], f32[8]) {
  %p = (s32[], f32[8]{0}) parameter(0)
  %i = s32[] get-tuple-element(%p), index=0
  %x = f32[8]{0} get-tuple-element(%p), index=1
  %one = s32[] constant(1)
  %i1 = s32[] add(%i, %one)
  %e = f32[8]{0} fusion(%x), kind=kLoop, calls=%fe
  ROOT %t = (s32[], f32[8]{0}) tuple(%i1, %e)
}
%cond (p: (s32[], f32[8])) -> pred[] {
  %p = (s32[], f32[8]{0}) parameter(0)
  %i = s32[] get-tuple-element(%p), index=0
  %n = s32[] constant(2)
  ROOT %lt = pred[] compare(%i, %n), direction=LT
}
ENTRY %main (a: f32[8]) -> f32[8] {
  %a = f32[8]{0} parameter(0)
  %zero = s32[] constant(0)
  %init = (s32[], f32[8]{0}) tuple(%zero, %a)
  %w = (s32[], f32[8]{0}) while(%init), condition=%cond, body=%body
  ROOT %r = f32[8]{0} get-tuple-element(%w), index=1
}
""")


def _ev(op, start, dur, run=1, line="tf_XLAPjRtCpuClient/1"):
    return TraceEvent(name=op, hlo_op=op, hlo_module="jit_f", program_id=1, start_ns=start,
                      duration_ns=dur, line=line, run_id=run)


def test_kernels_overlapping_on_two_threads_split_the_time_they_share():
    # a runs [0, 100), b [50, 150) on another executor thread: the step is 150 ns, busy the whole
    # of it. Each kernel ran 100 ns (200 ns summed: more than the step), so each share is its
    # time alone (50) plus half of the 50 they share: 75 / 150.
    out = attribute([_ev("a", 0, 100), _ev("b", 50, 100, line="tf_XLAPjRtCpuClient/2")],
                    kernels(FUSED, "cpu"), 1, "cpu")
    a, b = out["kernels"]["a"], out["kernels"]["b"]
    assert out["step_median_s"] == pytest.approx(150e-9) and out["device_busy_s"] == pytest.approx(150e-9)
    assert a["median_s"] == pytest.approx(100e-9) and b["median_s"] == pytest.approx(100e-9)
    assert a["share"] == pytest.approx(0.5) and b["share"] == pytest.approx(0.5)


def test_a_kernel_beside_another_has_its_part_of_the_step_and_its_own_time():
    # the same trace as above: each kernel's time beside its share is 75 ns (half of 150), and
    # its own time, 100 ns, is a second number: the other kernel ran beside it for 50 ns
    from analysis.render.format import human_seconds

    out = attribute([_ev("a", 0, 100), _ev("b", 50, 100, line="tf_XLAPjRtCpuClient/2")],
                    kernels(FUSED, "cpu"), 1, "cpu")
    a = numbers.kernel_times(out)["a"]
    assert a.share == pytest.approx(0.5) and a.time_s == pytest.approx(75e-9) and a.own_s == pytest.approx(100e-9)
    assert a.own_shown(human_seconds)


def test_a_kernels_time_is_its_share_of_the_step_shown_and_the_times_add_up_to_busy():
    # four steps of a then b, one after the other (never at once): spans 200, 350, 400, 100 ns.
    # The shares are over the middle two by span (200 and 350: 550 ns): a ran 100 + 300, b
    # 100 + 50, so a's share is 400/550 and b's 150/550. The step shown is the median span,
    # (200 + 350) / 2 = 275 ns: a's time is 400/550 of it, 200 ns, b's 75 ns; together 275 ns,
    # the whole step, busy throughout. a's median time over the steps (100 ns) is not its time
    # beside its share; nothing ran beside it, so it has no second number.
    from analysis.render.format import human_seconds

    evs = []
    for run, (ta, tb) in enumerate([(100, 100), (300, 50), (100, 300), (50, 50)]):
        base = run * 10_000
        evs += [_ev("a", base, ta, run=run), _ev("b", base + ta, tb, run=run)]
    out = attribute(evs, kernels(FUSED, "cpu"), 4, "cpu")
    assert out["step_median_s"] == pytest.approx(275e-9)
    kt = numbers.kernel_times(out)
    assert list(kt) == ["a", "b"]
    assert kt["a"].time_s == pytest.approx(200e-9) and kt["b"].time_s == pytest.approx(75e-9)
    assert kt["a"].share == pytest.approx(400 / 550) and kt["b"].share == pytest.approx(150 / 550)
    assert out["device_busy_s"] == pytest.approx(275e-9) and numbers.busy_fraction(out) == pytest.approx(1.0)
    assert out["kernels"]["a"]["median_s"] == pytest.approx(100e-9)
    assert not kt["a"].own_shown(human_seconds) and not kt["b"].own_shown(human_seconds)


def test_a_loop_gets_only_the_time_none_of_its_kernels_ran():
    # while [0, 100) runs its body fusion e twice, [10, 40) and [50, 80): e ran 60 ns of the
    # 100 ns step, the loop's own bookkeeping the other 40.
    ks = kernels(LOOP, "cpu")
    assert {k.name for k in ks} >= {"w", "e"}
    out = attribute([_ev("w", 0, 100), _ev("e", 10, 30), _ev("e", 50, 30)], ks, 1, "cpu")
    w, e = out["kernels"]["w"], out["kernels"]["e"]
    assert w["inclusive"] and not e["inclusive"]
    assert e["calls"] == 2 and e["median_s"] == pytest.approx(60e-9)
    assert e["share"] == pytest.approx(0.6) and w["share"] == pytest.approx(0.4)


def test_the_innermost_loop_keeps_its_own_bookkeeping():
    # an outer loop [0, 100) holding an inner one [20, 90) that runs a kernel [30, 50)
    steps = [_ev("outer", 0, 100), _ev("inner", 20, 70), _ev("k", 30, 20)]
    parts = attributed_time(steps, {"outer", "inner"})
    assert parts == pytest.approx({"outer": 30.0, "inner": 50.0, "k": 20.0})


def test_one_instructions_launches_at_once_count_once_in_its_time():
    # fusion a launches on two streams at once, [0, 100) and [20, 60): it ran 100 ns, not 140
    out = attribute([_ev("a", 0, 100, line="s1"), _ev("a", 20, 40, line="s2")], kernels(FUSED, "gpu"), 1, "gpu")
    assert out["kernels"]["a"]["median_s"] == pytest.approx(100e-9)
    assert out["kernels"]["a"]["share"] == pytest.approx(1.0)


def test_random_traces_keep_every_part_inside_its_step():
    rng = random.Random(7)
    ks = kernels(FUSED, "cpu") + kernels(LOOP, "cpu")
    names = ["a", "b", "e", "w", "not_a_kernel"]
    for trial in range(200):
        evs = []
        n_steps = rng.randint(1, 10)
        for s in range(n_steps):
            base = s * 10_000
            for _ in range(rng.randint(1, 12)):
                evs.append(_ev(rng.choice(names), base + rng.uniform(0, 3000), rng.uniform(0, 2000), run=s,
                               line=f"t{rng.randint(1, 3)}"))
        out = attribute(evs, ks, n_steps, "cpu")
        step = out["step_median_s"]
        rows = out["kernels"].values()
        assert sum(r["share"] for r in rows) <= 1 + 1e-9, trial
        assert all(r["median_s"] <= step * (1 + 1e-9) for r in rows), trial
        assert out["device_busy_s"] <= step * (1 + 1e-9), trial
        assert out["step_q1_s"] <= step <= out["step_q3_s"], trial
        # each time is its share of the step; together they are the step's busy part
        kts = numbers.kernel_times(out).values()
        assert all(k.time_s == pytest.approx(k.share * step) for k in kts), trial
        assert sum(k.time_s for k in kts) == pytest.approx(out["device_busy_s"]), trial
        assert all(k.time_s <= k.own_s * (1 + 1e-9) or k.inclusive for k in kts), trial


def test_spread_is_the_median_and_the_quartiles():
    s = numbers.spread([5, 1, 4, 2, 3])
    assert (s.median, s.q1, s.q3, s.lo, s.hi, s.n) == (3, 2, 4, 1, 5, 5)
    one = numbers.spread([7])
    assert (one.q1, one.q3) == (7, 7)
    assert numbers.spread([]) is None


def test_middle_steps_trim_a_quarter_at_each_end():
    assert list(numbers.middle(1)) == [0]
    assert list(numbers.middle(2)) == [0, 1]
    assert list(numbers.middle(3)) == [1]
    assert list(numbers.middle(10)) == [2, 3, 4, 5, 6, 7]


def test_a_verdict_only_where_the_spreads_part():
    slow = numbers.spread([10, 11, 12, 13, 14])  # IQR 11-13
    fast = numbers.spread([5, 6, 7, 8, 9])  # IQR 6-8
    near = numbers.spread([8, 10, 12, 12, 15])  # IQR 10-12: overlaps slow's
    assert numbers.verdict(slow, fast) == "faster"
    assert numbers.verdict(fast, slow) == "slower"
    assert numbers.verdict(slow, near) == "within the spread"
    assert numbers.verdict(None, fast) == ""


def _side(kernels, nbytes, call, step):
    c, s = numbers.spread(call), numbers.spread(step)
    return {"kernels": kernels, "bytes": nbytes, "flops": 0, "kernels_by_route": {}, "top_kernels": [],
            "iterations": c.n, "traced_steps": s.n,
            "call_median_s": c.median, "call_q1_s": c.q1, "call_q3_s": c.q3, "call_min_s": c.lo,
            "step_median_s": s.median, "step_q1_s": s.q1, "step_q3_s": s.q3, "step_min_s": s.lo, "step_max_s": s.hi,
            "device_busy_s": s.median * 0.9}


def test_fusion_rows_give_a_verdict_only_where_the_spreads_part():
    ms = 1e-3
    # calls: 4.2 ms (IQR 4.1-4.3) off, 3.6 ms (3.5-3.7) on; steps overlap: 3.0 (2.8-3.4) against 3.2 (3.0-3.3)
    fc = {"measured": True, "disabled_passes": ["fusion"],
          "unfused": _side(67, 33_000_000, [x * ms for x in (4.0, 4.1, 4.2, 4.3, 4.4)],
                           [x * ms for x in (2.7, 2.8, 3.0, 3.4, 3.5)]),
          "default": _side(26, 12_000_000, [x * ms for x in (3.4, 3.5, 3.6, 3.7, 3.8)],
                           [x * ms for x in (2.9, 3.0, 3.2, 3.3, 3.4)])}
    rows = {r["what"]: r for r in numbers.fusion_rows(fc, lambda v: f"{v * 1e3:.1f} ms", str, str)}
    call = rows["call, no profiler (median, IQR)"]
    assert call["off"] == "4.2 ms (4.1–4.3 ms)" and call["on"] == "3.6 ms (3.5–3.7 ms)"
    assert call["change"] == "0.6 ms less (-14%)" and call["verdict"] == "fusion on is faster"
    step = rows["step, traced (median, IQR)"]
    assert step["verdict"] == "within the spread" and step["change"] == "0.2 ms more (+7%)"
    assert rows["kernels"]["change"] == "41 less (-61%)"
    assert rows["kernels busy, share of the step"]["on"] == "90%"


def test_bundles_before_schema_5_keep_their_call_and_get_a_step_from_the_timeline():
    d = {"schema_version": 4, "timings": {
        "step_median_s": 0.004, "step_min_s": 0.0039, "step_mean_s": 0.0041, "step_std_s": 1e-4,
        "traced_step_median_s": 0.0045, "kernels": {},
        "timeline": {"step": 0, "events": [{"name": "a", "start_s": 0.0, "duration_s": 0.001},
                                           {"name": "b", "start_s": 0.002, "duration_s": 0.0015}]}}}
    t = Bundle.from_dict(d).timings
    assert t["call_median_s"] == 0.004 and t["call_min_s"] == 0.0039 and t["traced_call_median_s"] == 0.0045
    assert t["step_median_s"] == pytest.approx(0.0035)
    assert numbers.step(t).median == pytest.approx(0.0035) and numbers.call(t).median == 0.004


def _measured_bundle():
    """A bundle with hand-written timings: fusion a and b of FUSED, 1 ms step, shares 0.5 / 0.25."""
    from analysis.bundle.core import bundle_from_hlo

    b = bundle_from_hlo(_FUSED_TEXT)
    row = {"route": "emitter", "library": None, "context": "", "inclusive": False, "calls": 1, "launches": 1,
           "min_s": 0, "mean_s": 0, "std_s": 0, "total_s": 0, "per_call_s": None, "bytes": 2048, "flops": 0,
           "gbps": None, "flops_per_s": None, "arithmetic_intensity": None, "pct_of_peak": None,
           "peak_key": None, "kernel_details": None}
    b.timings = {"platform": "cpu", "iterations": 50, "traced_steps": 10,
                 "step_median_s": 1e-3, "step_q1_s": 0.9e-3, "step_q3_s": 1.1e-3, "step_min_s": 0.8e-3,
                 "step_max_s": 1.3e-3, "share_steps": 6, "call_median_s": 1.25e-3, "call_q1_s": 1.2e-3,
                 "call_q3_s": 1.3e-3, "call_min_s": 1.1e-3, "traced_call_median_s": 1.4e-3,
                 "device_busy_s": 0.75e-3, "attributed_fraction": 1.0,
                 "kernels": {"a": {**row, "name": "a", "median_s": 0.6e-3, "share": 0.5},
                             "b": {**row, "name": "b", "median_s": 0.3e-3, "share": 0.25}}}
    return b




def test_one_bundle_reads_the_same_in_the_cards_the_cli_and_the_report():
    from analysis.render.report import html_report
    from analysis.render.summary import summarize, summary_text

    b = _measured_bundle()
    cards = {c.label: c for c in summarize(b).cards()}
    assert cards["Step (median)"].value == "1.00 ms"
    assert "kernels busy 75% of it" in cards["Step (median)"].note
    assert "a call without the profiler 1.25 ms" in cards["Step (median)"].note
    text = summary_text(b)
    assert "1.00 ms (900.0 µs–1.10 ms) first kernel to last" in text and "busy 75% of it" in text
    assert "1.25 ms (1.20–1.30 ms) wall clock" in text
    assert "50.0%" in text and "25.0%" in text  # the shares of the table
    html = html_report(b)
    assert "1.00 ms" in html and "kernels busy 75% of it" in html
    assert "50.0%" in html and "25.0%" in html  # the same shares as the CLI's table


def test_the_clis_kernel_table_writes_each_time_as_its_share_of_the_step():
    # step 1 ms; a's share 50%: 500 µs beside it, and its median own time 0.6 ms (a row from
    # before own_share was kept) as the second number; b 250 µs and 300 µs
    from analysis.render.summary import summary_text
    from tests.shown import agree

    text = summary_text(_measured_bundle())
    rows = {line.split()[0]: line.split() for line in text.splitlines() if line.strip().startswith(("a ", "b "))}
    assert rows["a"][2:8] == ["500.0", "µs", "1", "50.0%", "600.0", "µs"]
    assert rows["b"][2:8] == ["250.0", "µs", "1", "25.0%", "300.0", "µs"]
    for r in rows.values():
        assert agree(" ".join(r[2:4]), r[5], "1.00 ms")


def test_a_layers_time_is_its_kernels_part_of_the_step():
    b = _measured_bundle()
    assert numbers.part_of_step(b.timings, b.timings["kernels"]["a"]) == pytest.approx(0.5e-3)
    assert numbers.part_of_step(None, b.timings["kernels"]["a"]) is None


def test_a_fusion_says_what_it_holds_besides_the_programs_ops():
    # the fusion does the program's negate and exponential; XLA added a bitcast and two broadcasts
    from types import SimpleNamespace

    from analysis.render.details import fused_added

    m = parse_module("""HloModule jit_g, is_scheduled=true
%f (x: f32[16]) -> f32[4,4] {
  %x = f32[16]{0} parameter(0)
  %c = f32[] constant(1)
  %b1 = f32[16]{0} broadcast(%c), dimensions={}
  %n = f32[16]{0} negate(%x)
  %b2 = f32[16]{0} broadcast(%c), dimensions={}
  %e = f32[16]{0} exponential(%n)
  ROOT %r = f32[4,4]{1,0} bitcast(%e)
}
ENTRY %main (p: f32[16]) -> f32[4,4] {
  %p = f32[16]{0} parameter(0)
  ROOT %fusion = f32[4,4]{1,0} fusion(%p), kind=kLoop, calls=%f
}
""")
    k = next(k for k in kernels(m, "cpu") if k.name == "fusion")
    pre = [SimpleNamespace(opcode="negate"), SimpleNamespace(opcode="exponential"), None]
    assert fused_added(k, pre) == "broadcast ×2, bitcast, constant"


def test_a_schema_4_fusion_comparison_keeps_its_call_times():
    side = {"kernels": 4, "bytes": 1000, "flops": 0, "kernels_by_route": {}, "top_kernels": [], "iterations": 3,
            "step_median_s": 0.002, "device_busy_s": 0.001}
    fc = {"platform": "cpu", "disabled_passes": ["fusion"], "note": "", "measured": True,
          "default": {**side, "step_median_s": 0.001}, "unfused": {**side, "kernels": 9},
          "busy_speedup": 1.0, "speedup": 99.0}
    b = Bundle.from_dict({"schema_version": 4, "fusion_comparison": fc})
    got = b.fusion_comparison
    # what the old bundle called the step was the untraced call; what it saved is derived again
    assert got["unfused"]["call_median_s"] == 0.002 and got["default"]["call_median_s"] == 0.001
    assert got["speedup"] == pytest.approx(2.0) and got["time_saved_s"] == pytest.approx(0.001)
    assert "busy_speedup" not in got and got["kernels_saved"] == 5


# ----------------------------------------------------------------------------- rates and roofs

MIB = 2 ** 20


def _rated_bundle():
    """A 100 µs step, roofs: memory 10 GB/s, an L2 cache of 1 MiB at 20 GB/s, fp32 1 TFLOP/s.
    small: 64 KiB a call, 2 calls, ran 10 µs (its median over steps 20 µs): 131,072 B / 10 µs =
    13.1072 GB/s, above memory's roof (131%) but 65.536% of the L2's, in which its 64 KiB fits.
    big: 8 MiB, ran 50 µs: 167.77216 GB/s against memory's 10 GB/s would be 1678%: it does not fit
    in the L2, so memory's roof applies and it ran faster than any roof measured: no %. The rows
    keep the percentages the bundle once carried (235%, 440%), which no view may show."""
    b = _measured_bundle()
    t = b.timings
    t["step_median_s"] = 100e-6
    t["peaks"] = {"source": "calibrated", "memory_bytes_per_s": 10e9, "flops_per_s": {"fp32": 1e12},
                  "memory_levels": [{"name": "L2 cache", "bytes": MIB, "bytes_per_s": 20e9}]}
    base = dict(t["kernels"]["a"])
    t["kernels"] = {
        "a": {**base, "name": "a", "bytes": 2 * 64 * 1024, "calls": 2, "flops": 0, "share": 0.1,
              "own_share": 0.1, "median_s": 20e-6, "pct_of_peak": 235.0, "gbps": 6.5},
        "b": {**base, "name": "b", "bytes": 8 * MIB, "calls": 1, "flops": 0, "share": 0.5, "own_share": 0.5,
              "median_s": 50e-6, "pct_of_peak": 440.0},
    }
    return b


def test_a_kernels_rate_is_over_its_own_time_against_the_cache_it_fits_in():
    rates = numbers.kernel_rates(_rated_bundle().timings)
    a = rates["a"]
    assert a.bytes_per_s == pytest.approx(131072 / 10e-6)  # own time (0.1 x 100 µs), not its 20 µs median
    assert a.working_set == 64 * 1024
    assert a.roof == "L2 cache (1 MiB)" and a.roof_per_s == 20e9
    assert a.pct_of_roof == pytest.approx(100 * 13.1072e9 / 20e9)
    assert a.roof_note == ""


def test_no_kernel_shows_over_100_percent_of_a_roof():
    rates = numbers.kernel_rates(_rated_bundle().timings)
    b = rates["b"]  # 8 MiB does not fit in the L2: memory's roof, which it beat 16.8 times
    assert b.roof == "memory" and b.pct_of_roof is None
    assert "faster than the memory roof" in b.roof_note and "8 MiB working set" in b.roof_note
    assert all(r.pct_of_roof is None or r.pct_of_roof <= 100 for r in rates.values())


def test_a_flop_rate_is_weighed_against_its_compute_peak():
    b = _rated_bundle()
    t = b.timings
    # 2e7 FLOPs over 50 µs = 4e11 FLOP/s, 40% of fp32's 1e12; its 1 KiB moved is 2% of the L2's roof
    t["kernels"]["b"].update(bytes=1024, flops=2e7, peak_key="fp32")
    r = numbers.kernel_rates(t)["b"]
    assert r.flops_per_s == pytest.approx(4e11) and r.roof == "fp32" and r.pct_of_roof == pytest.approx(40.0)
    assert r.intensity == pytest.approx(2e7 / 1024)


def test_the_cli_and_the_kernel_rows_show_the_roofs_percent_never_the_old_peak():
    from analysis.render.rows import kernel_rows
    from analysis.render.summary import summary_text

    b = _rated_bundle()
    text = summary_text(b)
    assert "235%" not in text and "440%" not in text and "GB/s" not in text
    assert "66%  L2 cache (1 MiB)" in text  # 65.536% of the L2's roof
    assert "ran faster than every roof measured" in text
    rows = {r["kernel"]: r for r in kernel_rows(b)}
    assert rows["a"]["gib_s"] == pytest.approx(131072 / 10e-6 / 2 ** 30)
    assert rows["a"]["pct_of_roof"] == pytest.approx(65.536) and rows["b"]["pct_of_roof"] is None


def test_the_roofs_sentence_says_every_roof_in_one_unit_with_its_spread():
    from analysis.render.format import peaks_sentence

    p = {"source": "calibrated", "memory_bytes_per_s": 20 * 2 ** 30, "flops_per_s": {"matmul": 1.5e11},
         "memory_levels": [{"name": "L2 cache", "bytes": MIB, "bytes_per_s": 100 * 2 ** 30}],
         "spread": {"memory": {"median": 18 * 2 ** 30, "q1": 17 * 2 ** 30, "q3": 19 * 2 ** 30, "n": 30}},
         "note": "calibrated"}
    s = peaks_sentence(p)
    assert "memory 20 GiB/s (its 30 runs' middle half 17–19 GiB/s)" in s
    assert "L2 cache (1.0 MiB) 100 GiB/s" in s and "matmul 150 GFLOP/s" in s
    assert "GB/s" not in s and "TFLOP" not in s


# ----------------------------------------------------------------------------- the fusion verdict

def _fc_calls(off: tuple, on: tuple, alternation=None) -> dict:
    def side(q):
        return {"kernels": 4, "bytes": 2048, "call_median_s": q[1], "call_q1_s": q[0], "call_q3_s": q[2],
                "iterations": 40}
    return {"platform": "cpu", "disabled_passes": ["fusion"], "measured": True, "note": "",
            "unfused": side(off), "default": side(on), "alternation": alternation}


def test_the_fusion_verdict_is_one_function_of_the_bundles_numbers():
    from analysis.render.charts import fusion_figure, fusion_table
    from analysis.render.summary import summarize, summary_text

    # off 1.0-1.4 ms, on 1.2-1.6 ms: the middle halves overlap, after 400 alternated calls each
    fc = _fc_calls((1.0e-3, 1.2e-3, 1.4e-3), (1.2e-3, 1.4e-3, 1.6e-3),
                   {"calls": 400, "stopped": "time", "budget_s": 4.0})
    words = "within the spread: no verdict after 400 alternated calls each (the 4 s allowed ran out)"
    assert numbers.fusion_verdict(fc) == words
    b = _measured_bundle()
    b.fusion_comparison = fc
    card = next(c for c in summarize(b).cards() if c.label == "Fusion off → on")
    assert words in card.note
    assert words in summary_text(b)
    assert [r["verdict"] for r in fusion_table(b) if r[""].startswith("call")] == [words]
    assert words in fusion_figure(b).layout.title.text
    # parted: off 2.0-2.2 ms, on 1.0-1.1 ms, everywhere "fusion on is faster"
    b.fusion_comparison = _fc_calls((2.0e-3, 2.1e-3, 2.2e-3), (1.0e-3, 1.05e-3, 1.1e-3),
                                    {"calls": 15, "stopped": "parted", "budget_s": 4.0})
    assert numbers.fusion_verdict(b.fusion_comparison) == "fusion on is faster"
    assert "fusion on is faster" in fusion_figure(b).layout.title.text
    assert "(2.00× faster: fusion on is faster)" in next(c for c in summarize(b).cards()
                                                         if c.label == "Fusion off → on").note


def test_the_fusion_charts_values_are_not_under_its_error_bars_and_no_text_is_under_14_px():
    from analysis.render.charts import fusion_figure

    b = _measured_bundle()
    b.fusion_comparison = _fc_calls((1.0e-3, 1.2e-3, 1.4e-3), (1.2e-3, 1.4e-3, 1.6e-3))
    fig = fusion_figure(b)
    bars = [d for d in fig.data if d.type == "bar"]
    assert all(d.textposition == "none" for d in bars)  # no value drawn where an error bar ends
    # each value is in its axis label: 4 -> 4 kernels, 2048 B = 0.00 MiB, calls 1200 and 1400 µs
    assert [list(d.x) for d in bars][2] == ["off<br><b>1200</b>", "on<br><b>1400</b>"]
    assert fig.layout.font.size >= 14 and all(a.font.size >= 14 for a in fig.layout.annotations)
