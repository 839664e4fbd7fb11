"""PyTorch's own compiler beside XLA: the same model file's torch module through ``torch.compile``
(Inductor, its CPU backend, default mode) with the same example inputs, in the same worker as
the XLA compile (its sandbox and limits), into ``bundle.inductor`` (docs/bundle.md, "inductor";
docs/pytorch.md, "XLA beside Inductor").

What Inductor made is read from what it writes itself, into a private folder:

- its debug trace (``trace.enabled``, ``trace.debug_dir``): per graph Dynamo captured, the
  wrapper it generated (``output_code.py``: each C++ kernel's source, and the call sites in the
  order the compiled module runs them, each marked with its provenance handle) and the
  provenance map (``inductor_provenance_tracking_node_mappings.json``: each call site's nodes of
  the graph after Inductor's own passes, ``cppCodeToPost``);
- the graph after those passes, as a custom post-grad pass sees it: each node's original ATen op
  (``meta["original_aten"]``, ``aten.gelu.default``) and the modules it was called in
  (``meta["nn_module_stack"]``), named as the XLA side names layers (``layers.0/mlp/1``).

Measured (``measure_it``): C++ kernels record profiler events of their own
(``cpp.enable_kernel_profile``), a library call is its ATen op's event; the events under each
call of the compiled graph are matched in order to the call sites (a kernel the wrapper calls
twice is two call sites, timed each). The whole call of each, XLA's executable and Inductor's
module, is timed alternated (``measure.alternate_calls``), so a verdict compares like with like.
"""

from __future__ import annotations

import contextlib
import glob
import json
import os
import tempfile
import time

from analysis.bundle.checks import INDUCTOR_MAX_CODE_CHARS, INDUCTOR_MAX_CODE_TOTAL, INDUCTOR_MAX_KERNELS
from analysis.compile.measure import alternate_calls
from analysis.compile.stages import Compiled
from analysis.compile.user_errors import error_from_exception
from analysis.errors import ExplorerError
from analysis.measures import spread

# Bounds of what the section holds, the parent's check's (analysis.bundle.checks): at most
# MAX_KERNELS call sites, one kernel's C++ source cut at MAX_CODE_CHARS, all of them at most
# MAX_CODE_TOTAL (later ones are left out)
MAX_KERNELS, MAX_CODE_CHARS, MAX_CODE_TOTAL = INDUCTOR_MAX_KERNELS, INDUCTOR_MAX_CODE_CHARS, INDUCTOR_MAX_CODE_TOTAL
PROFILED_CALLS = 20  # calls of the compiled module under the profiler (each call site timed in each)

# An ATen op Inductor calls as a library routine (``extern_kernels.NAME``): which library does it
# on the CPU. Matrix products go to ATen's CPU BLAS (the BLAS torch was built with); convolutions
# to oneDNN where torch has it.
_BLAS_OPS = frozenset({"mm", "addmm", "bmm", "baddbmm", "addbmm", "addmv", "mv", "dot"})
_CONV_OPS = frozenset({"convolution", "_convolution", "convolution_backward"})


def _blas_name() -> str:
    """The BLAS torch was built with, from its build settings (``BLAS_INFO=mkl``)."""
    import torch

    info = torch.__config__.show()
    at = info.find("BLAS_INFO=")
    if at < 0:
        return "BLAS"
    name = info[at + len("BLAS_INFO="):].replace("\n", ",").split(",", 1)[0].strip()
    return {"mkl": "MKL", "open": "OpenBLAS", "openblas": "OpenBLAS", "accelerate": "Accelerate"}.get(name, name or "BLAS")


def library_of(op: str) -> str:
    """The library an extern call's ATen op (``mm``) runs in on the CPU, in words."""
    import torch

    if op in _BLAS_OPS:
        return f"ATen CPU BLAS ({_blas_name()})"
    if op in _CONV_OPS:
        return "oneDNN" if torch.backends.mkldnn.is_available() else "ATen"
    return "ATen"


