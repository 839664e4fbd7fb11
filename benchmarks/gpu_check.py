"""GPU check: every gallery model compiled, measured and compared with fusion off on a GPU.

    python benchmarks/gpu_check.py [OUT_DIR] [--iters N] [--models a,b]

OUT_DIR defaults to $OUT, else benchmarks/out/gpu_check. Writes there:

- ``<model>.bundle.json``: the measured bundle (timings + fusion_comparison), viewable anywhere;
- ``fusion_passes.json``: which of ``analysis.compile.measure.FUSION_PASSES['gpu']`` ran and changed
  the module in a real pass dump, and every pass name with "fusion" in it (to correct the list);
- ``report.json`` and ``report.txt``: the checks below, per model;
- ``users_trace/dump.zip`` and ``users_trace/trace.zip``: a small program compiled with an XLA
  dump and run three times under ``jax.profiler.trace``, as a user would on their GPU: the first
  real GPU trace for ``analysis/inputs/traces.py`` (commit them under ``tests/fixtures/gpu/``).

Checks (exit status 1 if one fails; 2 if there is no GPU at all):

- every library (cuBLAS, cuDNN, ...) and Triton kernel of the optimized module that ran has a
  time, and was classified (route library/triton, a library name);
- the attributed kernels cover >= 80% of the device-busy time (command buffers are off for
  the measured executable, so every kernel is its own event);
- kernel_details (grid, block, registers, ...) were read for the timed kernels;
- fusion off gives more kernels than the default compile;
- every claim of the model's lesson (``sample_models/lessons.py``) holds on this GPU;
- the user's trace: its kernel times land on the dump's kernels (>= 90% of the launches), and the
  trace alone opens the same module from the HLO it carries, with the same kernels timed;
- and, not a check: kernels per route/library of this autotuned compile next to the recorded
  untuned H200 compile made without a device (``sample_models/recorded/h200``).

When a GPU session records them, commit the bundles under ``tests/fixtures/gpu/`` together
with a test of their own that re-analyzes them on any machine (GPU parsing, classification,
attribution of the measured kernels, the lessons' claims): no such test is kept while there
are no bundles (the GPU paths are tested meanwhile on the recorded H200 compiles, in
``tests/scenarios/test_gpu_target.py``).

Sized to finish in a few minutes on one GPU (small iteration counts).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import traceback

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)


def need_gpu():
    import jax

    try:
        devs = jax.devices("gpu")
    except RuntimeError as e:
        first = (str(e).strip().splitlines() or [""])[0]
        print(f"gpu_check: no GPU backend here ({first}). This check needs a CUDA GPU and "
              f"jax with CUDA (pip install 'jax[cuda12]' or 'jax[cuda13]').", file=sys.stderr)
        sys.exit(2)
    if not devs:
        print("gpu_check: jax reports no GPU devices.", file=sys.stderr)
        sys.exit(2)
    return devs[0]


def pass_dump(out_dir: str) -> dict:
    """Compile mlp with a pass dump and list the pass names found in the dump file names."""
    import re

    import jax

    from analysis.compile.load import load_gallery
    from analysis.options import FUSION_PASSES

    loaded = load_gallery("mlp")
    with tempfile.TemporaryDirectory() as d:
        jax.jit(loaded.model).lower(*loaded.inputs).compile(
            compiler_options={"xla_dump_to": d, "xla_dump_hlo_pass_re": ".*"})
        names = set()
        for f in os.listdir(d):
            for m in re.finditer(r"\.(?:after|before)_([A-Za-z0-9_\-]+)", f):
                names.add(m.group(1))
    listed = FUSION_PASSES["gpu"]
    res = {"listed": list(listed), "found_in_dump": sorted(p for p in listed if p in names),
           "not_found": sorted(p for p in listed if p not in names),
           "fusion_like_in_dump": sorted(n for n in names if "fus" in n.lower()),
           "all_passes_in_dump": sorted(names)}
    with open(os.path.join(out_dir, "fusion_passes.json"), "w") as f:
        json.dump(res, f, indent=1)
    return res


def _versus_recorded(b, name: str) -> dict | None:
    """What the device compile (autotuned) chose next to the recorded compile for an H200 made
    without a device (untuned, ``sample_models/recorded/h200``): kernels per route and library."""
    from collections import Counter

    from analysis.bundle.core import Bundle, reanalyze
    from sample_models import recorded_bundle_path

    path = recorded_bundle_path(name, "h200")
    if path is None:
        return None
    rec = Bundle.load(str(path))
    reanalyze(rec)

    def routes(x):
        return dict(Counter(f"{k.route}:{k.library}" if k.library else k.route for k in x.kernels))

    return {"device": routes(b), "recorded_untuned": routes(rec),
            "kernels": [len(b.kernels), len(rec.kernels)]}


def check_model(name: str, iters: int, out_dir: str) -> dict:
    from analysis.compile.fusion_off import compare_fusion
    from analysis.compile.load import load_gallery
    from analysis.compile.measure import measure
    from analysis.compile.stages import compile_model

    t0 = time.perf_counter()
    c = compile_model(load_gallery(name), "gpu", source_kind="gallery")
    measure(c, iterations=iters)
    compare_fusion(c, measure_it=True, iterations=iters)
    b = c.bundle
    b.save(os.path.join(out_dir, f"{name}.bundle.json"))
    t = b.timings
    rows = t["kernels"]
    problems = []
    special = [k for k in b.kernels if k.route in ("library", "triton")]
    for k in special:
        if not k.library:
            problems.append(f"{k.name}: route {k.route} without a library name")
        r = rows.get(k.name)
        if r is None and k.name not in t["not_run"]:
            problems.append(f"{k.name}: {k.route} kernel missing from the timings")
        elif r is not None and not r["median_s"] > 0:
            problems.append(f"{k.name}: {k.route} kernel has no time")
    if not t["measured_compile"]["same_hlo_as_bundle"]:
        # Rows then come from the measured compile; say so, it is not a failure.
        pass
    if t["attributed_fraction"] < 0.8:
        problems.append(f"attributed only {t['attributed_fraction']:.0%} of the busy time: {t['coverage_note']}")
    timed = [r for r in rows.values() if not r["inclusive"]]
    if timed and not any(r.get("kernel_details") for r in timed):
        problems.append("no kernel_details on any timed kernel")
    fc = b.fusion_comparison
    if not fc["unfused"]["kernels"] > fc["default"]["kernels"]:
        problems.append(f"fusion off has {fc['unfused']['kernels']} kernels, default {fc['default']['kernels']}")
    from sample_models.lessons import lesson

    les = lesson(b)
    for c in (les.checks if les else []):
        if not c.holds:
            problems.append(f"lesson claim does not hold on this GPU: {c.claim}")
    by_lib: dict[str, int] = {}
    for k in special:
        by_lib[k.library or k.route] = by_lib.get(k.library or k.route, 0) + 1
    return {
        "versus_recorded_untuned": _versus_recorded(b, name),
        "model": name, "ok": not problems, "problems": problems, "seconds": round(time.perf_counter() - t0, 1),
        "device_kind": b.environment.get("device_kind"), "jax": b.environment.get("jax"),
        "kernels": len(b.kernels), "library_or_triton": by_lib,
        "iterations": t["iterations"], "step_median_s": t["step_median_s"], "call_median_s": t["call_median_s"], "device_busy_s": t["device_busy_s"],
        "attributed_fraction": t["attributed_fraction"],
        "unattributed": t["unattributed"], "same_hlo_as_bundle": t["measured_compile"]["same_hlo_as_bundle"],
        "top": [{"name": r["name"], "route": r["route"], "library": r["library"], "median_us": r["median_s"] * 1e6,
                 "calls": r["calls"], "pct_of_peak": r["pct_of_peak"],
                 "kernel_names": sorted(r["kernel_details"] or {})[:3]}
                for r in sorted(timed, key=lambda r: -r["median_s"])[:8]],
        "fusion": {"default_kernels": fc["default"]["kernels"], "unfused_kernels": fc["unfused"]["kernels"],
                   "speedup": fc["speedup"]},
    }


def users_trace(out_dir: str) -> dict:
    """What a user brings from their own GPU: a dump and a profiler trace of one program, read
    the two ways the explorer reads them (dump + trace; the trace alone)."""
    import shutil
    import zipfile

    import jax
    import jax.numpy as jnp

    from analysis.cli import open_input
    from analysis.program.kernels import launching

    def mlp(x, w1, w2):
        return jax.nn.softmax(jnp.tanh(x @ w1 + 1.0) @ w2, axis=-1)

    here = os.path.join(out_dir, "users_trace")
    shutil.rmtree(here, ignore_errors=True)
    os.makedirs(here)
    k = jax.random.split(jax.random.PRNGKey(0), 3)
    args = (jax.random.normal(k[0], (256, 512)), jax.random.normal(k[1], (512, 1024)),
            jax.random.normal(k[2], (1024, 256)))
    work = tempfile.mkdtemp()
    dump, trace = os.path.join(work, "dump"), os.path.join(work, "trace")
    compiled = jax.jit(mlp).lower(*args).compile(compiler_options={"xla_dump_to": dump, "xla_dump_emitter_re": "llvm"})
    jax.block_until_ready(compiled(*args))
    with jax.profiler.trace(trace):
        for _ in range(3):
            jax.block_until_ready(compiled(*args))
    zips = {}
    for name, folder in (("dump", dump), ("trace", trace)):
        zips[name] = os.path.join(here, f"{name}.zip")
        with zipfile.ZipFile(zips[name], "w", zipfile.ZIP_DEFLATED) as z:
            for d, _, files in os.walk(folder):
                for f in files:
                    z.write(os.path.join(d, f), os.path.relpath(os.path.join(d, f), folder))
    out, problems = {}, []
    for way in ("dump_and_trace", "trace_alone"):
        try:
            if way == "dump_and_trace":  # both through the gate, as a user's files are
                b = open_input(zips["dump"], "jit_mlp", trusted=True, trace=zips["trace"])
            else:
                b = open_input(zips["trace"], trusted=True)
        except Exception as e:  # noqa: BLE001 - say it, go on
            problems.append(f"{way}: {type(e).__name__}: {e}")
            continue
        t = b.timings
        launch = {x.name for x in launching(b.kernels)}
        timed = {n for n, r in t["kernels"].items() if r.get("route") != "unknown"}
        out[way] = {"kernels": len(launch), "timed": len(timed & launch), "device": t.get("trace_device"),
                    "steps": t.get("steps_seen"), "matched_fraction": t.get("matched_fraction"),
                    "peaks": (t.get("peaks") or {}).get("matched"), "step_median_s": t.get("step_median_s")}
        if len(timed & launch) < 0.9 * max(1, len(launch)):
            problems.append(f"{way}: {len(timed & launch)} of {len(launch)} launches timed")
    if len(out) == 2 and out["dump_and_trace"]["kernels"] != out["trace_alone"]["kernels"]:
        problems.append("the trace's own HLO has another kernel count than the dump's")
    shutil.rmtree(work, ignore_errors=True)
    return {"ok": not problems, "problems": problems, **out}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out", nargs="?", default=os.environ.get("OUT") or os.path.join(ROOT, "benchmarks", "out", "gpu_check"))
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--models", default="", help="comma-separated gallery names (default: all)")
    args = ap.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    os.environ.setdefault("XLA_EXPLORER_DATA", os.path.join(args.out, "data"))

    dev = need_gpu()
    print(f"gpu_check: {dev.device_kind} -> {args.out}", flush=True)
    from sample_models import gallery

    names = [n for n in args.models.split(",") if n] or list(gallery())
    results = []
    try:
        passes = pass_dump(args.out)
        print(f"fusion passes found in the dump: {passes['found_in_dump']}; not found: {passes['not_found']}; "
              f"fusion-like passes in the dump: {passes['fusion_like_in_dump']}", flush=True)
    except Exception as e:  # noqa: BLE001 - report and go on with the models
        passes = {"error": f"{type(e).__name__}: {e}"}
        print(f"pass dump failed: {passes['error']}", flush=True)
    for name in names:
        try:
            r = check_model(name, args.iters, args.out)
        except Exception as e:  # noqa: BLE001 - one model's failure must not hide the others
            r = {"model": name, "ok": False, "problems": [f"{type(e).__name__}: {e}"],
                 "traceback": traceback.format_exc()[-4000:]}
        results.append(r)
        status = "ok" if r["ok"] else "FAIL"
        print(f"[{status}] {name}: " + ("; ".join(r["problems"]) if r["problems"] else
                                        f"{r['kernels']} kernels, step {r['step_median_s'] * 1e6:.1f} µs, "
                                        f"attributed {r['attributed_fraction']:.0%}, {r['library_or_triton']}"),
              flush=True)
    try:
        traced = users_trace(args.out)
    except Exception as e:  # noqa: BLE001 - report it with the models
        traced = {"ok": False, "problems": [f"{type(e).__name__}: {e}"], "traceback": traceback.format_exc()[-4000:]}
    print(f"[{'ok' if traced['ok'] else 'FAIL'}] a user's trace: " + ("; ".join(traced["problems"]) or json.dumps(
        {k: v for k, v in traced.items() if k not in ("ok", "problems")}, default=str)), flush=True)
    ok = all(r["ok"] for r in results) and bool(results) and traced["ok"]
    report = {"ok": ok, "device_kind": dev.device_kind, "passes": passes, "models": results, "users_trace": traced}
    with open(os.path.join(args.out, "report.json"), "w") as f:
        json.dump(report, f, indent=1, default=str)
    with open(os.path.join(args.out, "report.txt"), "w") as f:
        for r in results:
            f.write(json.dumps(r, default=str) + "\n")
    print("gpu_check: " + ("all checks passed" if ok else "some checks FAILED"), flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
