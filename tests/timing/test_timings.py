"""Measured timings on the CPU: attribution, coverage, fusion-off comparison, round trips.

No test asserts a speed: the CI machine is small and shared. Iteration counts are tiny.
"""

from __future__ import annotations

import base64
import gzip
import json

import pytest

pytest.importorskip("jax")

from analysis.devices import catalog  # noqa: E402
from analysis.timing import profiles  # noqa: E402
from analysis.compile import fusion_off, load, measure, stages  # noqa: E402
from analysis.options import FUSION_PASSES  # noqa: E402
from analysis.bundle.core import Bundle  # noqa: E402

LOOP_MODEL = '''"""Loop: a fori_loop and a cond."""
import jax, jax.numpy as jnp
from jax import lax

def model(x, w):
    def body(i, x):
        return jnp.tanh(x @ w) + 1.0
    y = lax.fori_loop(0, 5, body, x)
    return lax.cond(y.sum() > 0, lambda a: jnp.sin(a), lambda a: jnp.cos(a) * 2, y)

def example_inputs():
    return jnp.ones((32, 32)), jnp.ones((32, 32)) * 0.01
'''
ITERS = 5


@pytest.fixture(scope="module", autouse=True)
def data_dir(tmp_path_factory):
    # The CPU peak calibration is cached per machine; keep the tests' cache out of the repo.
    mp = pytest.MonkeyPatch()
    mp.setenv("XLA_EXPLORER_DATA", str(tmp_path_factory.mktemp("data")))
    yield
    mp.undo()


def _measured(name: str):
    c = stages.compile_model(load.load_gallery(name), "cpu")
    measure.measure(c, iterations=ITERS)
    return c.bundle, c


@pytest.fixture(scope="module")
def mlp():
    return _measured("mlp")


@pytest.fixture(scope="module")
def transformer():
    return _measured("transformer_block")


@pytest.fixture(scope="module")
def loop():
    c = stages.compile_model(load.load_source(LOOP_MODEL, "<loop test>", "loop"), "cpu")
    measure.measure(c, iterations=ITERS)
    return c.bundle, c


def test_many_timed_calls_trace_only_a_few(mlp):
    """40 calls timed by wall clock, TRACED_STEPS of them traced: the trace holds that many
    executions of each kernel, and every row's calls count is per traced step."""
    b, c = mlp
    again = measure.run_measurement(c.executable, c.args, b.kernels, "cpu",
                                    b.module("hlo_after").name, iterations=40, keep_trace=False)
    traced = again["traced_steps"]
    assert again["iterations"] == 40 and 0 < traced < 40  # a few of the timed calls, not all
    assert again["steps_seen"] == traced  # the trace holds exactly the traced calls
    assert again["events_seen"] <= traced * 3 * len(b.kernels)  # a few events per kernel per traced step
    assert again["kernels"] and all(r["median_s"] > 0 for r in again["kernels"].values())


@pytest.mark.parametrize("which", ["mlp", "transformer", "loop"])
def test_every_kernel_that_ran_has_a_time(which, request):
    b, _ = request.getfixturevalue(which)
    t = b.timings
    assert t["iterations"] == ITERS and t["steps_seen"] == ITERS
    rows = t["kernels"]
    assert rows, "no kernel was attributed"
    for row in rows.values():
        assert row["calls"] > 0
        assert row["median_s"] > 0 and row["min_s"] > 0 and row["total_s"] > 0, row["name"]
        assert row["route"] != "unknown", f"{row['name']} ran but is no kernel of the module"
    # Every kernel of the module is either timed or listed as not run -- never silently lost.
    names = {k.name for k in b.kernels}
    assert set(rows) | set(t["not_run"]) == names
    assert t["step_median_s"] > 0 and t["device_busy_s"] > 0 and t["call_median_s"] > 0
    # the parts of a real step stay inside it (docs/numbers.md)
    assert t["device_busy_s"] <= t["step_median_s"]
    assert all(r["median_s"] <= t["step_median_s"] for r in rows.values())
    assert sum(r["share"] for r in rows.values()) <= 1 + 1e-9


@pytest.mark.parametrize("which", ["mlp", "transformer"])
def test_attributed_kernels_cover_the_busy_time(which, request):
    """Bound: >= 90% of device-busy time. It holds because every event the XLA:CPU thunk
    executor records for the module carries an hlo_op naming an instruction of the optimized
    module, and without control flow every such instruction is a (leaf) kernel; the busy time
    is the union of those same events. Only events of unknown instructions could fall outside."""
    t = request.getfixturevalue(which)[0].timings
    assert t["attributed_fraction"] >= 0.9
    assert t["unattributed"] == {}
    # with every busy nanosecond attributed, the only note left is about host time around the kernels
    if t["step_median_s"] / t["traced_call_median_s"] < profiles.LOW_BUSY:
        assert "of a traced call" in t["coverage_note"] and "of this module" not in t["coverage_note"]
    else:
        assert t["coverage_note"] is None