def module_path(model, fqn: str) -> str:
    """A module's name as Dynamo records it (``L['self'].layers[0].mlp._modules['1']``) as the
    XLA side's layer path (``layers.0/mlp/1``: ``analysis.compile.frameworks`` names a
    ``ModuleList``/``ModuleDict`` item joined to its container, every other module a layer of
    its own). "" for the model itself."""
    import torch

    s = fqn
    if s.startswith(("L[", "G[")):  # the root: the frame's local or global the module was
        end = s.find("]")
        s = s[end + 1:] if end >= 0 else ""
    parts: list[str] = []
    i = 0
    while i < len(s):  # .name | [N] | ['key'] | ._modules['key']
        if s[i] == ".":
            j = i + 1
            while j < len(s) and (s[j].isalnum() or s[j] == "_"):
                j += 1
            parts.append(s[i + 1:j])
            i = j
        elif s[i] == "[":
            j = s.find("]", i)
            if j < 0:
                break
            parts.append(s[i + 1:j].strip("'\""))
            i = j + 1
        else:
            i += 1
    parts = [p for p in parts if p and p != "_modules"]
    containers = (torch.nn.ModuleList, torch.nn.ModuleDict, torch.nn.ParameterList, torch.nn.ParameterDict)
    path: list[str] = []
    node = model if isinstance(model, torch.nn.Module) else None
    for key in parts:
        parent = node
        if path and isinstance(parent, containers):
            path[-1] += "." + key
        else:
            path.append(key)
        try:
            node = parent.get_submodule(key) if parent is not None else None
        except AttributeError:
            node = None
    return "/".join(path)


class _Capture:
    """What the custom post-grad pass saw of each graph Inductor compiled: per node name, its
    order in the graph, its original ATen op and its module path."""

    def __init__(self, model):
        self.model = model
        self.graphs: list[dict] = []

    def __call__(self, graph) -> None:
        nodes = {}
        for i, n in enumerate(graph.nodes):
            aten = n.meta.get("original_aten")
            stack = n.meta.get("nn_module_stack") or {}
            inner = list(stack.values())[-1] if stack else None
            fqn = inner[0] if isinstance(inner, tuple) and inner and isinstance(inner[0], str) else None
            nodes[n.name] = (i, _aten_name(aten) if aten is not None else None,
                             module_path(self.model, fqn) if fqn is not None else "")
        self.graphs.append(nodes)

    def uuid(self):  # a custom pass's identity for Inductor's caches (none are used here)
        return None


def _aten_name(op) -> str:
    """``aten.gelu.default`` as PyTorch's profiler and torchax name it: ``aten::gelu``."""
    name = str(op)
    ns, _, rest = name.partition(".")
    return f"{ns}::{rest.split('.')[0]}" if rest else name


@contextlib.contextmanager
def _inductor_config(debug_dir: str, capture: _Capture):
    """Inductor set to write its trace into ``debug_dir``, mark each call site with its
    provenance, make its C++ kernels profiler events, compile in this process (no pool of
    compile workers under the job's process limit) and use no cache (a cached graph writes no
    trace) and no precompiled header; the custom pass reads the graph after Inductor's passes.
    All put back after."""
    import torch._functorch.config as functorch_config
    import torch._inductor.config as config

    with config.patch({"trace.enabled": True, "trace.debug_dir": debug_dir, "trace.provenance_tracking_level": 1,
                       "trace.fx_graph": False, "trace.ir_pre_fusion": False, "trace.ir_post_fusion": False,
                       "cpp.enable_kernel_profile": True, "compile_threads": 1, "fx_graph_cache": False,
                       # no precompiled header: it is 150 MB, past a worker's largest file (Limits.file_mb),
                       # and only a later compile in the same cache would use it
                       "cpp_cache_precompile_headers": False,
                       "fx_graph_remote_cache": False, "autotune_local_cache": False,
                       "post_grad_custom_post_pass": capture}), \
            functorch_config.patch({"enable_autograd_cache": False}):
        yield


