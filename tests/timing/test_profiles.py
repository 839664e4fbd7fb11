"""Profile attribution (analysis.timing.profiles) on hand-written event lists shaped like the profiler's
XLA:GPU output (docs/xla-findings.md): device planes, stream lines next to derived lines, nested
``hlo_op`` names, no ``run_id``. Pure: no JAX, no GPU."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from analysis.hlo import parse_module
from analysis.program.kernels import kernels
from analysis.timing.profiles import TraceEvent, attribute, events_from_profile, parse_kernel_details, split_steps


@dataclass
class Ev:
    name: str
    start_ns: float
    duration_ns: float
    stats: list = field(default_factory=list)


@dataclass
class Line:
    name: str
    events: list


@dataclass
class Plane:
    name: str
    lines: list


@dataclass
class Profile:
    planes: list


def _k(name, op, start, dur, **extra):
    stats = [("hlo_op", op), ("hlo_module", "jit_f"), ("program_id", "7"), ("_src", 1), ("_src", 2)]
    stats += list(extra.items())
    return Ev(name, start, dur, stats)


GPU_PROFILE = Profile([
    Plane("/host:CPU", [Line("python", [_k("PjitFunction(jit(f))", "fusion", 0, 5000)])]),
    Plane("/device:GPU:0", [
        Line("Stream #13(compute)", [
            _k("loop_fusion_kernel", "fusion", 100, 40, kernel_details="regs:32 grid:4,1,1 block:128,1,1"),
            _k("gemm_kernel", "while.1::dot.3", 200, 60),
            Ev("memcpy", 300, 5, [("memcpy_details", "size:64")]),  # no hlo_op: not a kernel event
        ]),
        Line("XLA Ops", [_k("fusion", "fusion", 100, 40)]),  # derived from the stream: would double count
    ]),
    Plane("/device:GPU:1", [Line("Stream #7(compute)", [_k("loop_fusion_kernel", "fusion", 150, 30)])]),
])


def test_gpu_events_come_from_the_device_stream_lines_only():
    evs = events_from_profile(GPU_PROFILE, "gpu")
    assert [(e.name, e.instruction, e.line) for e in evs] == [
        ("loop_fusion_kernel", "fusion", "/device:GPU:0 Stream #13(compute)"),
        ("gemm_kernel", "dot.3", "/device:GPU:0 Stream #13(compute)"),
        ("loop_fusion_kernel", "fusion", "/device:GPU:1 Stream #7(compute)"),
    ]
    first = evs[0]
    assert first.hlo_module == "jit_f" and first.program_id == 7 and first.run_id is None
    assert first.stats == {"kernel_details": "regs:32 grid:4,1,1 block:128,1,1"}  # _src and the rest dropped


def test_cpu_events_come_from_the_host_plane():
    evs = events_from_profile(GPU_PROFILE, "cpu")
    assert [(e.name, e.line) for e in evs] == [("PjitFunction(jit(f))", "python")]


def test_kernel_details_are_split_into_numbers_and_lists():
    d = parse_kernel_details("regs:40 static_shared:0 grid:8,4,1 occ_pct:50.0\nname:abc")
    assert d["regs"] == 40 and d["static_shared"] == 0 and d["grid"] == [8, 4, 1]
    assert d["occ_pct"] == 50.0 and d["name"] == "abc" and d["raw"].startswith("regs:40")
    assert parse_kernel_details("") == {} and parse_kernel_details(None) == {}


def _ev(op, start, dur):
    return TraceEvent(name=op + "_kernel", hlo_op=op, hlo_module="jit_f", program_id=1, start_ns=start,
                      duration_ns=dur, line="Stream #1")


def test_steps_without_run_id_and_an_even_count_are_cut_in_equal_parts():
    evs = [_ev(op, s, 10) for s, op in enumerate(["a", "b"] * 3)]
    steps = split_steps(evs, 3)
    assert [[e.hlo_op for e in st] for st in steps] == [["a", "b"]] * 3


def test_steps_without_run_id_and_an_uneven_count_are_cut_at_the_largest_gaps():
    # three steps of 3, 2 and 2 launches (data-dependent control flow): 10 ns apart inside a
    # step, 1000 ns of idle between steps
    starts = [0, 20, 40, 1100, 1120, 2200, 2220]
    evs = [_ev(f"k{i}", s, 10) for i, s in enumerate(starts)]
    steps = split_steps(evs, 3)
    assert [[e.hlo_op for e in st] for st in steps] == [["k0", "k1", "k2"], ["k3", "k4"], ["k5", "k6"]]


def test_steps_by_run_id():
    evs = [_ev("a", 0, 1)._replace(run_id=5), _ev("a", 10, 1)._replace(run_id=9), _ev("b", 2, 1)._replace(run_id=5)]
    assert [[e.hlo_op for e in st] for st in split_steps(evs, 99)] == [["a", "b"], ["a"]]


MODULE = parse_module("""HloModule jit_f, is_scheduled=true
%fc (x: f32[256]) -> f32[256] {
  %x = f32[256]{0} parameter(0)
  %n = f32[256]{0} negate(%x)
  ROOT %e = f32[256]{0} exponential(%n)
}
ENTRY %main (p: f32[256]) -> f32[256] {
  %p = f32[256]{0} parameter(0)
  %fusion = f32[256]{0} fusion(%p), kind=kLoop, calls=%fc
  ROOT %t = f32[256]{0} tanh(%fusion)
}
""")


def test_gpu_attribution_per_kernel_and_per_step():
    ks = kernels(MODULE, "gpu")
    assert {k.name for k in ks} == {"fusion", "t"}
    # two steps; in each the fusion launches two device kernels (both summed as one call) and
    # tanh one; step 2's tanh overlaps the fusion's second kernel by 5 ns.
    evs = []
    for base, t_start in ((0, 100), (1000, 95)):
        evs += [_ev("fusion", base, 40)._replace(name="fusion_part1"),
                _ev("outer::fusion", base + 50, 50)._replace(name="fusion_part2"),
                _ev("t", base + t_start, 20), _ev("unknown.9", base + 200, 10)]
    out = attribute(evs, ks, 2, "gpu")
    assert out["steps_seen"] == 2
    f, t = out["kernels"]["fusion"], out["kernels"]["t"]
    assert f["calls"] == 1 and f["launches"] == 2 and t["calls"] == 1
    assert f["median_s"] == pytest.approx(90e-9) and t["median_s"] == pytest.approx(20e-9)
    # busy per step: [0,40] + [50,100] + [100,120] + [200,210] = 120 ns; step 2: [0,40] + [50,115] + [200,210] = 115 ns
    assert out["device_busy_s"] == pytest.approx(117.5e-9)
    # attributed: the same without the unknown instruction's 10 ns: 110 and 105
    assert out["attributed_busy_s"] == pytest.approx(107.5e-9)
    assert out["unattributed"] == {"unknown.9": pytest.approx(10e-9)}
    assert out["not_run"] == []
    # bytes moved per call: fusion reads 1 KiB and writes 1 KiB -> 2048 B in 90 ns
    assert f["gbps"] == pytest.approx(2048 / 90e-9 / 1e9)
    assert set(f["kernel_details"]) == {"fusion_part1", "fusion_part2"}


def test_a_slow_step_moves_no_share():
    # Three steps; the fusion takes 40, 40 and then 400 ns (one slow step), tanh 20 ns in each,
    # 1000 ns after the step's start: spans 1020, 1020, 1020 ns, busy 60, 60, 420. Shares are
    # taken over the middle step (numbers.middle(3) keeps one): 40 / 1020 and 20 / 1020 of the
    # step -- not the slow step's 400 ns, which would make a 40 ns kernel read as 89%.
    ks = kernels(MODULE, "gpu")
    evs = []
    for base, f_dur in ((0, 40), (10_000, 40), (20_000, 400)):
        evs += [_ev("fusion", base, f_dur), _ev("t", base + 1000, 20)]
    out = attribute(evs, ks, 3, "gpu")
    f, t = out["kernels"]["fusion"], out["kernels"]["t"]
    assert f["median_s"] == pytest.approx(40e-9) and t["median_s"] == pytest.approx(20e-9)
    assert f["share"] == pytest.approx(40 / 1020) and t["share"] == pytest.approx(20 / 1020)
    assert out["step_median_s"] == pytest.approx(1020e-9) and out["share_steps"] == 1
