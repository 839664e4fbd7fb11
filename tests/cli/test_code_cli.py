"""``xla-explorer code``: the real console script on a gallery model (its JSON listing), and the
bad input every user can type (unknown kernel or stage, a bundle without code, a bundle whose
``code`` is malformed), each one line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from analysis.bundle.core import bundle_from_hlo
from analysis.cli import main as cli_main
from tests import xla_oracle
from tests.codegen.test_cpu_read import HLO

_SCRIPT = Path(sys.executable).parent / "xla-explorer"


def _main(capsys, *args):
    rc = cli_main([str(a) for a in args])
    cap = capsys.readouterr()
    return rc, cap.out, cap.err


def _one_line_error(rc, out, err, *needles):
    assert rc == 2 and not out, (rc, out, err)
    line = err.strip()
    assert "\n" not in line and "Traceback" not in line and line.startswith("xla-explorer: ")
    for n in needles:
        assert n in line, line


def test_the_script_lists_every_emitted_kernel_with_its_ir_and_assembly():
    cmd = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "analysis.cli"]
    r = subprocess.run(cmd + ["code", "softmax_layernorm", "--json"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["stages"] == ["llvm-ir", "llvm-ir-opt", "asm"]
    # softmax_layernorm's XLA:CPU compile as XLA itself lists it: its reductions are YNNPACK fusions
    # (jax 0.12.0: four, 0.12.1: three, the whole softmax one of them), the rest loop fusions
    gen, lib = xla_oracle.generated("softmax_layernorm"), xla_oracle.library("softmax_layernorm")
    assert lib and gen
    assert sorted(k["name"] for k in d["kernels"]) == sorted(f.name for f in gen)
    assert [x["target"] for x in d["library"]] == [f.library for f in lib]
    for k in d["kernels"]:
        assert set(k["stages"]) == {"llvm-ir", "llvm-ir-opt", "asm"}
        assert f"define ptr @{k['name']}(" in k["stages"]["llvm-ir"]
        assert k["global_stores"] == 1 and k["global_loads"] >= 1 and k["vector_width"] >= 128
    assert d["totals"]["global_loads"] == sum(k["global_loads"] for k in d["kernels"])


def test_one_kernel_one_stage(capsys):
    rc, out, _ = _main(capsys, "code", "softmax_layernorm", "--kernel", "broadcast_add_fusion", "--stage", "asm")
    last = next(f for f in xla_oracle.generated("softmax_layernorm") if f.name == "broadcast_add_fusion")
    assert rc == 0 and f"== broadcast_add_fusion: {last.operands} loads, 1 stores" in out  # each operand, one result
    assert "-- x86-64 assembly" in out and "broadcast_add_fusion:" in out and "-- LLVM IR" not in out


def test_bad_names_are_one_line(capsys):
    _one_line_error(*_main(capsys, "code", "softmax_layernorm", "--kernel", "nope"), "no kernel 'nope'")
    _one_line_error(*_main(capsys, "code", "softmax_layernorm", "--stage", "bogus"), "unknown stage 'bogus'")
    _one_line_error(*_main(capsys, "code", "softmax_layernorm", "--stage", "ptx"), "no stage 'ptx'")


def test_an_input_without_code(capsys, tmp_path):
    p = tmp_path / "m.hlo"
    p.write_text(HLO)
    _one_line_error(*_main(capsys, "code", p), "no generated code")


def test_a_bundle_whose_code_is_malformed(capsys, tmp_path):
    b = bundle_from_hlo(HLO, "m")
    d = json.loads(b.to_json())
    d["code"] = {"kernels": {"sub_fusion": {"stages": {"llvm-ir": {"z": "%%%"}}}}}
    p = tmp_path / "bad.json"
    p.write_text(json.dumps(d))
    _one_line_error(*_main(capsys, "code", p), "bad.json", "not deflated text")
    d["code"] = "text"
    p.write_text(json.dumps(d))
    _one_line_error(*_main(capsys, "code", p), "'code' must be an object or null")