@contextlib.contextmanager
def _no_jax_accelerator():
    """torchax registers JAX as PyTorch's accelerator device (``jax``, its device module saying it
    is available); Dynamo then asks that accelerator for its current stream, which fails. While
    Inductor compiles and its module runs here, that device says it is not available (put back
    after); nothing of the Inductor side runs on it."""
    import torch

    try:
        mod = torch.get_device_module("jax")
    except (RuntimeError, AttributeError):
        yield
        return
    had = mod.__dict__.get("is_available")
    mod.is_available = lambda: False
    try:
        yield
    finally:
        if had is None:
            del mod.is_available
        else:
            mod.is_available = had


@contextlib.contextmanager
def _cache_dir(path: str):
    """Inductor's cache (its compiled kernels) in ``path`` while it compiles: private to this
    study, gone with its folder; the environment put back after."""
    before = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = path
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("TORCHINDUCTOR_CACHE_DIR", None)
        else:
            os.environ["TORCHINDUCTOR_CACHE_DIR"] = before


def code_key(graph: int, name: str) -> str:
    """The key of a C++ kernel's source in the section's ``code``: ``0/cpp_fused_gelu_0``."""
    return f"{graph}/{name}"


def _why(e: BaseException) -> str:
    """Dynamo's explanation of a failure (its ``Explanation:`` line), shortened, after a dash;
    "" when it gives none."""
    for line in str(e).splitlines():
        line = line.strip()
        if line.startswith("Explanation:"):
            why = " ".join(line[len("Explanation:"):].split())
            return " - " + (why if len(why) <= 300 else why[:297] + "...")
    return ""


def _read_output_code(text: str) -> tuple[dict, list[tuple[str, int, str]]]:
    """The wrapper's C++ kernels (name -> source) and its call sites in order: (handle name,
    handle number, the called name) from each ``# [Provenance debug handles] NAME:N`` comment."""
    code: dict[str, str] = {}
    sites: list[tuple[str, int, str]] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        head = line.split(" = async_compile.cpp_pybinding(", 1)
        if len(head) == 2 and head[0].isidentifier() and "r'''" in head[1]:
            body = [head[1].split("r'''", 1)[1]]
            i += 1
            while i < len(lines) and not lines[i].startswith("''')"):
                body.append(lines[i])
                i += 1
            code[head[0]] = "\n".join(body).strip("\n")
        else:
            s = line.strip()
            if s.startswith("# [Provenance debug handles] "):
                handle = s[len("# [Provenance debug handles] "):]
                name, _, n = handle.rpartition(":")
                if name and n.isdigit():
                    sites.append((name, int(n), handle))
        i += 1
    return code, sites


def _kind_of(name: str) -> tuple[str, str, str | None]:
    """A call site's kind, the ATen op it calls (for a library or fallback call) and the
    profiler event it makes: ``cpp`` (Inductor's own C++ kernel), ``extern`` (an ATen op run as
    a library routine: ``extern_kernels.addmm``) or ``fallback`` (an ATen op Inductor calls as it
    is: ``torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default``)."""
    if name.startswith("extern_kernels."):
        op = name.split(".", 1)[1]
        return "extern", op, f"aten::{op}"
    if name.startswith("torch.ops."):
        parts = name.split(".")
        op = parts[3] if len(parts) > 3 else parts[-1]
        return "fallback", op, f"{parts[2]}::{op}" if len(parts) > 3 else None
    return "cpp", "", None


