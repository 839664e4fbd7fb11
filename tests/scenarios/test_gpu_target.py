"""Real XLA:GPU output, tested on a machine without a GPU.

``sample_models/recorded/h200/`` holds the gallery compiled by XLA's GPU compiler for an H200
target without a device (``scripts/record_gpu_target.py``: JAX's CUDA plugin given a target
description; no autotuning, nothing run). These are real optimized GPU modules — cuBLAS/cuDNN
custom calls, Triton GEMM and softmax fusions with their tiles, a while loop with dynamic-slice
fusions — so the parser, the legend, provenance, the lessons, the graphs and the fusion-pass list
are checked against what XLA:GPU actually prints, not against hand-written text.
"""

from __future__ import annotations

import glob
import dataclasses
import json
import os

import pytest

from analysis.bundle.core import Bundle, analyze, device_label
from analysis.render.module_graphs import post_graph, pre_graph
from analysis.program.kernels import TRITON_KINDS
from analysis.options import FUSION_PASSES, REWRITE_PASSES
from sample_models import gallery
from sample_models.lessons import lesson
from tests.paths import ROOT

HERE = os.path.join(ROOT, "sample_models", "recorded", "h200")
ALL = sorted(glob.glob(os.path.join(HERE, "*.bundle.json")))
FIXTURES = [p for p in ALL if os.path.basename(p).count(".") == 2]  # <model>.bundle.json: default options
VARIANTS = [p for p in ALL if p not in FIXTURES]  # <model>.<preset>.bundle.json


def _name(path: str) -> str:
    return os.path.basename(path).split(".")[0]


def _id(path: str) -> str:
    return os.path.basename(path)[:-len(".bundle.json")]


@pytest.fixture(scope="module")
def recorded() -> dict[str, Bundle]:
    """The recorded bundles, re-analyzed by this version of the code (as the app does)."""
    out = {}
    for p in FIXTURES:
        b = Bundle.load(p)
        out[_name(p)] = analyze(Bundle.from_json(b.to_json()))
    return out


def test_every_gallery_model_was_recorded_for_a_gpu_target(recorded):
    assert set(recorded) == set(gallery())
    for name, entry in gallery().items():
        # recorded from the model as it is now (else re-run scripts/record_gpu_target.py)
        assert recorded[name].source["code"] == entry.source, f"{name}: recording is stale"
    for name, b in recorded.items():
        env = b.environment
        assert env["platform"] == "gpu" and env["deviceless"] is True, name
        assert env["device_kind"] == "NVIDIA H200", name
        assert "compiled without one" in device_label(env)
        assert b.timings is None  # nothing was run


@pytest.mark.parametrize("stage", ["hlo_before", "hlo_after"])
@pytest.mark.parametrize("path", ALL, ids=_id)
def test_parser_matches_xla_parser_on_gpu_output(path, stage):
    pytest.importorskip("jaxlib._hlo")
    from tests.hlo.test_hlo_oracle import _compare

    text = Bundle.load(path).stages[stage]
    assert _compare(text) > 0


def _by_name(b: Bundle) -> dict:
    return {k.name: k for k in b.kernels}


def test_triton_kernels_carry_their_tiles(recorded):
    seen = 0
    for name, b in recorded.items():
        for k in b.kernels:
            if k.route == "triton":
                assert k.fusion_kind in TRITON_KINDS and k.library == "Triton", (name, k.name)
                tiles = (k.triton_config or {}).get("output_tiles")
                assert tiles and all(int(s) > 0 for t in tiles for s in t["sizes"]), (name, k.name)
                assert k.triton_config.get("num_warps", 0) >= 1
                seen += 1
    assert seen >= 20


def test_library_calls_are_named_and_costed(recorded):
    conv = [k for k in recorded["conv_bn_relu"].kernels if (k.custom_call_target or "").startswith("__cudnn$conv")]
    assert len(conv) == 1 and conv[0].route == "library" and conv[0].library == "cuDNN"
    # 2 * N*H*W*Cout * KH*KW*Cin, from the convolution's shapes
    assert conv[0].flops > 10_000_000
    fmha = [k for k in recorded["attention"].kernels if (k.custom_call_target or "").startswith("__cudnn$fmha")]
    assert len(fmha) == 1 and fmha[0].library == "cuDNN"
    # QK^T and PV: 2 * 2 * B*H*S*S*D for seq 256, head dim 64, 4 heads
    assert fmha[0].flops == 4 * 1 * 4 * 256 * 256 * 64


