"""The rules of the house, checked on the packages (not on a list of files):

- ``analysis/`` is concept packages over a ground floor, each importing only the ones below it
  (``CORE``, in order; ``analysis/__init__.py`` lists them): ``compile`` and ``service`` stand on
  all of them, ``render`` on all but the gate (``inputs``), the CLI on everything;
- only ``analysis/compile/`` and the worker process (``analysis/service/worker_main.py``) import
  JAX, anywhere in the file;
- ``analysis/hlo/`` imports nothing of ours outside itself;
- nothing under ``analysis/`` imports Streamlit;
- the gallery (``sample_models``: the model files and their registry) imports nothing of ours
  but ``analysis.errors``, so any layer may read it; its lessons (``sample_models.lessons``,
  claims checked on a bundle) read bundles like a view;
- the app, the viewer's modules and the service's parent side load no JAX when imported;
- no import cycle, counting the imports inside functions; no private name (``_x``) of one module
  used by another; no module named like the standard library; no symlink; ``analysis/``'s root
  holds at most twelve modules.
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


# The ground floor: modules every package may import (they import only each other).
GROUND = {"analysis", "analysis.errors", "analysis.linear_re", "analysis.columns", "analysis.measures",
          "analysis.text_search", "analysis.tuning"}
# analysis/'s layers from the ground up: each imports only itself and the ones before it.
CORE = ["ground", "hlo", "codegen", "program", "timing", "devices", "options", "fusion", "bundle", "inputs",
        "studies", "pipeline"]
LESSONS = ("sample_models.lessons", "sample_models.lessons_devices", "sample_models.lesson_kit",
           "sample_models.lessons_versions", "sample_models.lessons_torch")


def _layer(name: str) -> str:
    parts = name.split(".")
    if parts[0] == "sample_models":
        return "lessons" if name in LESSONS else "gallery"
    if parts[0] != "analysis":
        return parts[0]
    return "ground" if name in GROUND else parts[1]


def _may_import() -> dict[str, set[str]]:
    """Each layer -> the layers it may import."""
    may = {layer: set(CORE[:i + 1]) for i, layer in enumerate(CORE)}
    may["compile"] = set(CORE) | {"compile"}
    may["service"] = set(CORE) | {"compile", "service"}
    may["render"] = set(CORE) - {"inputs"} | {"render"}
    may["cli"] = set(CORE) | {"compile", "service", "render", "cli"}
    may["lessons"] = set(CORE) - {"inputs"} | {"render", "lessons", "gallery"}
    may["gallery"] = {"ground", "gallery"}
    may["app"] = set(CORE) - {"inputs"} | {"service", "render", "app", "lessons", "gallery"}
    may["xla_explorer"] = set(CORE) | {"compile", "service", "render", "cli", "lessons", "gallery", "xla_explorer"}
    for layer in set(may) - {"ground", "hlo"}:  # the gallery imports only the errors: any layer above may read it
        may[layer].add("gallery")
    return may


MAY_IMPORT = _may_import()


def _ours(imported: set[str]) -> set[str]:
    return {m for m in imported if m.split(".")[0] in ("analysis", "app", "sample_models", "xla_explorer")}


def test_every_module_has_a_place():
    """A new module of analysis/'s root, or a new package, must be given a place in the order."""
    unplaced = sorted(n for n in MODULES if _layer(n) not in MAY_IMPORT)
    assert not unplaced, f"not in tests/test_layering.py's order: {unplaced}"
    empty = sorted(set(MAY_IMPORT) - {_layer(n) for n in MODULES})
    assert not empty, f"layers with no module (the check is looking at the wrong files?): {empty}"


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
    bad = []
    for name, imps in IMPORTS.items():
        for m in _ours(imps):
            target = m if m in MODULES else m.rsplit(".", 1)[0]
            if target not in MODULES:
                continue
            if _layer(target) not in MAY_IMPORT[_layer(name)]:
                bad.append(f"{name} ({_layer(name)}) -> {target} ({_layer(target)})")
    assert not bad, "\n".join(bad)