def _graph_kernels(folder: str, captures: list[dict], used: set, budget: list) -> tuple[list[dict], dict]:
    """One graph's call sites, with their ops and modules, and its C++ kernels' sources."""
    try:
        with open(os.path.join(folder, "output_code.py"), encoding="utf-8", errors="replace") as f:
            text = f.read()
    except OSError:
        return [], {}
    try:
        with open(os.path.join(folder, "inductor_provenance_tracking_node_mappings.json")) as f:
            prov = json.load(f).get("cppCodeToPost") or {}
    except (OSError, ValueError, AttributeError):
        prov = {}
    code, sites = _read_output_code(text)
    names = {n for nodes in prov.values() if isinstance(nodes, list) for n in nodes}
    # the capture of this graph: the one that holds its nodes (captures come in compile order)
    best, best_n = None, -1
    for gi, cap in enumerate(captures):
        if gi in used:
            continue
        hit = len(names & cap.keys())
        if hit > best_n:
            best, best_n = gi, hit
    nodes = captures[best] if best is not None else {}
    if best is not None:
        used.add(best)
    out = []
    for name, n, handle in sites:
        kind, op, _ = _kind_of(name)
        post = [p for p in prov.get(handle) or [] if p in nodes]
        post.sort(key=lambda p: nodes[p][0])
        ops, modules, parts = [], [], []
        for p in post:
            _, aten, mod = nodes[p]
            if aten and aten not in ops:
                ops.append(aten)
            if mod not in modules:
                modules.append(mod)
            if aten and [mod, aten] not in parts:
                parts.append([mod, aten])
        if kind != "cpp" and f"aten::{op}" not in ops:
            ops.append(f"aten::{op}")
            if modules:
                parts.append([nodes[post[-1]][2], f"aten::{op}"])
        out.append({"name": name, "kind": kind, "handle": n, "library": library_of(op) if kind == "extern" else None,
                    "aten": ops, "modules": modules, "parts": parts[:500],  # [module, ATen op] it holds
                    # the module of its result: the last of its nodes in the graph
                    "module": nodes[post[-1]][2] if post else None,
                    "source_nodes": post[:200]})
    kept = {}
    for k, src in code.items():
        src = src[:MAX_CODE_CHARS]
        if budget[0] + len(src) > MAX_CODE_TOTAL:
            continue
        budget[0] += len(src)
        kept[k] = src
    return out, kept


def _profile(compiled, inputs, sites: list[dict], run) -> dict:
    """Each call site's time in ``PROFILED_CALLS`` calls under torch's profiler, and the compiled
    graph's own (its ``## Call CompiledFxGraph`` event): the events under each graph call
    matched in order to the graph's expected call sites."""
    from torch.profiler import ProfilerActivity, profile

    with run(), profile(activities=[ProfilerActivity.CPU]) as p:
        for _ in range(PROFILED_CALLS):
            compiled(*inputs)
    by_graph: dict[int, list[int]] = {}
    for i, s in enumerate(sites):
        by_graph.setdefault(s["graph"], []).append(i)
    times: dict[int, list[float]] = {}
    graph_times: dict[int, list[float]] = {}

    def expected(s: dict) -> str | None:
        kind, _, event = _kind_of(s["name"])
        return event if kind != "cpp" else None

    def matches(s: dict, ev_name: str) -> bool:
        e = expected(s)
        if e is not None:
            return ev_name == e
        return ev_name.startswith("graph_") and ev_name.endswith("_" + s["name"])

    calls = sorted((ev for ev in p.events() if ev.name.startswith("## Call CompiledFxGraph")),
                   key=lambda ev: ev.time_range.start)
    last = -1
    for ev in calls:
        children = sorted(ev.cpu_children, key=lambda c: c.time_range.start)
        scored = []
        for g, idxs in by_graph.items():  # the graph these events are of: the one they match most
            pairs, j = [], 0
            for c in children:
                if j < len(idxs) and matches(sites[idxs[j]], c.name):
                    pairs.append((idxs[j], c.time_range.elapsed_us() * 1e-6))
                    j += 1
            scored.append((len(pairs), g, pairs))
        most = max((n for n, _, _ in scored), default=0)
        if most == 0:
            continue
        # graphs that generated the same code make the same events: of those, the one after the
        # graph called last (a module's graphs run in the order Dynamo split it)
        tied = sorted(g for n, g, _ in scored if n == most)
        best = next((g for g in tied if g > last), tied[0])
        best_pairs = next(pairs for n, g, pairs in scored if g == best)
        last = best
        graph_times.setdefault(best, []).append(ev.time_range.elapsed_us() * 1e-6)
        for i, t in best_pairs:
            times.setdefault(i, []).append(t)
    for i, s in enumerate(sites):
        sp = spread(times.get(i, []))
        if sp is not None:
            s.update({"median_s": sp.median, "q1_s": sp.q1, "q3_s": sp.q3, "min_s": sp.lo, "max_s": sp.hi,
                      "calls": sp.n})
    graphs = {}
    for g, ts in graph_times.items():
        sp = spread(ts)
        graphs[str(g)] = {"median_s": sp.median, "q1_s": sp.q1, "q3_s": sp.q3, "calls": sp.n}
    return {"profiled_calls": PROFILED_CALLS, "graphs": graphs}