def test_control_flow_work_is_attributed_to_its_instructions(loop):
    b, _ = loop
    rows = b.timings["kernels"]
    body = [k for k in b.kernels if k.context.endswith("body") and k.route != "control"]
    assert body
    for k in body:  # a five-trip fori_loop runs every kernel of its body five times per step
        assert k.name in rows, f"{k.name} of the loop body was not timed"
        assert rows[k.name]["calls"] == 5, k.name
    whiles = [r for r in rows.values() if r["name"].startswith("while")]
    assert whiles and all(r["inclusive"] for r in whiles)
    # The untaken branch's kernel never ran.
    assert any(k.context.endswith("branch 0") for k in b.kernels if k.name in b.timings["not_run"])
    # Control flow's own bookkeeping is the only unattributed busy time; it stays small.
    assert b.timings["attributed_fraction"] >= 0.5


def test_timeline_is_one_step(mlp):
    ev = mlp[0].timings["timeline"]["events"]
    assert ev and ev[0]["start_s"] == 0
    assert {e["name"] for e in ev} <= set(mlp[0].timings["kernels"])


def test_raw_trace_is_kept(mlp):
    raw = profiles.trace_bytes(mlp[0].timings)
    assert raw is not None
    doc = json.loads(gzip.decompress(raw))
    assert "traceEvents" in doc


@pytest.mark.parametrize("which", ["mlp", "transformer"])
def test_fusion_off_has_more_kernels(which, request):
    b, loaded = request.getfixturevalue(which)
    fusion_off.compare_fusion(loaded, measure_it=False)
    fc = b.fusion_comparison
    assert fc["unfused"]["kernels"] > fc["default"]["kernels"]
    assert fc["kernels_saved"] > 0
    assert fc["bytes_saved"] > 0
    assert fc["disabled_passes"] == list(FUSION_PASSES["cpu"])


def test_fusion_off_measured(mlp):
    b, loaded = mlp
    fusion_off.compare_fusion(loaded, measure_it=True, iterations=ITERS)
    fc = b.fusion_comparison
    assert fc["measured"] and fc["unfused"]["step_median_s"] > 0 and fc["speedup"] > 0
    assert fc["unfused"]["call_q1_s"] <= fc["unfused"]["call_median_s"] <= fc["unfused"]["call_q3_s"]
    assert fc["unfused"]["top_kernels"]
    # the calls the verdict reads: the two sides alternated, as many of each, at least the minimum
    alt = fc["alternation"]
    assert fc["unfused"]["alternated_calls"] == fc["default"]["alternated_calls"] == alt["calls"]
    assert measure.ALTERNATE_MIN <= alt["calls"] <= measure.ALTERNATE_MAX
    assert alt["stopped"] in ("parted", "calls", "time")
    from analysis.measures import call, fusion_verdict

    parted = call(fc["unfused"]).parts_from(call(fc["default"]))
    assert (alt["stopped"] == "parted") <= parted  # stopped for parting only where they parted
    assert fusion_verdict(fc).startswith("fusion on is" if parted else "within the spread: no verdict after")


@pytest.mark.parametrize("which", ["mlp", "loop"])
def test_bundle_with_timings_round_trips(which, request):
    b, loaded = request.getfixturevalue(which)
    if b.fusion_comparison is None:
        fusion_off.compare_fusion(loaded, measure_it=False)
    back = Bundle.from_json(b.to_json())
    assert back == b
    assert back.timings["kernels"] == b.timings["kernels"]


# ----------------------------------------------------------------------------- pure attribution


def _recorded_events(b):
    """The events of a real CPU trace of the compile ``b`` (re-measured here, raw)."""
    import glob
    import os
    import tempfile

    import jax

    compiled, args = b.executable, b.args
    jax.block_until_ready(compiled(*args))
    with tempfile.TemporaryDirectory() as d:
        jax.profiler.start_trace(d)
        for _ in range(3):
            jax.block_until_ready(compiled(*args))
        jax.profiler.stop_trace()
        pb = glob.glob(os.path.join(d, "**", "*.xplane.pb"), recursive=True)[0]
        return profiles.events_from_profile(jax.profiler.ProfileData.from_file(pb), "cpu")


def test_attribution_without_run_id_matches(loop):
    """The GPU path (no run_id, nested ``a::b`` names) on recorded events gives the same calls."""
    b, c = loop
    events = _recorded_events(c)
    assert events and all(e.run_id is not None for e in events)
    with_id = profiles.attribute(events, b.kernels, 3, "cpu")
    stripped = [e._replace(run_id=None, hlo_op=f"outer.1::{e.hlo_op}") for e in events]
    without = profiles.attribute(stripped, b.kernels, 3, "cpu")
    assert without["steps_seen"] == 3
    assert {k: r["calls"] for k, r in without["kernels"].items()} == \
        {k: r["calls"] for k, r in with_id["kernels"].items()}


