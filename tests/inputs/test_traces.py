"""Timings from the user's own jax.profiler trace (analysis/inputs/traces.py): a program compiled
with an XLA dump and run three times under the profiler by the test, as a user would on their
machine; ``xla-explorer analyze DUMP.zip --trace TRACE.zip`` puts the trace's times on the
dump's kernels, read from the ``.xplane.pb`` (its reader is checked against
``jax.profiler.ProfileData`` in tests/timing/test_xplane.py) or the ``.trace.json.gz``. GPU and TPU traces are written by the tests in the layouts their sources
describe (docs/xla-findings.md, "Traces from a GPU and a TPU"), in both forms. Bad traces get
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

from analysis.bundle.core import Bundle  # noqa: E402
from analysis.cli import main  # noqa: E402
from analysis.program.kernels import launching  # noqa: E402

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
    assert "peaks                   : none. No roofline verdict: a CPU's peaks" in err  # and why
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
        # a CPU's peaks are not known from a trace: no roofs, and the page says why
        assert t["peaks"] is None and "No roofline verdict" in t["peaks_note"], label


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
    from analysis.bundle.core import bundle_from_hlo
    from analysis.inputs.traces import apply_trace

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
    assert t["peaks"] is None and "does not name its GPU's model" in t["peaks_note"]


def _gpu_xspace(device_name="NVIDIA H100 80GB HBM3") -> bytes:
    """The same GPU trace as an XSpace: the device plane names the GPU (``gpu_device_name``, as
    the CUPTI collector writes it), the kernel events carry hlo_op, hlo_module and program_id."""
    from jax.profiler import ProfileData

    kernels = [("fusion", "fusion", 0, 40), ("t", "outer::t", 50, 20), ("fusion", "fusion", 1000, 40),
               ("t", "outer::t", 1050, 20)]
    meta = " ".join(f'event_metadata {{ key: {i} value {{ id: {i} name: "{k}_kernel" }} }}'
                    for i, k in ((1, "fusion"), (2, "t")))
    names = " ".join(f'stat_metadata {{ key: {i} value {{ id: {i} name: "{n}" }} }}'
                     for i, n in enumerate(("hlo_op", "hlo_module", "program_id", "gpu_device_name"), start=1))
    evs = " ".join(f'events {{ metadata_id: {1 if k == "fusion" else 2} offset_ps: {at * 1000000} '
                   f'duration_ps: {dur * 1000000} stats {{ metadata_id: 1 str_value: "{op}" }} '
                   f'stats {{ metadata_id: 2 str_value: "jit_g" }} stats {{ metadata_id: 3 int64_value: 3 }} }}'
                   for k, op, at, dur in kernels)
    text = (f'planes {{ id: 1 name: "/device:GPU:0" lines {{ id: 13 name: "Stream #13(compute)" timestamp_ns: 7000 '
            f'{evs} }} {meta} {names} stats {{ metadata_id: 4 str_value: "{device_name}" }} }}')
    return ProfileData.text_proto_to_serialized_xspace(text)


def test_a_gpu_shaped_xplane_names_its_gpu_and_gets_its_peaks():
    from analysis.bundle.core import bundle_from_hlo
    from analysis.inputs.traces import apply_trace

    t = apply_trace(bundle_from_hlo(GPU_HLO), data=_gpu_xspace(), name="gpu.xplane.pb").timings
    assert t["platform"] == "gpu" and "NVIDIA H100 80GB HBM3" in t["trace_device"]
    assert t["steps_seen"] == 2 and t["program_id"] == 3
    f = t["kernels"]["fusion"]
    assert f["median_s"] == pytest.approx(40e-6) and t["kernels"]["t"]["median_s"] == pytest.approx(20e-6)
    assert t["step_median_s"] == pytest.approx(70e-6)
    # the H100 SXM data sheet: 3.35 TB/s
    assert t["peaks"]["matched"] == "H100" and t["peaks"]["memory_bytes_per_s"] == 3.35e12
    assert f["pct_of_peak"] == pytest.approx(100 * FUSION_BYTES / 40e-6 / 3.35e12)
    t = apply_trace(bundle_from_hlo(GPU_HLO), data=_gpu_xspace("Some Future GPU"), name="gpu.xplane.pb").timings
    assert t["peaks"] is None and "Some Future GPU" in t["peaks_note"]


# A TPU trace as its sources describe it (docs/xla-findings.md, "Traces from a GPU and a TPU"):
# per TensorCore a /device:TPU:N plane whose "XLA Modules" line has one event per execution,
# named module(program_id), and whose "XLA Ops" line has one event per executed instruction,
# named by its metadata: the display name is the instruction, the name its text (fusion on the
# first core); or the name alone, the instruction (t) or its text (fusion on the second core). A
# SparseCore plane (its own "Sparse Core" lines) and a "Steps" line are beside them. Two cores, two
# executions 1000 us apart; in each: fusion 40 us, then t 20 us.
TPU_CORES = ("/device:TPU:0", "/device:TPU:1")
TPU_RUNS = (0.0, 1000.0)  # us
TPU_OPS = (("fusion", "%fusion = f32[256]{0} fusion(f32[256]{0} %p), kind=kLoop, calls=%fc", 5.0, 40.0),
           ("t", None, 50.0, 20.0))
FUSION_BYTES = 256 * 4 * 2  # its operand and its result


def _tpu_xspace(module="jit_g(7)", kind="TPU v5 lite", with_modules=True) -> bytes:
    """The TPU trace as an XSpace, written as text and serialized by XLA's own protobuf code."""
    from jax.profiler import ProfileData

    planes = []
    for pid, core in enumerate(TPU_CORES + ("/device:TPU:0 SparseCore 0",), start=1):
        sc = "SparseCore" in core
        meta = [f'event_metadata {{ key: 1 value {{ id: 1 name: "{module}" }} }}',
                'event_metadata { key: 2 value { id: 2 name: "0" } }',
                'event_metadata { key: 3 value { id: 3 name: "1" } }']
        for i, (op, text, _, _) in enumerate(TPU_OPS, start=4):
            name = f'name: "{text}"' + (f' display_name: "{op}"' if pid == 1 else "") if text else f'name: "{op}"'
            meta.append(f'event_metadata {{ key: {i} value {{ id: {i} {name} stats {{ metadata_id: 1 uint64_value: 7 }} '
                        f'stats {{ metadata_id: 2 str_value: "loop fusion" }} }} }}')
        stats = ['stat_metadata { key: 1 value { id: 1 name: "program_id" } }',
                 'stat_metadata { key: 2 value { id: 2 name: "hlo_category" } }',
                 'stat_metadata { key: 3 value { id: 3 name: "device_type_string" } }',
                 f'stat_metadata {{ key: 4 value {{ id: 4 name: "{kind}" }} }}']
        steps = " ".join(f"events {{ metadata_id: {2 + k} offset_ps: {int(r * 1e6)} duration_ps: {int(80e6)} }}"
                         for k, r in enumerate(TPU_RUNS))
        mods = " ".join(f"events {{ metadata_id: 1 offset_ps: {int(r * 1e6)} duration_ps: {int(80e6)} }}" for r in TPU_RUNS)
        ops = " ".join(f"events {{ metadata_id: {4 + i} offset_ps: {int((r + at) * 1e6)} duration_ps: {int(dur * 1e6)} }}"
                       for r in TPU_RUNS for i, (_, _, at, dur) in enumerate(TPU_OPS))
        if sc:  # a SparseCore busy for 70 us in each execution, on an op named like one of the module's
            ops = " ".join(f"events {{ metadata_id: 5 offset_ps: {int(r * 1e6)} duration_ps: {int(70e6)} }}" for r in TPU_RUNS)
        prefix = "Sparse Core " if sc else "XLA "
        lines = [f'lines {{ id: 3 name: "{prefix}Ops" timestamp_ns: 2000000 {ops} }}']
        if with_modules:
            lines += [f'lines {{ id: 1 name: "Steps" timestamp_ns: 2000000 {steps} }}',
                      f'lines {{ id: 2 name: "{prefix}Modules" timestamp_ns: 2000000 {mods} }}']
        own = "" if sc else "stats { metadata_id: 3 ref_value: 4 }"
        planes.append(f'planes {{ id: {pid} name: "{core}" {" ".join(lines)} {" ".join(meta)} {" ".join(stats)} {own} }}')
    planes.append('planes { id: 0 name: "/host:CPU" lines { id: 9 name: "python" timestamp_ns: 2000000 } }')
    return ProfileData.text_proto_to_serialized_xspace("\n".join(planes))


