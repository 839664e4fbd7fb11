"""A trace alone (analysis/trace_import.pick_program, bundle_from_trace): the modules a user's jax.profiler
trace ran, opened from the HLO the trace carries (its ``/host:metadata`` plane), printed by XLA
in the sandboxed worker (analysis/compile/hlo_proto.py), with the trace's timings on them.

The oracle is XLA: the test compiles the programs itself, runs them under the profiler as a user
would, and compares what the explorer opened with each executable's own ``as_text()``."""

from __future__ import annotations

import os
import re
import zipfile

import pytest

from tests.paths import ROOT

pytest.importorskip("jax")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

from analysis.bundle.core import Bundle  # noqa: E402
from analysis.cli import main  # noqa: E402
from analysis.program.kernels import launching  # noqa: E402
from app.explorer_state import explorer_state  # noqa: E402
from tests.inputs.test_traces import RUNS, _mlp, _trace_file, _Upload, _zip  # noqa: E402

_NAME = re.compile(r"^\s*(?:ROOT\s+)?%?([\w.\-]+)\s*=", re.M)


def _names(text: str) -> set[str]:
    """The instructions a module's text defines (by XLA's own printing)."""
    return set(_NAME.findall(text))


def _sin3(x):
    return jnp.sin(x) * 3.0


@pytest.fixture(scope="module")
def traced(tmp_path_factory):
    return three_program_trace(tmp_path_factory.mktemp("trace_alone"))


def three_program_trace(tmp):
    """One trace of three programs: the MLP at a big and a small batch (one jitted function, so
    two programs of one module name: a new shape is a new compile) and a tiny elementwise one.
    The big MLP does by far the most work. Returns the trace's folder, its zip, and each
    executable's text (XLA's) by label."""
    k = jax.random.split(jax.random.PRNGKey(0), 4)
    w1, w2 = jax.random.normal(k[1], (128, 256)), jax.random.normal(k[2], (256, 32))
    runs = {"big": (_mlp, (jax.random.normal(k[0], (512, 128)), w1, w2)),
            "small": (_mlp, (jax.random.normal(k[3], (8, 128)), w1, w2)),
            "sin": (_sin3, (jnp.ones((8,)),))}
    mlp = jax.jit(_mlp)
    compiled = {label: (mlp if fn is _mlp else jax.jit(fn)).lower(*args).compile() for label, (fn, args) in runs.items()}
    for label, (_, args) in runs.items():
        jax.block_until_ready(compiled[label](*args))  # warm
    trace = tmp / "trace"
    with jax.profiler.trace(str(trace)):
        for _ in range(RUNS):
            for label, (_, args) in runs.items():
                jax.block_until_ready(compiled[label](*args))
    return str(trace), _zip(trace, tmp / "trace.zip"), {label: c.as_text() for label, c in compiled.items()}


def _entry_params(text: str) -> list[str]:
    entry = text[text.index("\nENTRY"):]
    return re.findall(r"= (\S+) parameter\(", entry)


def test_a_trace_alone_opens_the_module_it_ran_most_with_its_timings(traced, tmp_path, capsys):
    trace_dir, trace_zip, xla = traced
    out = tmp_path / "b.json"
    assert main(["analyze", trace_zip, "--out", str(out)]) == 0
    err = capsys.readouterr().err
    b = Bundle.load(out)
    after = b.stages["hlo_after"]
    # the big MLP's executable, as XLA printed it when it compiled it
    assert after.startswith("HloModule jit__mlp")
    assert _names(after) == _names(xla["big"])
    assert _entry_params(after) == _entry_params(xla["big"]) and _entry_params(after)[0].startswith("f32[512,128]")
    assert "hlo_before" not in b.stages  # a trace carries only what ran
    assert 'op_name="jit(_mlp)/' in after  # with its metadata: provenance to the program's ops
    t = b.timings
    assert t["source"] == "trace" and t["steps_seen"] == RUNS and "CPU" in t["trace_device"]
    launch = {k.name for k in launching(b.kernels)}
    timed = {n for n, r in t["kernels"].items() if r["route"] != "unknown"}
    assert len(timed & launch) >= 0.9 * len(launch) and t["matched_fraction"] >= 0.9
    assert sum(r["share"] for r in t["kernels"].values()) <= 1 + 1e-9
    # the others are named, with how to pick one
    said = [ln for ln in err.splitlines() if "the trace ran 3 modules" in ln]
    assert said and "--module" in said[0] and "jit__sin3" in said[0]
    # its folder and its bare .xplane.pb open the same
    for source in (trace_dir, _trace_file(trace_dir, ".xplane.pb")):
        assert main(["analyze", source, "--out", str(out)]) == 0
        assert _names(Bundle.load(out).stages["hlo_after"]) == _names(xla["big"])


