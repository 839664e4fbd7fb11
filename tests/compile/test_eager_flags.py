"""A CPU worker compiles the model's own eager ops (its inputs) at LLVM's O0 (``XLA_FLAGS``),
and every compile the user is shown is XLA's default code all the same
(``stages.FULL_OPTIMIZATION``).

The oracle is XLA itself: the kernels' LLVM IR and object files, and the optimized module, that
XLA dumps for ``_compile`` in a process with no flags at all, against those of ``_compile`` in a
process whose XLA_FLAGS say O0. A plain compile in each is the control: its dumped code differs
between the two, so the flag is in force there."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from analysis.service import sandbox, worker_process
from analysis.service.settings import Limits
from analysis.service.worker import Job, run_job
from tests.paths import ROOT


DUMP = r"""
import hashlib, json, os, sys, tempfile
sys.path.insert(0, {root!r})
import jax
from analysis.compile import stages
from analysis.compile.load import load_gallery

def code(d):
    # the kernels' code and the optimized module, by file name without the module's number
    out = {{}}
    for f in sorted(os.listdir(d)):
        if f.endswith((".ll", ".o", "after_optimizations.txt")):
            out[f.split(".", 2)[-1]] = hashlib.sha1(open(os.path.join(d, f), "rb").read()).hexdigest()
    return out

m = load_gallery("softmax_layernorm")
res = {{}}
d = tempfile.mkdtemp()
stages.compile_loaded(m, "cpu", {{}}, None, "gallery", None, {{"xla_dump_to": d}})
res["ours"] = code(d)
d = tempfile.mkdtemp()
jax.jit(m.model).lower(*m.inputs).compile(compiler_options={{"xla_dump_to": d}})
res["plain"] = code(d)
print(json.dumps(res))
"""


def _dumped(flags: str | None) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    if flags:
        env["XLA_FLAGS"] = flags
    out = subprocess.run([sys.executable, "-c", DUMP.format(root=ROOT)], capture_output=True, text=True,
                         env=env, cwd=ROOT, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_the_compile_shown_is_xlas_default_code_under_the_workers_flags():
    bare = _dumped(None)
    o0 = _dumped(worker_process.EAGER_XLA_FLAGS)
    assert len(bare["ours"]) >= 3 and any(k.endswith(".o") for k in bare["ours"])
    # every kernel's LLVM IR and object file, and the optimized module, as with no flags at all
    assert o0["ours"] == bare["ours"]
    changed = [k for k in bare["plain"] if o0["plain"].get(k) != bare["plain"][k]]
    assert changed, "the O0 flag had no effect on a plain compile: this test would prove nothing"


def test_worker_flags_cpu_and_gpu(monkeypatch):
    monkeypatch.delenv("XLA_FLAGS", raising=False)
    assert worker_process.worker_xla_flags(gpu=False) == worker_process.EAGER_XLA_FLAGS
    assert worker_process.worker_xla_flags(gpu=True) is None
    monkeypatch.setenv("XLA_FLAGS", "--xla_force_host_platform_device_count=2")
    # the operator's flags come after ours (a level set there wins), and alone on a GPU worker
    assert worker_process.worker_xla_flags(gpu=False) == (worker_process.EAGER_XLA_FLAGS
                                                    + " --xla_force_host_platform_device_count=2")
    assert worker_process.worker_xla_flags(gpu=True) == "--xla_force_host_platform_device_count=2"


# The model refuses to load unless its worker has the flag: the job only succeeds if it is there.
CHECKS_FLAGS = """
import os
import jax.numpy as jnp

def model(x):
    return jnp.tanh(x) * 2

def example_inputs():
    flags = os.environ.get("XLA_FLAGS", "")
    if "--xla_backend_optimization_level=0" not in flags:
        raise RuntimeError("worker flags: " + repr(flags))
    return (jnp.ones((8, 8)),)
"""


@pytest.mark.sandbox
@pytest.mark.skipif(bool(sandbox.gpu_device_nodes()), reason="a GPU worker keeps XLA's flags as they are")
def test_a_cpu_worker_runs_with_the_eager_flag():
    limits = Limits(timeout_s=120, cpu_s=120, memory_mb=3072, nproc=64, file_mb=8, output_mb=4)
    ran = run_job(Job(source=CHECKS_FLAGS, filename="flags.py", name="flags", kind="code", backend="cpu"),
                  limits=limits)
    assert ran.bundle.kernels
    # and what it compiled for the user records the user's options only
    assert ran.bundle.options["compiler_options"] == {}