def test_gpu_attribution_sums_kernels_of_one_instruction(mlp):
    """One instruction launching two device kernels per call: one row, both summed, calls = 1,
    kernel_details parsed per device kernel."""
    b, c = mlp
    events = _recorded_events(c)
    details = "regs:40 static_shared:0 dynamic_shared:49152 grid:8,4,1 block:128,1,1 occ_pct:50.0"
    doubled = []
    for e in events:
        for part in ("gemm_main", "gemm_epilogue"):
            doubled.append(e._replace(name=f"{e.hlo_op}_{part}", run_id=None, line="Stream #7(Compute)",
                                      duration_ns=e.duration_ns / 2, stats={"kernel_details": details}))
    out = profiles.attribute(doubled, b.kernels, 3, "gpu")
    for name, row in out["kernels"].items():
        assert row["calls"] == 1 and row["launches"] == 2
        assert set(row["kernel_details"]) == {f"{name}_gemm_main", f"{name}_gemm_epilogue"}
        kd = row["kernel_details"][f"{name}_gemm_main"]
        assert kd["regs"] == 40 and kd["grid"] == [8, 4, 1] and kd["occ_pct"] == 50.0


def test_peak_table_prefers_the_specific_name():
    assert catalog.table_peaks("NVIDIA H200")["matched"] == "H200"
    assert catalog.table_peaks("NVIDIA GH200 480GB")["matched"] == "GH200"
    assert catalog.table_peaks("NVIDIA H100 80GB HBM3")["matched"] == "H100"
    assert catalog.table_peaks("NVIDIA L40S")["matched"] == "L40S"
    assert catalog.table_peaks("NVIDIA L4")["matched"] == "L4"
    assert catalog.table_peaks("cpu") is None


def test_measure_needs_a_compiled_program(mlp):
    from analysis.errors import ExplorerError

    loaded_back = stages.Compiled(Bundle.from_json(mlp[0].to_json()), mlp[1].loaded)  # a bundle, no executable
    with pytest.raises(ExplorerError, match="no program to run"):
        measure.measure(loaded_back)


def test_cli_measure_and_compare(tmp_path, capsys):
    from analysis.cli import main

    out = tmp_path / "b.json"
    rc = main(["analyze", "mlp", "--backend", "cpu", "--measure", "--iters", "3", "--compare-fusion",
               "--out", str(out)])
    assert rc == 0
    err = capsys.readouterr().err
    assert "top kernels" in err and "fusion off" in err
    b = Bundle.load(out)
    assert b.timings["iterations"] == 3 and b.fusion_comparison["measured"]
    assert base64.b64decode(b.timings["trace_json_gz_b64"])[:2] == b"\x1f\x8b"


def test_over_peak_note_is_the_roofs_note_and_never_says_over_100_percent():
    from analysis.timing.profiles import over_peak_note

    assert over_peak_note(None) is None
    # rows whose bundle once said 180%: with a 1 ms step and a 10 GB/s memory roof, a 4 KiB
    # kernel that ran 0.5 ms moves 8.2 MB/s; no calibrated cache, so memory's roof, 0.08%
    t = {"step_median_s": 1e-3, "peaks": {"source": "calibrated", "memory_bytes_per_s": 1e10, "flops_per_s": {}},
         "kernels": {"a": {"name": "a", "pct_of_peak": 180.0, "share": 0.5, "own_share": 0.5, "calls": 1,
                           "bytes": 4096, "flops": 0}}}
    assert over_peak_note(t) is None  # nothing beyond a roof, no cache roof used: nothing to say
    t["kernels"]["a"]["bytes"] = 4096 * 10 ** 4  # 40.96 MB / 0.5 ms = 81.9 GB/s: faster than memory's roof
    assert "1 kernel(s) ran faster than every roof measured" in over_peak_note(t)
    assert "over 100%" not in over_peak_note(t)


def test_measured_kernels_never_show_over_100_percent_of_a_roof(mlp):
    """The gallery's mlp measured here: each kernel's % of its roof at most 100, its rate over its
    own time (the one object), with the roof named."""
    from analysis.measures import kernel_rates, kernel_times

    b, _ = mlp
    rates, kts = kernel_rates(b.timings), kernel_times(b.timings)
    assert rates
    for name, r in rates.items():
        assert r.pct_of_roof is None or 0 <= r.pct_of_roof <= 100, (name, r)
        assert r.roof and (r.pct_of_roof is not None or r.roof_note)
        if r.bytes_per_s:
            assert r.bytes_per_s == pytest.approx(b.timings["kernels"][name]["bytes"] / kts[name].own_s)