def _tpu_chrome(module="jit_g(7)") -> bytes:
    """The same trace as the trace viewer's JSON export writes it: a process per plane named after
    it, a thread per line named after it, an op event named by its display name with its full name
    as the long_name argument, metadata stats before the event's own, values as text, program_id
    (an internal stat) left out."""
    evs = []
    for pid, core in enumerate(TPU_CORES + ("/device:TPU:0 SparseCore 0",), start=1001):
        sc = "SparseCore" in core
        evs.append({"ph": "M", "pid": pid, "name": "process_name", "args": {"name": core}})
        prefix = "Sparse Core " if sc else "XLA "
        for tid, line in enumerate(("Steps", f"{prefix}Modules", f"{prefix}Ops"), start=1):
            evs.append({"ph": "M", "pid": pid, "tid": tid, "name": "thread_name", "args": {"name": line}})
        for k, r in enumerate(TPU_RUNS):
            evs.append({"ph": "X", "pid": pid, "tid": 1, "ts": 2000.0 + r, "dur": 80.0, "name": str(k)})
            evs.append({"ph": "X", "pid": pid, "tid": 2, "ts": 2000.0 + r, "dur": 80.0, "name": module})
            if sc:
                evs.append({"ph": "X", "pid": pid, "tid": 3, "ts": 2000.0 + r, "dur": 70.0, "name": "t"})
                continue
            for op, text, at, dur in TPU_OPS:
                shown = op if pid == 1001 or not text else text  # the second core's fusion has no display name
                args = {"hlo_category": "loop fusion", **({"long_name": text} if text and shown != text else {})}
                evs.append({"ph": "X", "pid": pid, "tid": 3, "ts": 2000.0 + r + at, "dur": dur, "name": shown, "args": args})
    return json.dumps({"displayTimeUnit": "ns", "traceEvents": evs}).encode()