def _fused_by_xla(b) -> bool:
    """Whether a kernel of the compile is an emitter fusion of two or more ops (constants aside):
    work the fusion passes did, which fusion off undoes."""
    return any(k.route == "emitter" and sum(o not in ("parameter", "constant") for o in k.fused_opcodes) >= 2
               for k in b.kernels)


def test_fusion_off_gives_more_kernels_and_cublas(recorded):
    for name, b in recorded.items():
        fc = b.fusion_comparison
        assert fc and fc["platform"] == "gpu" and fc["measured"] is False, name
        if _fused_by_xla(b) or any(k.route == "triton" and k.fusion_kind == "__triton" for k in b.kernels):
            assert fc["unfused"]["kernels"] > fc["default"]["kernels"], name
        else:  # cnn_linen: cuDNN convolutions, a Triton GEMM and single ops: nothing for them to undo
            assert fc["unfused"]["kernels"] == fc["default"]["kernels"], name
    # with the Triton GEMM rewriter off too, mlp's two dots are cuBLAS calls
    mlp = recorded["mlp"].fusion_comparison
    if mlp["disabled_passes"] == list(FUSION_PASSES["gpu"]):  # fusion passes only: they stay Triton GEMMs
        off = Bundle.load(os.path.join(HERE, "mlp.fusion-triton-rewrites-off.bundle.json"))
        unfused = off.stages["hlo_after"]
        assert mlp["unfused_hlo_after"].count("\"kind\":\"__triton_nested_gemm_fusion\"") == 2
    else:
        unfused = mlp["unfused_hlo_after"]
    assert unfused.count("custom_call_target=\"__cublas$lt$matmul\"") == 2


def test_fusion_pass_list_names_passes_xla_gpu_runs():
    with open(os.path.join(HERE, "passes.json")) as f:
        dump = json.load(f)
    names = set(dump["all_passes_in_dump"])
    # the passes that fuse in this XLA are in the list and were in the dump
    for p in ("priority-fusion", "multi_output_fusion", "triton-gemm-rewriter", "triton-softmax-rewriter"):
        assert p in names and p in FUSION_PASSES["gpu"] + REWRITE_PASSES["gpu"], p
    # and the kernel count falls at the fusion pass
    changed = {e["pass"]: e for e in dump["changed"]}
    before = [e["kernels"] for e in dump["changed"]]
    assert changed["priority-fusion"]["kernels"] < max(before)


def test_dynamic_slice_fusions_in_a_loop_are_data_movement_not_a_library(recorded):
    ks = recorded["rnn_scan"].kernels
    assert any(k.route == "control" and k.opcode == "while" for k in ks)
    dyn = [k for k in ks if k.fusion_kind == "__custom_fusion"]
    assert dyn and all(k.route == "layout" and k.library is None for k in dyn)


def test_provenance_maps_at_least_90_percent(recorded):
    for name, b in recorded.items():
        assert b.provenance.mapped_fraction >= 0.9, (name, b.provenance.unmapped)


def test_lessons_hold_on_the_gpu_target(recorded):
    for name, b in recorded.items():
        les = lesson(b)
        assert les is not None, name
        assert [c.claim for c in les.checks if not c.holds] == [], name


def test_pass_log_recorded_for_mlp(recorded):
    log = recorded["mlp"].pass_log
    assert log and any(e["pass"] == "priority-fusion" for e in log)
    kernels = [e["kernels"] for e in log]
    assert kernels[-1] == len(recorded["mlp"].kernels) < max(kernels)


def test_graphs_show_library_and_triton_routes(recorded):
    b = recorded["transformer_block"]
    dot = post_graph(b.module("hlo_after"), b.kernels).to_dot()
    # each Triton fusion's box names its output tile and warps in words
    for k in b.kernels:
        if k.route == "triton":
            sizes = "×".join(str(s) for s in k.triton_config["output_tiles"][0]["sizes"])
            words = f"Triton · tile {sizes} · {k.triton_config['num_warps']} warp"
            mine = [ln for ln in dot.splitlines() if f'id="k:{k.name}"' in ln or f'id="f:{k.name}"' in ln]
            assert mine and any(words in ln for ln in mine), k.name
    assert pre_graph(b.module("hlo_before")).to_dot().count("->") > 50
    conv = recorded["conv_bn_relu"]
    assert "cuDNN" in post_graph(conv.module("hlo_after"), conv.kernels).to_dot()