def test_module_picks_another_program_of_the_trace(traced, tmp_path, capsys):
    """By name, or by name(program_id) where one function was compiled for two shapes."""
    _, trace_zip, xla = traced
    out = tmp_path / "b.json"
    assert main(["analyze", trace_zip, "--module", "jit__sin3", "--out", str(out)]) == 0
    b = Bundle.load(out)
    assert _names(b.stages["hlo_after"]) == _names(xla["sin"])
    assert b.timings["steps_seen"] == RUNS and b.timings["kernels"]
    capsys.readouterr()
    main(["analyze", trace_zip, "--out", str(out)])
    listed = re.findall(r"jit__mlp\((\d+)\)", capsys.readouterr().err)
    assert len(set(listed)) == 2  # the two compiles of the MLP, told apart by their program ids
    small = [pid for pid in set(listed)
             if main(["analyze", trace_zip, "--module", f"jit__mlp({pid})", "--out", str(out)]) == 0
             and _entry_params(Bundle.load(out).stages["hlo_after"])[0].startswith("f32[8,128]")]
    assert len(small) == 1
    assert main(["analyze", trace_zip, "--module", f"jit__mlp({small[0]})", "--out", str(out)]) == 0
    b = Bundle.load(out)
    assert _names(b.stages["hlo_after"]) == _names(xla["small"])
    # only the small compile's events are on it: its program's, its three runs
    assert b.timings["program_id"] == int(small[0]) and b.timings["steps_seen"] == RUNS