@pytest.mark.parametrize("form", ["xplane", "json"])
def test_a_tpu_trace_times_the_modules_kernels(form):
    from analysis.bundle.core import bundle_from_hlo
    from analysis.inputs.traces import apply_trace

    data, name = (_tpu_xspace(), "vm.xplane.pb") if form == "xplane" else (_tpu_chrome(), "vm.trace.json")
    t = apply_trace(bundle_from_hlo(GPU_HLO), data=data, name=name).timings
    assert t["platform"] == "tpu" and all(core in t["trace_device"] for core in TPU_CORES)
    assert t["steps_seen"] == len(TPU_RUNS)  # the k-th execution is one step on every core
    assert set(t["kernels"]) == {"fusion", "t"}  # whether named by display name or by text
    assert t["program_id"] == 7 and t["matched_fraction"] == 1.0
    f, th = t["kernels"]["fusion"], t["kernels"]["t"]
    assert f["median_s"] == pytest.approx(40e-6) and th["median_s"] == pytest.approx(20e-6)
    assert f["calls"] == 1 and th["calls"] == 1
    assert t["step_median_s"] == pytest.approx(65e-6)  # the first op's start to the last op's end
    assert f["share"] == pytest.approx(40 / 65) and th["share"] == pytest.approx(20 / 65)
    assert [e["name"] for e in t["timeline"]["events"]] == ["fusion", "fusion", "t", "t"]  # two cores
    if form == "xplane":  # the device names its model: the TPU v5e data sheet's peaks (per chip)
        assert "TPU v5 lite" in t["trace_device"]
        assert t["peaks"]["memory_bytes_per_s"] == 819e9 and t["peaks"]["flops_per_s"] == {"bf16": 197e12}
        assert f["pct_of_peak"] == pytest.approx(100 * FUSION_BYTES / 40e-6 / 819e9)
        assert t["peaks_note"] is None
    else:  # the JSON names no model: no roofs, and the page says why
        assert t["peaks"] is None and f["pct_of_peak"] is None
        assert "does not name" in t["peaks_note"]