def _loaded_after_import(modules: list[str]) -> set[str]:
    code = ("import sys, json\n"
            f"for m in {modules!r}:\n    __import__(m)\n"
            "print(json.dumps(sorted(k.split('.')[0] for k in sys.modules)))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    return set(json.loads(out.stdout.strip().splitlines()[-1]))


VIEWER = sorted(n for n in MODULES if _layer(n) in set(CORE) - {"inputs"} | {"render", "cli"}
                or n in ("analysis.service.job_queue", "analysis.service.worker", "analysis.service.store",
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
READERS = ("analysis.inputs", "analysis.inputs.dump", "analysis.inputs.traces", "analysis.timing.xplane", "analysis.codegen.cpu_read",
           "analysis.codegen.gpu_read", "analysis.codegen.disassemble", "analysis.fusion.gpu_dump", "analysis.compile.hlo_proto")
SERVER = [n for n in MODULES if _layer(n) == "app"] + [
    "analysis.service.job_queue", "analysis.service.worker", "analysis.service.worker_process",
    "analysis.service.ray_engine", "analysis.service.store", "analysis.service.cache_keys"]


def test_the_server_imports_no_reader_of_a_users_bytes():
    bad = [f"{n} -> {m}" for n in SERVER for m in _ours(IMPORTS[n]) if m.startswith(READERS)]
    assert not bad, "\n".join(bad)
    loaded = _loaded_after_import_names(["app.uploads", "app.runner", "analysis.service.job_queue"])
    assert not loaded & set(READERS), sorted(loaded & set(READERS))


def _loaded_after_import_names(modules: list[str]) -> set[str]:
    code = ("import sys, json\n"
            f"for m in {modules!r}:\n    __import__(m)\n"
            "print(json.dumps(sorted(sys.modules)))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    return set(json.loads(out.stdout.strip().splitlines()[-1]))


def _target(m: str) -> str | None:
    """The module of ours an import names (``a.b.name`` -> ``a.b``), or None."""
    while m and m not in MODULES:
        m = m.rpartition(".")[0]
    return m or None


def test_no_import_cycles():
    """Counting the imports inside functions too: a cycle held open by a late import is a cycle."""
    graph = {n: {t for m in _ours(IMPORTS[n]) if (t := _target(m)) and t != n} for n in MODULES}
    for n in list(graph):  # importing a.b.c runs a/__init__ and a/b/__init__ first: those are not edges
        graph[n] = {t for t in graph[n] if not n.startswith(t + ".")}
    index, low, stack, on, cycles = {}, {}, [], set(), []

    def visit(v):  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                cycles.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    assert not cycles, cycles


def _private_uses(path: str) -> list[str]:
    """``_name``s of our modules that ``path`` uses: imported by name, read from an imported
    module, or patched by name with ``setattr``."""
    tree = ast.parse(open(path).read())
    modules, found = {}, []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0 and _ours({node.module}):
            for a in node.names:
                if a.name.startswith("_") and not a.name.startswith("__"):
                    found.append(f"{node.module}.{a.name}")
                elif f"{node.module}.{a.name}" in MODULES:
                    modules[a.asname or a.name] = f"{node.module}.{a.name}"
        elif isinstance(node, ast.Import):
            for a in node.names:
                if _ours({a.name}):
                    modules[a.asname or a.name.split(".")[0]] = a.name
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in modules
                and node.attr.startswith("_") and not node.attr.startswith("__")):
            found.append(f"{modules[node.value.id]}.{node.attr}")
        if (isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "setattr" and len(node.args) >= 2
                and isinstance(node.args[0], ast.Name) and node.args[0].id in modules
                and isinstance(node.args[1], ast.Constant) and str(node.args[1].value).startswith("_")):
            found.append(f"{modules[node.args[0].id]}.{node.args[1].value}")
    return found


def _python_files(*tops: str) -> list[str]:
    out = []
    for top in tops:
        for dirpath, _dirs, files in os.walk(os.path.join(ROOT, top)):
            out += [os.path.join(dirpath, f) for f in files if f.endswith(".py")]
    return out


def test_no_private_name_is_used_outside_its_module():
    """What one module needs of another is public; the tests, the benchmarks and the scripts
    read modules as their other users do."""
    bad = [f"{os.path.relpath(p, ROOT)}: {u}"
           for p in _python_files("analysis", "app", "sample_models", "xla_explorer", "tests", "benchmarks", "scripts")
           for u in _private_uses(p)]
    assert not bad, "\n".join(bad)


def test_no_module_is_named_like_the_standard_library():
    """``import code`` inside the package would mean ours; outside, the standard library's."""
    clash = sorted(n for n in MODULES if n.rpartition(".")[2] in sys.stdlib_module_names)
    assert not clash, clash


def test_analysis_root_holds_few_modules():
    """The ground floor and the few modules that join packages (options, pipeline, the CLI):
    a concept with modules of its own is a package."""
    root = sorted(f for f in os.listdir(ANALYSIS) if f.endswith(".py") and f != "__init__.py")
    assert len(root) <= 12, root


def test_the_tree_holds_no_symlink():
    """A file one front end shares with another is one real file (the report inlines the
    component's assets), never a link that hides a dependency from the import checks."""
    links = [os.path.relpath(os.path.join(d, f), ROOT)
             for top in ("analysis", "app", "sample_models", "xla_explorer", "tests", "benchmarks", "scripts", "docs")
             for d, dirs, files in os.walk(os.path.join(ROOT, top)) for f in files + dirs
             if os.path.islink(os.path.join(d, f))]
    assert not links, links
