"""Timings from the user's own jax.profiler trace (analysis/trace_import.py): a program compiled
with an XLA dump and run three times under the profiler by the test, as a user would on their
machine; ``xla-explorer analyze DUMP.zip --trace TRACE.zip`` puts the trace's times on the
dump's kernels, read from the ``.xplane.pb`` (its reader is checked against
``jax.profiler.ProfileData`` in tests/test_xplane.py) or the ``.trace.json.gz``. Bad traces get
one line."""

from __future__ import annotations

import json
import os
import shutil
import zipfile

import pytest

pytest.importorskip("jax")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

from analysis.bundle import Bundle  # noqa: E402
from analysis.cli import main  # noqa: E402
from analysis.kernels import launching  # noqa: E402

RUNS = 3


def _zip(folder, out):
    with zipfile.ZipFile(out, "w") as z:
        for d, _, files in os.walk(folder):
            for f in files:
                p = os.path.join(d, f)
                z.write(p, os.path.relpath(p, folder))
    return str(out)


def _users_run(tmp, fn, *args):
    """What a user does: compile with a dump, run under the profiler; both zipped."""
    dump, trace = tmp / "dump", tmp / "trace"
    compiled = jax.jit(fn).lower(*args).compile(compiler_options={"xla_dump_to": str(dump)})
    jax.block_until_ready(compiled(*args))  # warm
    with jax.profiler.trace(str(trace)):
        for _ in range(RUNS):
            jax.block_until_ready(compiled(*args))
    return _zip(dump, tmp / "dump.zip"), _zip(trace, tmp / "trace.zip"), str(trace)


def _mlp(x, w1, w2):
    h = jnp.tanh(x @ w1 + 1.0)
    return jax.nn.softmax(h @ w2, axis=-1)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("users_run")
    k = jax.random.split(jax.random.PRNGKey(0), 3)
    args = (jax.random.normal(k[0], (64, 128)), jax.random.normal(k[1], (128, 256)), jax.random.normal(k[2], (256, 32)))
    return _users_run(tmp, _mlp, *args)


def test_a_users_trace_times_the_dumps_kernels(run, tmp_path, capsys):
    dump_zip, trace_zip, trace_dir = run
    out = tmp_path / "b.json"
    assert main(["analyze", dump_zip, "--trace", trace_zip, "--out", str(out)]) == 0
    err = capsys.readouterr().err
    b = Bundle.load(out)
    t = b.timings
    assert t["source"] == "trace" and t["platform"] == "cpu" and "CPU" in t["trace_device"]
    assert t["steps_seen"] == RUNS  # the test ran it three times under the profiler
    launch = {k.name for k in launching(b.kernels)}
    timed = {n for n, r in t["kernels"].items() if r["route"] != "unknown"}
    assert len(timed & launch) >= 0.9 * len(launch)  # nearly every kernel that ran is on the graph
    assert t["matched_fraction"] >= 0.9
    assert sum(r["share"] for r in t["kernels"].values()) <= 1 + 1e-9
    assert "timings from" in err and "your trace" in err
    # the trace's folder works as well as its zip
    assert main(["analyze", dump_zip, "--trace", trace_dir, "--out", str(out)]) == 0


def _trace_file(folder, suffix):
    """The file of a jax.profiler run folder whose name ends with ``suffix``."""
    found = [os.path.join(d, f) for d, _, fs in os.walk(folder) for f in fs if f.endswith(suffix)]
    assert len(found) == 1, found
    return found[0]


def test_either_file_of_a_run_gives_the_same_timings(run, tmp_path):
    """The run's .xplane.pb alone (as a file and zipped), its .trace.json.gz alone, and its folder
    (both files: the .xplane.pb is the one read) time the same kernels the same."""
    dump_zip, _, trace_dir = run
    xplane, js = _trace_file(trace_dir, ".xplane.pb"), _trace_file(trace_dir, ".trace.json.gz")
    only_pb = tmp_path / "only_pb.zip"
    with zipfile.ZipFile(only_pb, "w") as z:
        z.write(xplane, "plugins/profile/run/host.xplane.pb")
    got = {}
    for label, trace in (("pb", xplane), ("pb zipped", str(only_pb)), ("json", js), ("folder", trace_dir)):
        out = tmp_path / f"{label}.json"
        assert main(["analyze", dump_zip, "--trace", trace, "--out", str(out)]) == 0, label
        got[label] = Bundle.load(out).timings
    assert got["folder"]["trace_file"].endswith(".xplane.pb")
    assert got["json"]["trace_file"].endswith(".trace.json.gz")
    ref = got["json"]
    for label, t in got.items():
        assert t["steps_seen"] == RUNS and t["platform"] == "cpu", label
        assert set(t["kernels"]) == set(ref["kernels"]), label
        for name, row in t["kernels"].items():
            assert row["median_s"] == pytest.approx(ref["kernels"][name]["median_s"], abs=5e-9), (label, name)
        assert t["step_median_s"] == pytest.approx(ref["step_median_s"], abs=5e-9), label