def test_a_tpu_trace_of_an_unknown_generation_has_no_roofs():
    from analysis.bundle.core import bundle_from_hlo
    from analysis.inputs.traces import apply_trace

    t = apply_trace(bundle_from_hlo(GPU_HLO), data=_tpu_xspace(kind="TPU v4"), name="vm.xplane.pb").timings
    assert "TPU v4" in t["trace_device"] and t["kernels"]["fusion"]["median_s"] == pytest.approx(40e-6)
    assert t["peaks"] is None and "TPU v4" in t["peaks_note"]


def _bad_tpu_traces():
    good = _tpu_xspace()
    return [
        ("cut.xplane.pb", good[: len(good) // 2], "not an XSpace"),
        ("empty.xplane.pb", b"", "no planes"),
        ("lonely.xplane.pb", _tpu_xspace(with_modules=False), "no TPU op lies inside an \"XLA Modules\" event"),
        ("other.trace.json", _tpu_chrome(module="jit_other(3)"), "no event of module jit_g in the trace (it ran: jit_other)"),
        ("other.xplane.pb", _tpu_xspace(module="jit_other(3)"), "no event of module jit_g in the trace (it ran: jit_other)"),
        ("bad.trace.json", _tpu_chrome()[:-40], "not a JSON trace"),
    ]


@pytest.mark.parametrize("i", range(6))
def test_malformed_tpu_traces_get_one_line(tmp_path, capsys, i):
    name, data, says = _bad_tpu_traces()[i]
    hlo = tmp_path / "g.hlo"
    hlo.write_text(GPU_HLO)
    trace = tmp_path / name
    trace.write_bytes(data)
    assert main(["analyze", str(hlo), "--trace", str(trace)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "trace error" in err[0] and says in err[0], err


def test_a_trace_over_the_bounds_gets_one_line(tmp_path, capsys, monkeypatch):
    import analysis.timing.xplane

    monkeypatch.setattr(analysis.timing.xplane, "MAX_EVENTS", 5)  # 2 cores x 2 runs x (2 ops + 2), a SparseCore's 2 x 3
    hlo = tmp_path / "g.hlo"
    hlo.write_text(GPU_HLO)
    trace = tmp_path / "big.xplane.pb"
    trace.write_bytes(_tpu_xspace())
    # (read in this process, where the bound is lowered: --trusted; the gate's worker reads it otherwise)
    assert main(["analyze", str(hlo), "--trace", str(trace), "--trusted"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "22 events, over the 5 a trace may hold" in err[0], err


class _Upload:
    def __init__(self, name, data):
        self.name, self._data, self.size = name, data, len(data)

    def getvalue(self):
        return self._data


def test_the_apps_upload_takes_an_xplane(monkeypatch):
    """The app's trace upload (app/uploads.py) reads a bare .xplane.pb, and says in one line
    what is wrong with a bad one, keeping the page's bundle."""
    import streamlit as st

    from analysis.bundle.core import bundle_from_hlo
    from app import uploads

    st.session_state.session_id = "test-upload"
    b, job, error = uploads.open_files(_Upload("g.hlo", GPU_HLO.encode()), _Upload("vm.xplane.pb", _tpu_xspace()))
    assert error is None and job.kind == "open"  # read by the gate's worker, not here
    assert b.timings["platform"] == "tpu" and b.timings["trace_file"] == "vm.xplane.pb"
    assert [k.name for k in b.kernels] == [k.name for k in bundle_from_hlo(GPU_HLO).kernels]
    b, _, error = uploads.open_files(_Upload("g.hlo", GPU_HLO.encode()), _Upload("vm.xplane.pb", b"\x0a\xff\xff"))
    assert b is None and "trace error at vm.xplane.pb: not an XSpace" in error and "\n" not in error


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