def test_a_module_the_trace_did_not_run_is_one_line(traced, capsys):
    _, trace_zip, _ = traced
    assert main(["analyze", trace_zip, "--module", "jit_nothing"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no module 'jit_nothing' ran in the trace" in err[0] and "jit__sin3" in err[0]


def test_a_json_trace_alone_says_it_carries_no_hlo(traced, capsys):
    trace_dir, _, _ = traced
    assert main(["analyze", _trace_file(trace_dir, ".trace.json.gz")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "carries no HLO" in err[0] and "--trace" in err[0]


def _xspace_carrying(proto: bytes, module_event: str = "jit_f(5)", program_stat: bool = True) -> bytes:
    """A trace written by the test: a CPU thread running one kernel of ``jit_f`` (program 5) in
    each of two steps, and the metadata plane carrying an HloProto (``proto`` as its module)."""
    from jax.profiler import ProfileData

    def esc(b: bytes) -> str:
        return "".join(f"\\{c:03o}" for c in b)

    hlo_proto = b"\x0a" + bytes([len(proto)]) + proto  # HloProto { hlo_module: proto }
    pid = ' stats { metadata_id: 2 uint64_value: 5 }' if program_stat else ""
    meta = (f'planes {{ id: 2 name: "/host:metadata" event_metadata {{ key: 1 value {{ id: 1 name: "{module_event}" '
            f'stats {{ metadata_id: 1 bytes_value: "{esc(hlo_proto)}" }}{pid} }} }} '
            'stat_metadata { key: 1 value { id: 1 name: "Hlo Proto" } } '
            'stat_metadata { key: 2 value { id: 2 name: "program_id" } } }')
    names = " ".join(f'stat_metadata {{ key: {i} value {{ id: {i} name: "{n}" }} }}'
                     for i, n in enumerate(("hlo_op", "hlo_module", "program_id", "run_id"), start=1))
    evs = " ".join(f'events {{ metadata_id: 1 offset_ps: {at * 1000000} duration_ps: 30000000 '
                   f'stats {{ metadata_id: 1 str_value: "copy" }} stats {{ metadata_id: 2 str_value: "jit_f" }} '
                   f'stats {{ metadata_id: 3 int64_value: 5 }} stats {{ metadata_id: 4 int64_value: {run} }} }}'
                   for run, at in ((1, 0), (2, 1000)))
    cpu = (f'planes {{ id: 1 name: "/host:CPU" lines {{ id: 1 name: "worker" timestamp_ns: 1000 {evs} }} '
           f'event_metadata {{ key: 1 value {{ id: 1 name: "copy" }} }} {names} }}')
    return ProfileData.text_proto_to_serialized_xspace(cpu + " " + meta)


def test_the_programs_a_trace_carries_are_read_without_jax():
    from analysis.timing.xplane import read_xspace

    space = read_xspace(_xspace_carrying(b"\x0a\x05jit_f"), "t.xplane.pb")
    assert [(p.module, p.program_id, p.proto) for p in space.programs] == [("jit_f", 5, b"\x0a\x05jit_f")]
    # no program_id stat: the id in the event's name
    space = read_xspace(_xspace_carrying(b"\x0a\x05jit_f", "jit_f(7)", program_stat=False), "t.xplane.pb")
    assert [(p.module, p.program_id) for p in space.programs] == [("jit_f", 7)]


def test_a_module_xla_cannot_read_is_one_line_from_the_sandbox(tmp_path, capsys):
    """Bytes that are no HloModuleProto reach XLA's deserializer only in the sandboxed worker,
    and come back as one line naming the module."""
    path = tmp_path / "t.xplane.pb"
    path.write_bytes(_xspace_carrying(b"\x0a\xff\xff\x12"))  # a name whose length runs past the end
    assert main(["analyze", str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    err = [ln for ln in err if "WARNING: not isolated" not in ln]
    assert len(err) == 1 and "XLA cannot read the module the trace carries" in err[0] and "jit_f(5)" in err[0]


def test_the_apps_upload_opens_a_trace_alone(traced):
    """Dropped in either uploader, the trace's zip opens the module it spent the most time in,
    with its timings (a job through the queue, read by the gate in the sandbox); the bundle lists
    the programs it ran, and another of them opens by its name (another job of the same bytes);
    a JSON trace alone is refused in one line, the page's bundle kept."""
    import streamlit as st

    from app import uploads

    trace_dir, trace_zip, xla = traced
    st.session_state.session_id = "test-trace-alone"
    ss = explorer_state()  # the Explorer's state, which the uploads open into
    for as_model in (False, True):
        ss.bundle, ss.error, ss.upload_job = None, None, None
        up = _Upload("trace.zip", open(trace_zip, "rb").read())
        uploads.load_upload(up, None) if as_model else uploads.load_upload(None, up)
        assert ss.error is None, ss.error
        assert _names(ss.bundle.stages["hlo_after"]) == _names(xla["big"])
        assert ss.bundle.timings["source"] == "trace" and ss.bundle.timings["steps_seen"] == RUNS
    choices, picked, what = uploads.upload_choices(ss.bundle)
    names = [c["name"] for c in choices]
    assert len(choices) == 3 and sum(n.startswith("jit__mlp(") for n in names) == 2 and "trace" in what
    assert picked == names[0] and choices[0]["kernel_s"] >= choices[1]["kernel_s"] > 0  # most kernel time first
    sin = next(n for n in names if n.startswith("jit__sin3"))
    assert uploads.open_choice(sin) and ss.error is None
    assert _names(ss.bundle.stages["hlo_after"]) == _names(xla["sin"]), sin
    assert ss.bundle.timings["program_id"] == int(sin.split("(")[1].rstrip(")"))
    assert uploads.upload_choices(ss.bundle)[1] == sin
    kept = ss.bundle
    js = _trace_file(trace_dir, ".trace.json.gz")
    uploads.load_upload(None, _Upload(os.path.basename(js), open(js, "rb").read()))
    assert ss.bundle is kept and "carries no HLO" in ss.error and "\n" not in ss.error


def test_a_zipped_dump_is_not_taken_for_a_trace(tmp_path):
    from analysis.inputs.traces import holds_trace, is_trace

    z = tmp_path / "dump.zip"
    with zipfile.ZipFile(z, "w") as f:
        f.writestr("module_0001.jit_f.cpu_after_optimizations.txt", "HloModule jit_f\n")
    assert not is_trace(str(z)) and not holds_trace(str(z))
    with zipfile.ZipFile(z, "a") as f:
        f.writestr("trace/plugins/profile/run/host.xplane.pb", b"")
    assert not is_trace(str(z)) and holds_trace(str(z))  # a dump with its trace
    t = tmp_path / "trace.zip"
    with zipfile.ZipFile(t, "w") as f:
        f.writestr("plugins/profile/run/host.xplane.pb", b"")
    assert is_trace(str(t)) and not holds_trace(str(t))


def test_a_dump_and_its_trace_zipped_together_open_as_the_dump_with_the_traces_timings(tmp_path, capsys):
    """A user zips their working folder: the dump and the trace side by side. The dump's two
    graphs open, the trace's times on its kernels (the CLI and the app's one upload box)."""
    from app import uploads
    from tests.inputs.test_traces import _users_run

    k = jax.random.split(jax.random.PRNGKey(2), 3)
    _users_run(tmp_path, _mlp, jax.random.normal(k[0], (64, 128)), jax.random.normal(k[1], (128, 256)),
               jax.random.normal(k[2], (256, 32)))
    both = tmp_path / "both.zip"
    with zipfile.ZipFile(both, "w") as z:
        for sub in ("dump", "trace"):
            for d, _, files in os.walk(tmp_path / sub):
                for f in files:
                    z.write(os.path.join(d, f), os.path.relpath(os.path.join(d, f), tmp_path))
    out = tmp_path / "b.json"
    assert main(["analyze", str(both), "--out", str(out)]) == 0
    b = Bundle.load(out)
    assert "hlo_before" in b.stages and "hlo_after" in b.stages  # the dump's, both sides
    assert b.timings["source"] == "trace" and b.timings["steps_seen"] == RUNS
    ss = explorer_state()  # the Explorer's state, which the uploads open into
    ss.bundle, ss.error = None, None
    uploads.load_upload(_Upload("both.zip", both.read_bytes()), None)
    assert ss.error is None, ss.error
    assert "hlo_before" in ss.bundle.stages and ss.bundle.timings["steps_seen"] == RUNS


def test_a_notebook_shows_a_trace_of_its_own_run(traced):
    """In a notebook the user profiles their own code and shows the trace's folder: the same
    module, timed by the trace, in the page the notebook embeds."""
    import xla_explorer as xe

    trace_dir, _, xla = traced
    ex = xe.show(trace_dir)
    assert _names(ex.bundle.stages["hlo_after"]) == _names(xla["big"])
    assert ex.bundle.timings["source"] == "trace" and ex.bundle.timings["steps_seen"] == RUNS
    page = ex.html()
    assert "A profiler trace carries only the module as it ran" in page and "Timings from your trace" in page


def test_the_gpu_checks_users_trace_step_runs_here(tmp_path):
    """benchmarks/gpu_check.py's user-trace step (a GPU session's first real GPU trace) works
    on whatever JAX has here, so a lent GPU's minutes are not lost to a broken script."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("gpu_check", os.path.join(
        ROOT, "benchmarks", "gpu_check.py"))
    gpu_check = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gpu_check)
    got = gpu_check.users_trace(str(tmp_path))
    assert got["ok"], got["problems"]
    assert got["trace_alone"]["kernels"] == got["dump_and_trace"]["kernels"] and got["trace_alone"]["steps"] == 3
    assert sorted(os.listdir(tmp_path / "users_trace")) == ["dump.zip", "trace.zip"]