def _call_side(xs: list[float]) -> dict:
    sp = spread(xs)
    return {"call_median_s": sp.median, "call_q1_s": sp.q1, "call_q3_s": sp.q3, "call_min_s": sp.lo,
            "call_max_s": sp.hi, "alternated_calls": sp.n}


def beside_inductor(c: Compiled, measure_it: bool = False) -> Compiled:
    """Compile ``c``'s PyTorch model with Inductor, read what it made, and (``measure_it``) time
    its kernels and the two compiled programs' calls alternated; the result in
    ``c.bundle.inductor``. An ExplorerError (one line) for a model that is not PyTorch's or
    that Inductor cannot compile."""
    loaded = c.loaded
    if loaded.original is None:
        what = f"a {loaded.library} model" if loaded.library else "a JAX function"
        raise ExplorerError("options", f"Inductor compiles PyTorch models only; this file's model is {what}",
                            loaded.filename)
    try:
        import torch
    except ImportError:
        raise ExplorerError("options", "Inductor needs PyTorch, which this runtime lacks", loaded.filename) from None
    model, inputs = loaded.original
    run = torch.no_grad if isinstance(model, torch.nn.Module) else contextlib.nullcontext
    with _no_jax_accelerator():
        return _beside_inductor(c, model, inputs, run, measure_it)


def _beside_inductor(c: Compiled, model, inputs, run, measure_it: bool) -> Compiled:
    import torch

    loaded = c.loaded
    capture = _Capture(model)
    with tempfile.TemporaryDirectory(prefix="xla-explorer-inductor-") as d:
        t0 = time.perf_counter()
        try:
            torch._dynamo.reset()  # nothing of an earlier compile in this process is reused
            with _inductor_config(d, capture), _cache_dir(os.path.join(d, "cache")):
                compiled = torch.compile(model)
                with run():
                    compiled(*inputs)  # the compile happens at the first call
        except ExplorerError:
            raise
        except MemoryError:
            raise
        except Exception as e:  # noqa: BLE001 - Dynamo or Inductor failed on the user's model: one line
            err = error_from_exception("inductor", e, loaded.filename)
            raise ExplorerError("inductor", f"Inductor could not compile the model: {err.message}{_why(e)}",
                                err.file, err.line, err.column, err.excerpt) from None
        compile_s = time.perf_counter() - t0
        folders = sorted(glob.glob(os.path.join(d, "torchinductor", "*")),
                         key=lambda f: (os.path.getmtime(f), f))
        sites, code, used, budget = [], {}, set(), [0]
        for g, folder in enumerate(folders):
            ks, src = _graph_kernels(folder, capture.graphs, used, budget)
            for k in ks:
                k["graph"] = g
            sites.extend(ks)
            # by graph and name: each graph numbers its kernels from 0 (two graphs may both have cpp_fused_relu_0)
            code.update({code_key(g, name): text for name, text in src.items()})
    truncated = len(sites) > MAX_KERNELS
    sites = sites[:MAX_KERNELS]
    section = {"torch": torch.__version__, "device": "cpu", "mode": "default", "graphs": len(folders),
               "compile_s": compile_s, "kernels": sites, "code": code, "truncated": truncated,
               "measured": False, "xla": None, "compiled": None, "alternation": None, "profiled_calls": None,
               "graph_calls": None}
    if measure_it:
        import jax

        prof = _profile(compiled, inputs, sites, run)
        section["profiled_calls"] = prof["profiled_calls"]
        section["graph_calls"] = prof["graphs"]
        if c.runnable():
            def inductor_call():
                with run():
                    compiled(*inputs)

            alt = alternate_calls(lambda: jax.block_until_ready(c.executable(*c.args)), inductor_call)
            section.update({"measured": True, "xla": _call_side(alt["a"]), "compiled": _call_side(alt["b"]),
                            "alternation": {"calls": len(alt["a"]), "stopped": alt["stopped"],
                                            "budget_s": alt["budget_s"]}})
    c.bundle.inductor = section
    return c
