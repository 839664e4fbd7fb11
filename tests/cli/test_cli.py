"""The real console script, run as a subprocess: output, exit codes, one-line errors."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from analysis.bundle.core import Bundle, bundle_from_hlo
from analysis.cli import main as cli_main
from analysis.errors import ExplorerError
from sample_models import gallery
from tests.program.test_kernels import CPU_HLO, GPU_HLO
from tests.paths import ROOT

ROOT = Path(ROOT)


def _cmd(*args):
    script = Path(sys.executable).parent / "xla-explorer"
    cmd = [str(script)] if script.exists() else [sys.executable, "-m", "analysis.cli"]
    return cmd + [str(a) for a in args]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The runs of the real console script, started side by side (each pays several seconds of
    interpreter and import start-up). Error paths that need no separate interpreter call
    ``analysis.cli.main`` in-process instead, which keeps this file fast on 2 cores."""
    d = tmp_path_factory.mktemp("cli")
    (d / "gpu_step.hlo").write_text(GPU_HLO)
    bundle_from_hlo(CPU_HLO, "cpu_step").save(d / "cpu_step.json")
    (d / "broken.py").write_text("import jax\n\ndef model(x):\n    return x +\n")
    cases = {
        "list": ("list",),
        "mlp": ("analyze", "mlp"),
        "debug": ("--debug", "analyze", d / "broken.py"),
    }
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    procs = {k: subprocess.Popen(_cmd(*a), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                 cwd=ROOT, env=env) for k, a in cases.items()}
    out = {}
    for k, p in procs.items():
        stdout, stderr = p.communicate(timeout=600)
        out[k] = subprocess.CompletedProcess(p.args, p.returncode, stdout, stderr)
    out["dir"] = d
    return out


def main_in_process(capsys, *args):
    """``analysis.cli.main`` in this process: the same code path as the script, for the error
    cases that need no separate interpreter."""
    rc = cli_main([str(a) for a in args])
    cap = capsys.readouterr()
    return subprocess.CompletedProcess(args, rc, cap.out, cap.err)


def assert_user_error(r, *needles):
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert "Traceback" not in r.stderr
    for n in needles:
        assert n in lines[0], lines[0]
    return lines[0]


def test_list(runs):
    r = runs["list"]
    assert r.returncode == 0, r.stderr
    names = [line.split()[0] for line in r.stdout.splitlines() if line.strip()]
    assert names == list(gallery())


@pytest.fixture(scope="module")
def mlp_run(runs):
    r = runs["mlp"]
    assert r.returncode == 0, r.stderr
    return r


def _summary_number(stderr, label):
    m = re.search(rf"{label}\s*:\s*(\d+)", stderr)
    assert m, stderr
    return int(m.group(1))


def test_analyze_mlp_summary_matches_bundle(mlp_run):
    data = json.loads(mlp_run.stdout)
    b = Bundle.from_dict(data)
    launching = [k for k in b.kernels if k.route != "control"]
    assert _summary_number(mlp_run.stderr, "kernels after") == len(launching) == b.metrics["kernels_after"]
    assert _summary_number(mlp_run.stderr, "ops before optimization") == b.metrics["compute_ops_before"]
    assert b.source["name"] == "mlp" and b.environment["platform"] == "cpu"
    assert b.stages["hlo_after"].startswith("HloModule")
    # Routes in the summary add up to the kernels in the JSON.
    routes = re.search(r"kernels by route\s*:\s*(.*)", mlp_run.stderr).group(1)
    assert sum(int(n) for n in re.findall(r"(\d+)(?:,|$)", routes)) == len(b.kernels)
    assert "fusion coverage" in mlp_run.stderr and "memory traffic" in mlp_run.stderr


def test_analyze_bundle_json_with_out(runs, capsys):
    r = main_in_process(capsys, "analyze", runs["dir"] / "cpu_step.json", "--out", runs["dir"] / "out.json")
    assert r.returncode == 0, r.stderr
    assert r.stdout == ""  # the bundle went to the file
    assert Bundle.load(runs["dir"] / "out.json") == Bundle.load(runs["dir"] / "cpu_step.json")
    assert "kernels after" in r.stderr


def test_analyze_plain_hlo_from_another_machine(runs, capsys):
    r = main_in_process(capsys, "analyze", runs["dir"] / "gpu_step.hlo")
    assert r.returncode == 0, r.stderr
    b = Bundle.from_json(r.stdout)
    assert b.platform == "gpu" and b.title == "gpu_step"
    assert b.metrics["kernels_by_library"]["cuBLAS"] == 1
    assert _summary_number(r.stderr, "kernels after") == b.metrics["kernels_after"]


def test_unknown_compile_option(capsys):
    line = assert_user_error(main_in_process(capsys, "analyze", "mlp", "--option", "xla_no_such_option_xyz=1"),
                             "compile error")
    assert "xla_no_such_option_xyz" in line


def test_syntax_error_names_file_and_line(runs, capsys):
    assert_user_error(main_in_process(capsys, "analyze", runs["dir"] / "broken.py"), "syntax error", "broken.py:4")


def test_debug_shows_traceback(runs, tmp_path):
    r = runs["debug"]
    assert r.returncode != 0
    assert "Traceback" in r.stderr and "ExplorerError" in r.stderr
    # Also accepted after the command.
    path = tmp_path / "broken.py"
    path.write_text("def model(x):\n    return x +\n")
    with pytest.raises(ExplorerError):
        cli_main(["analyze", str(path), "--debug"])


