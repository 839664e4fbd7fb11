"""Timings from the user's own jax.profiler trace (analysis/compile/trace_import.py): a program compiled
with an XLA dump and run three times under the profiler by the test, as a user would on their
machine; ``xla-explorer analyze DUMP.zip --trace TRACE.zip`` puts the trace's times on the
dump's kernels. Bad traces get one line."""

from __future__ import annotations

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


def test_a_trace_of_another_program_is_refused_in_one_line(run, tmp_path, capsys):
    dump_zip, _, _ = run
    other = tmp_path / "other"
    other.mkdir()
    _, other_trace, _ = _users_run(other, lambda x: jnp.sin(x) * 3, jnp.ones((8,)))
    assert main(["analyze", dump_zip, "--trace", other_trace]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "trace error" in err[0] and "no event of module jit__mlp" in err[0], err


@pytest.mark.parametrize("content, says", [
    (None, "the zip holds no .xplane.pb"),
    (b"\x00\x01 not a protobuf \xff" * 10, "not a readable profiler trace"),
])
def test_bad_traces_get_one_line(run, tmp_path, capsys, content, says):
    dump_zip, _, _ = run
    bad = tmp_path / "bad.zip"
    with zipfile.ZipFile(bad, "w") as z:
        z.writestr("plugins/profile/x/readme.txt" if content is None else "plugins/profile/x/h.xplane.pb",
                   content or b"hello")
    assert main(["analyze", dump_zip, "--trace", str(bad)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and says in err[0], err


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
