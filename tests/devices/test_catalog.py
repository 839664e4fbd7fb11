"""Many devices as a job setting: the count read from a model file's text, checked, keyed, given
to the worker process as XLA's host device count; a sharded program compiled there keeps its
inputs' shardings; more devices than allowed is one line naming the limit.

The test process keeps its one CPU device: every compile on N devices runs in a worker started
for the job."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from analysis.devices.catalog import MAX_DEVICES, check_devices, devices_in_source
from analysis.errors import ExplorerError
from analysis.service import cache_keys, worker_process
from analysis.service.job import Job, job_devices
from tests.paths import ROOT

ROOT = Path(ROOT)

# A data-parallel step on 4 devices, written for this test: the batch's 32 rows split over
# "data" (8 rows each), the weight [16, 4] replicated; its gradient is summed over the devices.
SHARDED = '''
import jax
import jax.numpy as jnp
from jax.sharding import AxisType, NamedSharding, PartitionSpec as P

DEVICES = 4
mesh = jax.make_mesh((DEVICES,), ("data",), axis_types=(AxisType.Auto,))

def loss(w, x):
    return jnp.sum((x @ w) ** 2)

def model(w, x):
    return w - 0.1 * jax.grad(loss)(w, x)

def example_inputs():
    x = jax.device_put(jnp.ones((32, 16)), NamedSharding(mesh, P("data", None)))
    return (jnp.ones((16, 4)), x)
'''


# ----------------------------------------------------------------------------- the setting, pure

def test_devices_is_read_from_the_files_text_without_running_it():
    assert devices_in_source("DEVICES = 8\nraise SystemExit('never run')\n") == 8
    assert devices_in_source("DEVICES: int = 2\n") == 2
    assert devices_in_source("import jax\ndef model(x):\n    return x\n") is None
    assert devices_in_source("def f():\n    DEVICES = 4\n") is None  # only the module's own
    assert devices_in_source("def model(x) return\n") is None  # not parsed: running it says where
    with pytest.raises(ExplorerError) as e:
        devices_in_source("x = 1\nDEVICES = 16\n", "m.py")
    assert (e.value.file, e.value.line) == ("m.py", 2) and f"1 to {MAX_DEVICES}" in e.value.message
    with pytest.raises(ExplorerError) as e:
        devices_in_source("DEVICES = len('abc')\n", "m.py")
    assert "whole number" in e.value.message and e.value.line == 1


@pytest.mark.parametrize("bad", [0, -1, 9, 2.0, "8", True, None])
def test_a_device_count_out_of_range_is_one_line_naming_the_limit(bad):
    with pytest.raises(ExplorerError) as e:
        check_devices(bad)
    assert "1 to 8" in e.value.one_line() and "\n" not in e.value.one_line()


def test_a_jobs_devices_are_its_own_else_its_files_else_one():
    assert job_devices(Job(source=SHARDED)) == 4
    assert job_devices(Job(source=SHARDED, devices=2)) == 2
    assert job_devices(Job(source="def model(x): return x")) == 1
    with pytest.raises(ExplorerError):
        job_devices(Job(source="", devices=12))


def test_the_devices_are_part_of_the_cache_key():
    kind = "cpu:cpux1"
    plain = "def model(x): return x"
    k1 = cache_keys.cache_key(Job(source=plain), kind)
    assert k1 == cache_keys.cache_key(Job(source=plain, devices=1), kind)  # 1 is the default, asked or not
    assert k1 != cache_keys.cache_key(Job(source=plain, devices=2), kind)
    # the file's DEVICES and the same count asked for are the same job
    assert cache_keys.cache_key(Job(source=SHARDED), kind) == cache_keys.cache_key(Job(source=SHARDED, devices=4), kind)
    assert cache_keys.cache_key(Job(source=SHARDED), kind) != cache_keys.cache_key(Job(source=SHARDED, devices=8), kind)


def test_the_worker_is_started_with_the_jobs_host_devices(monkeypatch):
    monkeypatch.delenv("XLA_FLAGS", raising=False)
    assert "device_count" not in worker_process.worker_xla_flags(gpu=False, devices=1)
    assert worker_process.worker_xla_flags(gpu=False, devices=8).endswith("--xla_force_host_platform_device_count=8")
    assert worker_process.worker_xla_flags(gpu=True, devices=3) == "--xla_force_host_platform_device_count=3"
    # the job's count comes after the operator's flags (the last one given wins)
    monkeypatch.setenv("XLA_FLAGS", "--xla_force_host_platform_device_count=2")
    assert worker_process.worker_xla_flags(gpu=False, devices=4).endswith("device_count=2 --xla_force_host_platform_device_count=4")
    # a spare worker started for one count never serves a job of another
    from analysis.service.settings import Limits

    one = worker_process.WorkerKind.of(Limits(), True, devices=1)
    four = worker_process.WorkerKind.of(Limits(), True, devices=4)
    assert one.key() != four.key()


# ----------------------------------------------------------------------------- compiled in a worker

@pytest.fixture(scope="module")
def sharded_bundle(tmp_path_factory):
    """SHARDED compiled by the CLI (``analyze FILE --out``) in the sandboxed worker."""
    d = tmp_path_factory.mktemp("devices")
    (d / "dp4.py").write_text(SHARDED)
    r = subprocess.run([sys.executable, "-m", "analysis.cli", "analyze", str(d / "dp4.py"), "--out", str(d / "b.json")],
                       capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    # the summary on stderr: the devices, the mesh, the one all-reduce's 2 x 3/4 x 256 bytes
    assert "devices                 : 4 (mesh data=4)" in r.stderr
    assert "collectives             : 1, ~384 B sent and received per device (ring estimate)" in r.stderr
    return json.loads((d / "b.json").read_text())


def test_a_sharded_file_compiles_on_its_devices_with_its_inputs_shardings(sharded_bundle):
    b = sharded_bundle
    assert b["options"]["devices"] == 4
    assert b["environment"]["device_count"] == 4
    from analysis.bundle.core import device_label

    assert device_label(b["environment"]) == "cpu × 4"
    assert b["options"]["mesh"] == {"axes": {"data": 4}, "device_ids": [0, 1, 2, 3]}
    inputs = b["source"]["inputs"]
    assert "sharding" not in inputs[0]  # the weight: left where JAX puts it (replicated by jit)
    assert inputs[1]["sharding"] == "P('data', None)"
    after = b["stages"]["hlo_after"]
    assert "num_partitions=4" in after.splitlines()[0]
    assert "f32[8,16]" in after  # each device's rows: 32 / 4
    collectives = [k for k in b["kernels"] if k["route"] == "collective"]
    assert [k["opcode"] for k in collectives] == ["all-reduce"]
    # the summed gradient is the weight's shape, in and out: 2 x 16 x 4 x 4 bytes
    assert collectives[0]["bytes"] == 2 * 16 * 4 * 4


def test_devices_on_the_command_line_override_the_files(tmp_path):
    from analysis.cli import load_any

    (tmp_path / "dp4.py").write_text(SHARDED)
    with pytest.raises(ExplorerError) as e:  # the file's mesh needs 4; the job has 2
        load_any(str(tmp_path / "dp4.py"), devices=2)
    line = e.value.one_line()
    assert "Number of devices 2" in line and "--devices 4" in line and "at most 8" in line
    assert e.value.line == 7  # the file's make_mesh line


def test_more_devices_than_allowed_is_one_line_from_the_cli(tmp_path):
    (tmp_path / "dp4.py").write_text(SHARDED.replace("DEVICES = 4", "DEVICES = 4\nmesh16 = jax.make_mesh((16,), ('x',))"))
    r = subprocess.run([sys.executable, "-m", "analysis.cli", "analyze", str(tmp_path / "dp4.py"), "--devices", "9"],
                       capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert "--devices = 9" in r.stderr and "at most 8" in r.stderr
    r = subprocess.run([sys.executable, "-m", "analysis.cli", "analyze", str(tmp_path / "dp4.py")],
                       capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert "mesh_shape (16,)" in r.stderr and "at most 8 are allowed here" in r.stderr


def test_in_this_process_a_count_it_does_not_have_is_refused_before_the_file_runs(tmp_path):
    from analysis.compile.stages import analyze_model

    path = tmp_path / "dp4.py"
    path.write_text(SHARDED + "\nraise SystemExit('the file ran')\n")
    with pytest.raises(ExplorerError) as e:
        analyze_model(str(path), "cpu")
    assert e.value.phase == "options" and "has 1 CPU device" in e.value.message and "--devices 4" in e.value.message