def test_a_trace_of_another_program_is_refused_in_one_line(run, tmp_path, capsys):
    dump_zip, _, _ = run
    other = tmp_path / "other"
    other.mkdir()
    _, other_trace, _ = _users_run(other, lambda x: jnp.sin(x) * 3, jnp.ones((8,)))
    assert main(["analyze", dump_zip, "--trace", other_trace]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "trace error" in err[0] and "no event of module jit__mlp" in err[0], err


@pytest.mark.parametrize("member, content, says", [
    ("plugins/profile/x/readme.txt", b"hello", "the zip holds no .xplane.pb or .trace.json.gz"),
    ("plugins/profile/x/h.trace.json.gz", b"\x1f\x8b not gzip at all" * 10, "not a readable gzip file"),
    ("plugins/profile/x/h.trace.json", b"{\"traceEvents\": [", "not a JSON trace"),
    ("plugins/profile/x/h.trace.json", b"{\"events\": []}", "no traceEvents list"),
])
def test_bad_traces_get_one_line(run, tmp_path, capsys, member, content, says):
    dump_zip, _, _ = run
    bad = tmp_path / "bad.zip"
    with zipfile.ZipFile(bad, "w") as z:
        z.writestr(member, content)
    assert main(["analyze", dump_zip, "--trace", str(bad)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and says in err[0], err


GPU_HLO = """HloModule jit_g, is_scheduled=true
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
"""


def _chrome(process, threads):
    """A Chrome JSON trace: one process, threads of (name, [(op, ts_us, dur_us, extra args)])."""
    evs = [{"ph": "M", "pid": 1, "name": "process_name", "args": {"name": process}}]
    for tid, (tname, items) in enumerate(threads, start=1):
        evs.append({"ph": "M", "pid": 1, "tid": tid, "name": "thread_name", "args": {"name": tname}})
        for op, ts, dur, extra in items:
            evs.append({"ph": "X", "pid": 1, "tid": tid, "ts": ts, "dur": dur, "name": op + "_kernel",
                        "args": {"hlo_op": op, "hlo_module": "jit_g", "program_id": "3", **extra}})
    return json.dumps({"traceEvents": evs}).encode()


def test_a_gpu_shaped_trace_is_read_from_its_stream_lines():
    # XLA:GPU's layout (docs/xla-findings.md): kernels on a /device:GPU:0 "Stream" line, no
    # run_id, a nested hlo_op; the derived "XLA Ops" line repeats them and must not count.
    # Two executions: fusion 40 us then tanh 20 us, 1000 us apart.
    from analysis.bundle import bundle_from_hlo
    from analysis.trace_import import apply_trace

    stream = [("fusion", 0, 40, {"kernel_details": "regs:32 grid:4,1,1 block:128,1,1"}), ("outer::t", 50, 20, {}),
              ("fusion", 1000, 40, {}), ("outer::t", 1050, 20, {})]
    data = _chrome("/device:GPU:0", [("Stream #13(compute)", stream), ("XLA Ops", [("fusion", 0, 40, {})] * 2)])
    b = apply_trace(bundle_from_hlo(GPU_HLO), data=data, name="gpu.trace.json")
    t = b.timings
    assert t["platform"] == "gpu" and "/device:GPU:0" in t["trace_device"]
    assert t["steps_seen"] == 2
    f, th = t["kernels"]["fusion"], t["kernels"]["t"]
    assert f["median_s"] == pytest.approx(40e-6) and th["median_s"] == pytest.approx(20e-6)
    assert t["step_median_s"] == pytest.approx(70e-6)  # first kernel's start to the last's end
    assert f["share"] == pytest.approx(40 / 70) and th["share"] == pytest.approx(20 / 70)
    assert f["kernel_details"]["fusion_kernel"]["regs"] == 32


def test_a_tpu_trace_is_refused_in_one_line():
    from analysis.bundle import bundle_from_hlo
    from analysis.errors import ExplorerError
    from analysis.trace_import import apply_trace

    with pytest.raises(ExplorerError, match="a TPU trace"):
        apply_trace(bundle_from_hlo(GPU_HLO), data=_chrome("/device:TPU:0", [("XLA Ops", [("t", 0, 5, {})])]))


def test_measure_and_trace_exclude_each_other(run, capsys):
    dump_zip, trace_zip, _ = run
    assert main(["analyze", dump_zip, "--trace", trace_zip, "--measure"]) == 2
    assert "leave out --measure" in capsys.readouterr().err
    assert main(["analyze", dump_zip, "--trace", "/no/such/trace"]) == 2
    assert "no such file" in capsys.readouterr().err


def test_an_empty_folder_says_where_traces_are(tmp_path, run, capsys):
    dump_zip, _, _ = run
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["analyze", dump_zip, "--trace", str(empty)]) == 2
    assert "jax.profiler.trace(DIR) writes" in capsys.readouterr().err
    shutil.rmtree(empty)
