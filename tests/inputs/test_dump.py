"""Importing a zipped XLA dump folder: a real dump made here with jax, the pass log, and
hostile zips (not a zip, empty, no HLO, bombs, path tricks, damaged members)."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import zipfile

import pytest

from analysis.inputs import dump
from analysis.inputs.dump import bundles_from_dump_zip, pass_text
from analysis.errors import ExplorerError
from tests.paths import ROOT


HLO_BEFORE = """HloModule jit_g, entry_computation_layout={(f32[4]{0})->f32[4]{0}}

ENTRY main {
  x = f32[4]{0} parameter(0)
  e = f32[4]{0} exponential(x)
  ROOT n = f32[4]{0} negate(e)
}
"""


def _zip(files: dict[str, bytes | str], compression=zipfile.ZIP_DEFLATED) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression) as z:
        for name, data in files.items():
            z.writestr(name, data)
    return buf.getvalue()


def _zip_dir(folder: str, prefix: str = "dump/") -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for f in sorted(os.listdir(folder)):
            z.write(os.path.join(folder, f), prefix + f)
    return buf.getvalue()


@pytest.fixture(scope="module")
def real_dump(tmp_path_factory):
    """A real CPU dump of two jitted functions, every pass snapshotted."""
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp

    folder = str(tmp_path_factory.mktemp("xla_dump"))

    def layer(x, w, b):
        return jax.nn.gelu(x @ w + b).sum(axis=-1)

    def tiny(x):
        return -x

    opts = {"xla_dump_to": folder, "xla_dump_hlo_pass_re": ".*"}
    x, w, b = jnp.ones((16, 32)), jnp.ones((32, 8)), jnp.ones((8,))
    jax.jit(layer).lower(x, w, b).compile(compiler_options=opts)
    jax.jit(tiny).lower(jnp.ones((4,))).compile(compiler_options=opts)
    return folder, _zip_dir(folder)


def test_real_dump_imports_every_module_most_interesting_first(real_dump):
    folder, data = real_dump
    bundles = bundles_from_dump_zip(data, "dump.zip")
    assert [b.title for b in bundles] == ["jit_layer", "jit_tiny"]
    b = bundles[0]
    assert set(b.stages) == {"hlo_before", "hlo_after"}
    assert b.environment["platform"] == "cpu" and b.environment["origin"] == "imported XLA dump"
    assert b.source["kind"] == "dump" and b.source["module_id"].isdigit()
    assert b.source["file"].startswith("dump.zip:module_") and b.source["file"].endswith("cpu_after_optimizations.txt")
    assert b.kernels and b.metrics["kernels_after"] >= bundles[1].metrics["kernels_after"]
    assert b.provenance is not None and b.metrics["compute_ops_before"] > b.metrics["kernels_after"]
    # the same numbers as the dump's optimized text analyzed on its own
    from analysis.bundle.core import bundle_from_hlo
    after = next(f for f in os.listdir(folder) if "jit_layer.cpu_after_optimizations.txt" in f)
    alone = bundle_from_hlo(open(os.path.join(folder, after)).read(), "x")
    assert [k.name for k in alone.kernels] == [k.name for k in b.kernels]


def test_pass_log_is_in_pass_order_with_texts(real_dump):
    folder, data = real_dump
    b = bundles_from_dump_zip(data, "dump.zip")[0]
    log = b.pass_log
    snapshots = [f for f in os.listdir(folder) if f.startswith(f"module_{b.source['module_id']}.")
                 and f.count(".") >= 4 and ".after_" in f and "optimizations" not in f]
    assert len(log) == len(snapshots) > 5
    assert [p["index"] for p in log] == sorted(p["index"] for p in log)
    assert len({p["index"] for p in log}) == len(log)
    for p in log:
        assert set(p) == {"index", "pipeline", "pass", "next_pass", "file", "text"}
        assert p["file"] in snapshots and p["text"].lstrip().startswith("HloModule")
    passes = [p["pass"] for p in log]
    assert "fusion" in passes  # XLA:CPU's fusion pass changed the module
    # the last snapshot is (close to) the optimized module; the first is the module as handed in
    assert "fusion" in log[-1]["text"] and "fusion" not in log[0]["text"].split("ENTRY")[1]
    assert pass_text(b, log[0]["index"]) == log[0]["text"]
    # the bundle (with its pass log) survives JSON
    from analysis.bundle.core import Bundle
    assert Bundle.from_json(b.to_json()).pass_log == log


def test_large_pass_logs_keep_only_the_names(real_dump, monkeypatch):
    monkeypatch.setattr(dump, "MAX_PASS_TEXT_BYTES", 100)
    b = bundles_from_dump_zip(real_dump[1], "dump.zip")[0]
    assert b.pass_log and all(p["text"] is None for p in b.pass_log)
    assert all(p["file"] and p["pass"] for p in b.pass_log)


def test_report_of_a_dump_bundle(real_dump):
    from analysis.render.report import html_report

    b = bundles_from_dump_zip(real_dump[1], "dump.zip")[0]
    page = html_report(b)
    assert "Pass log" in page and 'id="post-k:' in page and 'id="pre-op:' in page


def test_file_names_of_other_platforms():
    after_gpu = HLO_BEFORE.replace("HloModule jit_g,", "HloModule jit_g, is_scheduled=true,")
    data = _zip({
        "d/module_0007.jit_g.before_optimizations.txt": HLO_BEFORE,
        "d/module_0007.jit_g.sm_9.0_gpu_after_optimizations.txt": after_gpu,
        "d/module_0007.jit_g.sm_9.0_gpu_after_optimizations-buffer-assignment.txt": "not hlo",
        "d/module_0007.jit_g.0001.simplification.after_algsimp.before_cse.txt": HLO_BEFORE,
        "d/module_0007.jit_g.0000.copy-insertion.after_adding_copies_to_resolve_interference.txt": HLO_BEFORE,
        "e/module_0003.jit_h.tpu_after_optimizations.txt": after_gpu.replace("jit_g", "jit_h"),
        "e/module_0003.jit_h.ir-no-opt.ll": "; llvm",
    })
    bundles = {b.title: b for b in bundles_from_dump_zip(data, "x.zip")}
    assert set(bundles) == {"jit_g", "jit_h"}
    g, h = bundles["jit_g"], bundles["jit_h"]
    assert g.environment["platform"] == "gpu" and h.environment["platform"] == "tpu"
    assert set(g.stages) == {"hlo_before", "hlo_after"} and set(h.stages) == {"hlo_after"}
    assert [(p["index"], p["pipeline"], p["pass"], p["next_pass"]) for p in g.pass_log] == [
        (0, "copy-insertion", "adding_copies_to_resolve_interference", None),
        (1, "simplification", "algsimp", "cse")]
    assert h.pass_log == []


# ----------------------------------------------------------------------------- hostile input


def _load_error(data, name="evil.zip") -> str:
    with pytest.raises(ExplorerError) as ei:
        bundles_from_dump_zip(data, name)
    e = ei.value
    assert e.phase == "load" and "\n" not in e.one_line()
    return e.one_line()


def test_not_a_zip_empty_and_no_hlo():
    assert "not a zip file" in _load_error(b"HloModule m\nENTRY e {}\n")
    assert "empty" in _load_error(b"")
    assert "the zip is empty" in _load_error(_zip({}))
    assert "no XLA dump files" in _load_error(_zip({"readme.txt": "hello", "module_1.x.pb": b"\0"}))
    only_passes = _zip({"module_0001.f.0001.p.after_a.before_b.txt": HLO_BEFORE})
    assert "pass snapshots but no" in _load_error(only_passes)
    assert "not a zip file" in _load_error(b"PK\x03\x04" + b"\0" * 40)  # a zip header and nothing else


def test_zip_bomb_is_refused_without_reading_it_all():
    big = dump.MAX_TOTAL_BYTES + 2 ** 20
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        with z.open("module_0001.bomb.before_optimizations.txt", "w") as f:
            chunk = b"\0" * (4 << 20)
            for _ in range(big // len(chunk) + 1):
                f.write(chunk)
    data = buf.getvalue()
    assert len(data) < 2 ** 20  # ~200 MiB of zeros in well under a megabyte
    # the texts to parse are held to the upload limit first (32 MB by default)
    assert "larger than the upload limit (32 MB" in _load_error(data)


def test_many_small_members_count_against_one_budget(monkeypatch):
    monkeypatch.setattr(dump, "MAX_TOTAL_BYTES", 3000)
    files = {f"module_{i:04d}.m{i}.before_optimizations.txt": HLO_BEFORE.replace("jit_g", f"m{i}") for i in range(20)}
    assert "larger than" in _load_error(_zip(files))


def test_too_many_entries(monkeypatch):
    monkeypatch.setattr(dump, "MAX_MEMBERS", 10)
    assert "entries" in _load_error(_zip({f"f{i}.txt": "x" for i in range(11)}))


def test_path_tricks_are_only_names(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    data = _zip({
        "../../../../tmp/evil/module_0001.jit_g.before_optimizations.txt": HLO_BEFORE,
        "/abs/module_0002.jit_k.before_optimizations.txt": HLO_BEFORE.replace("jit_g", "jit_k"),
    })
    bundles = bundles_from_dump_zip(data, "evil.zip")
    assert sorted(b.title for b in bundles) == ["jit_g", "jit_k"]
    assert all(":module_000" in b.source["file"] and ".." not in b.source["file"] for b in bundles)
    assert os.listdir(tmp_path) == [] and not os.path.exists("/tmp/evil")


def test_damaged_member_and_bad_hlo():
    data = bytearray(_zip({"module_0001.f.before_optimizations.txt": HLO_BEFORE * 50}))
    i = data.find(b"module_0001") + 60  # into the compressed bytes
    data[i:i + 40] = b"\xff" * 40
    msg = _load_error(bytes(data))
    assert "cannot read" in msg or "not a zip" in msg
    with pytest.raises(ExplorerError) as ei:
        bundles_from_dump_zip(_zip({"module_0001.f.before_optimizations.txt": "HloModule f\nENTRY e {\n  x = f32[ parameter(0)\n}\n"}), "z.zip")
    assert ei.value.phase == "parse" and ei.value.file == "z.zip:module_0001.f.before_optimizations.txt"
    # one bad module among good ones is skipped
    good = bundles_from_dump_zip(_zip({"module_0001.f.before_optimizations.txt": "garbage",
                                       "module_0002.jit_g.before_optimizations.txt": HLO_BEFORE}), "z.zip")
    assert [b.title for b in good] == ["jit_g"]


def test_not_bytes():
    with pytest.raises(ExplorerError):
        bundles_from_dump_zip("a string", "s")  # type: ignore[arg-type]


# ----------------------------------------------------------------------------- CLI


def _cli(*args, cwd=ROOT):
    return subprocess.run([sys.executable, "-m", "analysis.cli", *args], capture_output=True, text=True,
                          cwd=cwd, timeout=300)


def test_cli_reads_dump_zips(real_dump, tmp_path):
    z = tmp_path / "dump.zip"
    z.write_bytes(real_dump[1])
    r = _cli("analyze", str(z), "--out", str(tmp_path / "b.json"))
    assert r.returncode == 0, r.stderr
    assert "2 modules in the dump; using jit_layer" in r.stderr
    r = _cli("analyze", str(z), "--module", "jit_tiny", "--out", str(tmp_path / "t.json"))
    assert r.returncode == 0 and "jit_tiny" in (tmp_path / "t.json").read_text()
    r = _cli("analyze", str(z), "--module", "nope")
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "no module 'nope'" in r.stderr
    bad = tmp_path / "bad.zip"
    bad.write_bytes(b"PK\x03\x04garbage")
    r = _cli("report", str(bad), "--html", str(tmp_path / "r.html"))
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and r.stderr.startswith("xla-explorer: load error")