def test_malformed_option(capsys):
    assert_user_error(main_in_process(capsys, "analyze", "mlp", "--option", "novalue"), "options error")


def test_missing_files(capsys, tmp_path):
    assert_user_error(main_in_process(capsys, "analyze", tmp_path / "nope.py"), "load error", "nope.py")
    assert_user_error(main_in_process(capsys, "analyze", tmp_path / "nope.hlo"), "load error", "nope.hlo",
                      "no such file")
    assert_user_error(main_in_process(capsys, "analyze", "no_such_gallery_model"), "load error",
                      "no_such_gallery_model")


def test_file_without_model(capsys, tmp_path):
    path = tmp_path / "nomodel.py"
    path.write_text("x = 1\n")
    assert_user_error(main_in_process(capsys, "analyze", path), "nomodel.py", "`model`")


def test_malformed_hlo_names_the_line(capsys, tmp_path):
    path = tmp_path / "bad.hlo"
    path.write_text("HloModule m\n\nENTRY %main {\n  %p = f32[2]{0} parameter(0)\n  ROOT %n = f32[2]{0} negate(%p\n}\n")
    assert_user_error(main_in_process(capsys, "analyze", path), "parse error", "bad.hlo:5")


@pytest.mark.parametrize("command", ["analyze", "report"])
def test_a_bundle_whose_hlo_is_damaged_names_the_text_and_the_place(capsys, tmp_path, command):
    import json

    from analysis.bundle.core import bundle_from_hlo

    b = bundle_from_hlo(GPU_HLO, "gpu_model", "gpu.hlo").to_dict()
    lines = b["stages"]["hlo_after"].splitlines()
    n = next(i for i, line in enumerate(lines) if "parameter(0)" in line)
    lines[n] = lines[n].replace("parameter(0)", "parameter(((0")  # damaged on its line, n + 1
    b["stages"]["hlo_after"] = "\n".join(lines)
    path = tmp_path / "b.json"
    path.write_text(json.dumps(b))
    extra = ["--html", tmp_path / "r.html"] if command == "report" else []
    line = assert_user_error(main_in_process(capsys, command, path, *extra), "parse error")
    assert f":{n + 1}:" in line and ("hlo_after" in line or "b.json" in line), line
    assert "internal error" not in line


def test_corrupt_bundle_json(capsys, tmp_path):
    path = tmp_path / "bad.json"
    path.write_text('{"schema_version": 1, "kernels": ')
    assert_user_error(main_in_process(capsys, "analyze", path), "load error", "bad.json")


def test_internal_errors_are_one_line(capsys, monkeypatch, tmp_path):
    import analysis.render.summary

    def boom(b):
        raise RuntimeError("a bug\nover two lines")

    # a bug in a view the CLI prints (the command imports it as it runs)
    monkeypatch.setattr(analysis.render.summary, "summary_text", boom)
    path = tmp_path / "gpu.hlo"
    path.write_text(GPU_HLO)
    r = main_in_process(capsys, "analyze", path, "--out", tmp_path / "o.json")
    assert r.returncode == 1
    assert r.stderr.strip().count("\n") == 0
    assert "internal error" in r.stderr and "--debug" in r.stderr


def test_gpu_target_cannot_be_measured(capsys):
    assert_user_error(main_in_process(capsys, "analyze", "mlp", "--gpu-target", "h200", "--measure"),
                      "options error", "--gpu-target")


def test_gpu_target_without_the_cuda_plugin_is_one_clear_line(capsys):
    from importlib.metadata import PackageNotFoundError, version

    try:
        version("jax-cuda12-plugin")
        pytest.skip("the CUDA plugin is installed here: the compile would succeed")
    except PackageNotFoundError:
        pass
    assert_user_error(main_in_process(capsys, "analyze", "mlp", "--gpu-target", "h200"),
                      "options error", "cannot compile for GPU target 'h200'", "cuda extra")


def test_the_console_script_leaves_what_it_made_to_the_exit():
    """``run`` (the console script) ends its process with everything alive in the collector's
    permanent generation, which the interpreter's last collection does not walk; ``main`` in a
    process that goes on leaves the collector alone. The installed script is ``run``."""
    probe = ("import atexit, gc, sys\nfrom analysis import cli\n"
             "atexit.register(lambda: print('frozen', gc.get_freeze_count() > 0))\n"
             "sys.argv = ['xla-explorer', 'list']\n" + "{call}\n")
    ran = subprocess.run([sys.executable, "-c", probe.format(call="cli.run()")], capture_output=True, text=True,
                         cwd=ROOT, timeout=120)
    assert ran.returncode == 0, ran.stderr
    assert "mlp" in ran.stdout and ran.stdout.strip().endswith("frozen True")
    main = subprocess.run([sys.executable, "-c", probe.format(call="sys.exit(cli.main())")], capture_output=True,
                          text=True, cwd=ROOT, timeout=120)
    assert main.returncode == 0 and main.stdout.strip().endswith("frozen False"), main.stderr
    assert 'xla-explorer = "analysis.cli:run"' in (Path(ROOT) / "pyproject.toml").read_text()