def test_triton_kernels_are_not_counted_as_library_calls(recorded):
    from analysis.render.report import html_report
    from analysis.render.summary import summary_text

    b = recorded["transformer_block"]
    entry = b.stages["hlo_after"].split("\nENTRY", 1)[1]
    # the Triton kernels, counted in the text: fusions of the entry whose backend config names a
    # Triton kind (nested fusions live in other computations)
    n_triton = sum(1 for ln in entry.splitlines() if " fusion(" in ln and '"kind":"__triton' in ln)
    assert n_triton > 0 and "custom-call(" not in entry  # no library call in this compile
    tb = summary_text(b)
    assert f"Triton {n_triton}" in tb and "library calls" not in tb
    att = summary_text(recorded["attention"])
    assert "library calls           : cuDNN 1" in att
    html = html_report(recorded["attention"])
    assert "Triton 3, cuDNN 1" not in html and "cuDNN 1" in html


def test_presets_were_recorded_from_the_current_models_with_their_options():
    from analysis.options import presets
    from sample_models import preset_slug

    assert len(VARIANTS) == 2 * len(FIXTURES)
    for p in VARIANTS:
        b = Bundle.load(p)
        name, slug = _id(p).split(".")
        preset = next(k for k in presets("gpu") if preset_slug(k) == slug)
        assert b.options["compiler_options"] == presets("gpu")[preset], p
        assert b.source["code"] == gallery()[name].source, f"{p}: recording is stale"
        assert b.environment["gpu_target"] == "h200" and b.environment["deviceless"]


def test_triton_gemm_off_hands_the_matmuls_and_their_epilogue_to_cublas(recorded):
    off = analyze(Bundle.load(os.path.join(HERE, "mlp.triton-gemm-off.bundle.json")))
    assert [(k.route, k.library, k.custom_call_target) for k in off.kernels] == \
        [("library", "cuBLAS", "__cublas$lt$matmul")] * 2
    # dense1's bias add and ReLU are computed by its cuBLAS call (epilogue BIAS_RELU), which keeps
    # only the dot's metadata: provenance maps them to that call by name scope
    from sample_models.lessons import kernels_of, pre_ops

    first = next(k for k in off.kernels if any("dense1" in n for n in k.op_names))
    assert '"epilogue":"BIAS_RELU"' in off.module("hlo_after").by_name[first.computation].by_name[first.name].attributes["backend_config"]
    for opcode in ("add", "maximum"):
        ops = pre_ops(off, opcode, scope="dense1")
        assert ops and kernels_of(off, ops) == {first.name}, opcode
    relu = pre_ops(off, "maximum", scope="dense1")
    # the ReLU (inside jax.nn.relu's nested jit) reads the bias add through its call: the operand
    # that the cuBLAS call computes, so it is that call's epilogue, fused into it
    assert {off.provenance.how[n] for n in relu} == {"epilogue"}
    assert first.epilogue == ("bias", "ReLU") and off.metrics["fusion_coverage"] > 0
    assert off.provenance.mapped_fraction == 1.0
    # and the default compile made the same matmuls with Triton
    assert {k.route for k in recorded["mlp"].kernels} == {"triton", "emitter"}


def test_fusion_disabled_recording_matches_the_default_recordings_comparison(recorded):
    # recordings made before the comparison turned off the fusion passes only turned off the
    # Triton rewrites too: their comparison is the "Fusion + Triton rewrites off" preset's compile;
    # a newer one (fusion passes only) keeps the Triton fusions, so it has no more kernels than that
    from analysis.options import presets

    both = presets("gpu")["Fusion + Triton rewrites off"]["xla_disable_hlo_passes"].split(",")
    for name, b in recorded.items():
        off = Bundle.load(os.path.join(HERE, f"{name}.fusion-triton-rewrites-off.bundle.json"))
        launching = [k for k in analyze(off).kernels if k.route != "control"]  # as the comparison counts
        fc = b.fusion_comparison
        if fc["disabled_passes"] == both:
            assert len(launching) == fc["unfused"]["kernels"], name
        else:
            assert fc["disabled_passes"] == list(FUSION_PASSES["gpu"]), name
            assert fc["default"]["kernels"] <= fc["unfused"]["kernels"] <= len(launching), name


def _tensor_parallel() -> tuple[str, str]:
    def read(stage):
        with open(os.path.join(HERE, f"tensor_parallel_2gpu.{stage}.hlo")) as f:
            return f.read()

    return read("before"), read("after")


