"""``xla-explorer compare FILE --inductor``: the model file runs in the sandboxed worker (its
Inductor compile too), the bundle is written, and the two compilers' kernels are printed layer by
layer; a file that is not PyTorch's is one line. Skipped where the [torch] extra is not installed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torchax", reason="the [torch] extra (torch, torchax) is not installed here")

from analysis.bundle.core import Bundle  # noqa: E402
from tests.paths import ROOT  # noqa: E402
from tests.torch.test_inductor import MLP  # noqa: E402


def _run(*args, cwd):
    script = Path(sys.executable).parent / "xla-explorer"
    cmd = [str(script)] if script.exists() else [sys.executable, "-m", "analysis.cli"]
    return subprocess.run(cmd + [str(a) for a in args], capture_output=True, text=True, cwd=ROOT, timeout=600)


def test_compare_inductor_prints_both_sides_layer_by_layer(tmp_path):
    f = tmp_path / "mlp_torch.py"
    f.write_text(MLP)
    r = _run("compare", f, "--inductor", "--out-dir", tmp_path, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    b = Bundle.from_json((tmp_path / "mlp_torch-inductor.json").read_text())
    assert b.inductor is not None and b.kernels  # one bundle: XLA's compile and Inductor's
    lines = r.stdout.splitlines()
    assert lines[0].startswith("XLA beside Inductor (torch 2.")
    assert "not measured" in r.stdout
    # the layers of the module written in MLP, each with both sides
    at = {line: i for i, line in enumerate(lines)}
    for layer in ("up", "act", "down", "norm", "(model)"):
        assert layer in at, r.stdout
    act = lines[at["act"] + 1: at["act"] + 3]
    assert act[0].lstrip().startswith("XLA") and "aten::gelu" in act[0] and "[also up]" in act[0]
    assert act[1].lstrip().startswith("Inductor") and "cpp_fused_gelu" in act[1] and "aten::gelu" in act[1]
    assert "[also" not in act[1]
    up = "\n".join(lines[at["up"]: at["act"]])
    assert "extern_kernels.addmm" in up and "BLAS" in up and "aten::addmm" in up


def test_compare_inductor_of_a_jax_model_is_one_line(tmp_path):
    f = tmp_path / "jax_fn.py"
    f.write_text("import jax.numpy as jnp\nmodel = jnp.tanh\ndef example_inputs():\n    return (jnp.ones(4),)\n")
    r = _run("compare", f, "--inductor", "--out-dir", tmp_path, cwd=tmp_path)
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in r.stderr
    assert "Inductor compiles PyTorch models only" in lines[0] and "jax_fn.py" in lines[0]
