"""The rules of the house, checked on the packages (not on a list of files):

- only ``analysis/compile/`` and the worker process (``analysis/service/worker_main.py``) import
  JAX, anywhere in the file;
- ``analysis/hlo/`` imports nothing of ours outside itself;
- nothing under ``analysis/`` imports Streamlit;
- ``analysis/service/`` and ``analysis/compile/`` never import ``analysis/render/``; the core
  (the modules at the top of ``analysis/``) imports neither ``compile``, ``service`` nor ``render``;
- the gallery (``sample_models``: the model files and their registry) imports nothing of ours
  but ``analysis.errors``, so any layer may read it; its lessons (``sample_models.lessons``,
  claims checked on a bundle) read bundles like a view: the core, ``hlo`` and ``render``;
- the app, the viewer's modules and the service's parent side load no JAX when imported.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ANALYSIS = os.path.join(ROOT, "analysis")


def _modules() -> dict[str, str]:
    """Every module under analysis/, app/, sample_models/ and xla_explorer/ by dotted name -> its path."""
    out = {}
    for top in ("analysis", "app", "sample_models", "xla_explorer"):
        for dirpath, _dirs, files in os.walk(os.path.join(ROOT, top)):
            for f in files:
                if f.endswith(".py"):
                    rel = os.path.relpath(os.path.join(dirpath, f), ROOT)[:-3].replace(os.sep, ".")
                    out[rel.removesuffix(".__init__")] = os.path.join(dirpath, f)
    return out


def _imports(path: str) -> set[str]:
    """Every module a file imports, at the top or inside a function."""
    tree = ast.parse(open(path).read())
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found |= {f"{node.module}.{a.name}" for a in node.names}
    return found


MODULES = _modules()
IMPORTS = {name: _imports(path) for name, path in MODULES.items()}


def _layer(name: str) -> str:
    parts = name.split(".")
    if parts[0] == "sample_models":
        return "lessons" if name in ("sample_models.lessons", "sample_models.lessons_devices") else "gallery"
    if parts[0] != "analysis":
        return parts[0]
    if len(parts) > 1 and parts[1] in ("hlo", "compile", "service", "render", "inputs"):
        return parts[1]
    return "cli" if name == "analysis.cli" else "core"


def _ours(imported: set[str]) -> set[str]:
    return {m for m in imported if m.split(".")[0] in ("analysis", "app", "sample_models", "xla_explorer")}


def test_every_layer_exists():
    assert {_layer(n) for n in MODULES} >= {"hlo", "core", "compile", "service", "render", "cli", "app", "gallery",
                                            "lessons", "inputs"}


def test_the_notebook_front_end_and_the_app_never_import_each_other():
    for name in MODULES:
        layer = _layer(name)
        if layer in ("xla_explorer", "app"):
            other = "app" if layer == "xla_explorer" else "xla_explorer"
            assert not {m for m in _ours(IMPORTS[name]) if m.split(".")[0] == other}, name


def test_only_compile_and_the_worker_process_import_jax():
    from sample_models import gallery

    models = {f"sample_models.{n}" for n in gallery()}  # the gallery's model files are programs, not ours to layer
    importers = {n for n, imps in IMPORTS.items()
                 if n not in models and any(m.split(".")[0] in ("jax", "jaxlib") for m in imps)}
    allowed = {n for n in MODULES if _layer(n) == "compile"} | {"analysis.service.worker_main"}
    assert importers, "nothing imports JAX: the check is looking at the wrong files"
    assert importers <= allowed, f"JAX imported outside analysis/compile: {sorted(importers - allowed)}"


def test_the_gallery_imports_nothing_of_ours_but_the_errors():
    for name in MODULES:
        if _layer(name) == "gallery":
            outside = {m for m in _ours(IMPORTS[name]) if not m.startswith(("sample_models", "analysis.errors"))}
            assert not outside, f"{name} imports {sorted(outside)}"


def test_hlo_imports_nothing_of_ours_outside_itself():
    for name in MODULES:
        if _layer(name) == "hlo":
            outside = {m for m in _ours(IMPORTS[name]) if not m.startswith("analysis.hlo")}
            assert not outside, f"{name} imports {sorted(outside)}"


def test_analysis_never_imports_streamlit():
    for name, imps in IMPORTS.items():
        if name.startswith("analysis"):
            assert not any(m.split(".")[0] == "streamlit" for m in imps), name


def test_imports_point_down():
    forbidden = {"render": ("compile", "service", "cli", "app", "inputs"),
                 "hlo": ("core", "compile", "service", "render", "cli", "app", "gallery", "lessons", "inputs"),
                 "app": ("compile", "inputs"), "lessons": ("compile", "service", "cli", "app", "inputs"),
                 "core": ("compile", "service", "render", "cli", "app", "lessons", "inputs"),
                 "inputs": ("compile", "service", "render", "cli", "app", "lessons"),
                 "compile": ("service", "render", "cli", "app", "lessons", "inputs"),
                 "service": ("render", "cli", "app", "lessons")}
    bad = []
    for name, imps in IMPORTS.items():
        for m in _ours(imps):
            target = _layer(m) if m in MODULES or m.rsplit(".", 1)[0] in MODULES else None
            if target is None:
                continue
            if target in forbidden.get(_layer(name), ()):
                bad.append(f"{name} ({_layer(name)}) -> {m} ({target})")
    assert not bad, "\n".join(bad)


def _loaded_after_import(modules: list[str]) -> set[str]:
    code = ("import sys, json\n"
            f"for m in {modules!r}:\n    __import__(m)\n"
            "print(json.dumps(sorted(k.split('.')[0] for k in sys.modules)))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    return set(json.loads(out.stdout.strip().splitlines()[-1]))


VIEWER = sorted(n for n in MODULES if _layer(n) in ("hlo", "core", "render", "cli")
                or n in ("analysis.service.queue", "analysis.service.worker", "analysis.service.store",
                         "analysis.service.sandbox", "analysis.service.settings", "analysis.service.job",
                         "app.views", "app.kernels_view", "app.runner", "app.page_helpers",
                         "sample_models", "sample_models.lessons"))


def test_the_viewer_and_the_service_parent_load_no_jax():
    loaded = _loaded_after_import(VIEWER)
    assert "analysis" in loaded
    assert "jax" not in loaded and "jaxlib" not in loaded


def test_the_parser_is_pure_python():
    loaded = _loaded_after_import(["analysis.hlo"])
    assert not loaded & {"jax", "jaxlib", "numpy", "streamlit", "plotly"}


# The readers of the bytes a user hands over (a dump's files, a trace, an object file): they run
# in the sandboxed worker behind the gate (analysis.inputs), never in the app's server. (The
# fusion log's module is also the decisions' vocabulary, which the views use: not listed.)
READERS = ("analysis.inputs", "analysis.dump", "analysis.trace_import", "analysis.xplane", "analysis.code_read",
           "analysis.code_gpu_read", "analysis.disassemble", "analysis.fusion_dump", "analysis.compile.hlo_proto")
SERVER = [n for n in MODULES if _layer(n) == "app"] + [
    "analysis.service.queue", "analysis.service.worker", "analysis.service.worker_process",
    "analysis.service.ray_engine", "analysis.service.store", "analysis.service.cache_keys"]


def test_the_server_imports_no_reader_of_a_users_bytes():
    bad = [f"{n} -> {m}" for n in SERVER for m in _ours(IMPORTS[n]) if m.startswith(READERS)]
    assert not bad, "\n".join(bad)
    loaded = _loaded_after_import_names(["app.uploads", "app.runner", "analysis.service.queue"])
    assert not loaded & set(READERS), sorted(loaded & set(READERS))


def _loaded_after_import_names(modules: list[str]) -> set[str]:
    code = ("import sys, json\n"
            f"for m in {modules!r}:\n    __import__(m)\n"
            "print(json.dumps(sorted(sys.modules)))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    return set(json.loads(out.stdout.strip().splitlines()[-1]))