@pytest.mark.parametrize("stage", [0, 1], ids=["before", "after"])
def test_parser_matches_xla_parser_on_a_two_gpu_program(stage):
    # mesh-style replica groups (replica_groups=mesh['axis_0'=1,'axis_1'=2] {'axis_1'}),
    # async all-reduce, sharding annotations
    pytest.importorskip("jaxlib._hlo")
    from tests.hlo.test_hlo_oracle import _compare

    assert _compare(_tensor_parallel()[stage]) > 0


def test_the_all_reduce_of_a_tensor_parallel_mlp_is_a_collective_kernel():
    from analysis.bundle.core import bundle_from_hlo

    before, after = _tensor_parallel()
    b = bundle_from_hlo(after, "tensor_parallel_2gpu", before_text=before)
    assert b.platform == "gpu"
    coll = [k for k in b.kernels if k.route == "collective"]
    # one all-reduce, launched by its start; the done launches nothing
    assert [k.opcode for k in coll] == ["all-reduce-start"]
    assert coll[0].bytes == 2 * 128 * 256 * 4  # this device's partial sums in, the sum out
    assert "all-reduce-done" not in {k.opcode for k in b.kernels}
    # the second matmul's partial sums are what it reduces: provenance maps the dot there too
    assert coll[0].name in {kn for kns in b.provenance.pre_to_kernels.values() for kn in kns}
    assert b.provenance.mapped_fraction >= 0.9
    dot = post_graph(b.module("hlo_after"), b.kernels).to_dot()
    assert 'id="k:all-reduce-start"' in dot


def test_traffic_that_fusion_added_is_called_added_and_explained(recorded):
    # untuned split-K on the H200 makes mlp's kernels move more than its ops would unfused; the
    # real fusion-off compile splits its dots too, so against it fusion saves bytes
    from analysis.render.report import html_report
    from analysis.render.summary import summary_text

    b = recorded["mlp"]
    assert b.metrics["bytes_saved"] < 0
    text = summary_text(b)
    line = text.split("memory traffic")[1].splitlines()[0]
    # one headline for the program, against every op its own kernel, with or without the
    # fusion-off compile; against that compile fusion saves bytes, said as a second, named number
    assert " added (+" in line and "vs every op its own kernel" in line and "saved" not in line
    fc = b.fusion_comparison
    assert fc["unfused"]["bytes"] > fc["default"]["bytes"]
    assert " less (" in text.split("bytes moved by kernels (from shapes)")[1].splitlines()[0]
    b = dataclasses.replace(b, fusion_comparison=None)  # no fusion-off compile: the same headline
    text = summary_text(b)
    assert text.split("memory traffic")[1].splitlines()[0] == line
    assert "estimated" in line
    why = text.split("why more bytes")[1].splitlines()[0]
    assert "XLA split 2 dots (dot_general.2 into 2 kernels" in why and "partial sums" in why
    html = html_report(b)
    assert "Memory traffic added" in html and "--" not in html.split("Memory traffic added")[1][:300]
    assert "XLA split 2 dots" in html




def test_dense_relu_is_one_kernel_by_default_and_one_cublaslt_call_without_triton_gemms(recorded):
    """The gallery's matmul + bias + ReLU (1024 rows, f32): XLA:GPU for the H200 target, default
    options, makes it one Triton GEMM kernel holding the dot, the add and the maximum; with Triton
    GEMMs off, one cuBLASLt call whose BIAS_RELU epilogue does the add and the ReLU."""
    from sample_models.lessons import kernels_of, pre_ops

    b = recorded["dense_relu"]
    (k,) = [k for k in b.kernels if k.route != "control"]
    assert k.route == "triton" and {"dot", "add", "maximum"} <= set(k.fused_opcodes)
    for opcode in ("dot", "add", "maximum"):
        assert kernels_of(b, pre_ops(b, opcode, scope="dense")) == {k.name}, opcode
    assert b.metrics["fusion_coverage"] == 1.0
    off = analyze(Bundle.load(os.path.join(HERE, "dense_relu.triton-gemm-off.bundle.json")))
    (lt,) = off.kernels
    assert lt.custom_call_target == "__cublas$lt$matmul" and lt.epilogue == ("bias", "ReLU")
    assert off.metrics["fusion_coverage"] == 1.0
    assert {off.provenance.how[n] for n in pre_ops(off, "maximum", scope="dense")} == {"epilogue"}
    assert "one kernel" in lesson(b).text and "bias + ReLU epilogue" in lesson(off).text
