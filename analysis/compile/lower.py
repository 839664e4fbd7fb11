"""Trace, lower and compile a JAX model; the only part of ``analysis`` that imports JAX.

``compile_to_bundle`` runs the stages of ``jax.stages`` one by one (trace -> jaxpr, lower ->
StableHLO and HLO with metadata, compile -> optimized HLO) and times each, then hands the
texts to the pure-Python analysis. Errors the user's code causes come back as
``ExplorerError`` with the phase and the line of the user's code.
"""

from __future__ import annotations

import linecache
import os
import platform as _platform
import sys
import time
import traceback
import types
from dataclasses import dataclass
from typing import Any, Callable

from analysis.bundle import Bundle, analyze, now
from analysis.errors import ExplorerError

BACKENDS = ("auto", "cpu", "gpu")
PHASES = ("trace", "lower", "compile", "analyze")


@dataclass
class LoadedModel:
    model: Callable
    inputs: tuple
    source: str
    filename: str
    name: str
    description: str = ""


# ----------------------------------------------------------------------------- loading


def _user_frame(tb, filename: str):
    """The innermost traceback frame in the user's file, as (line, excerpt)."""
    found = None
    for fs in traceback.extract_tb(tb):
        if fs.filename == filename:
            found = fs
    if found is None:
        return None, None
    return found.lineno, (found.line or "").strip()[:160]


def _error_from_exception(phase: str, exc: BaseException, filename: str) -> ExplorerError:
    if isinstance(exc, ExplorerError):
        return exc
    if isinstance(exc, SyntaxError) and (exc.filename == filename or phase == "syntax"):
        return ExplorerError("syntax", exc.msg or "invalid syntax", filename, exc.lineno, exc.offset,
                             (exc.text or "").strip()[:160])
    line, excerpt = _user_frame(exc.__traceback__, filename)
    msg = str(exc).strip().splitlines()
    first = next((m for m in msg if m.strip()), "")
    # JAX prefixes long explanations; keep the first meaningful line.
    text = f"{type(exc).__name__}: {first}" if first else type(exc).__name__
    if isinstance(exc, ModuleNotFoundError):
        phase = "import"
    return ExplorerError(phase, text, filename, line, None, excerpt)


def load_source(source: str, filename: str = "<pasted code>", name: str = "pasted") -> LoadedModel:
    """Execute a model file's text and fetch ``model`` and ``example_inputs()``."""
    try:
        code = compile(source, filename, "exec")
    except SyntaxError as e:
        raise _error_from_exception("syntax", e, filename) from None
    except ValueError as e:  # e.g. null bytes
        raise ExplorerError("syntax", str(e), filename) from None
    # Let tracebacks and jax's source info show the user's lines.
    lines = source.splitlines(True)
    linecache.cache[filename] = (len(source), None, lines, filename)
    mod = types.ModuleType(f"xla_explorer_user_{name}")
    mod.__file__ = filename
    try:
        exec(code, mod.__dict__)
    except BaseException as e:  # noqa: BLE001 - user code may raise anything, SystemExit included
        if isinstance(e, KeyboardInterrupt):
            raise
        raise _error_from_exception("import", e, filename) from None
    model = mod.__dict__.get("model")
    if model is None or not callable(model):
        raise ExplorerError("import", "the code defines no callable named `model`", filename)
    make_inputs = mod.__dict__.get("example_inputs")
    if make_inputs is None or not callable(make_inputs):
        raise ExplorerError("import", "the code defines no `example_inputs()` function", filename)
    try:
        inputs = make_inputs()
    except BaseException as e:  # noqa: BLE001
        if isinstance(e, KeyboardInterrupt):
            raise
        raise _error_from_exception("inputs", e, filename) from None
    if not isinstance(inputs, tuple):
        inputs = (inputs,) if not isinstance(inputs, list) else tuple(inputs)
    _check_inputs(inputs, filename)
    return LoadedModel(model, inputs, source, filename, name, (mod.__doc__ or "").strip())


def _check_inputs(inputs: tuple, filename: str) -> None:
    import jax
    import numpy as np

    leaves = jax.tree_util.tree_leaves(inputs)
    for leaf in leaves:
        if not (hasattr(leaf, "shape") and hasattr(leaf, "dtype")) and not isinstance(leaf, (int, float, bool, complex, np.number)):
            raise ExplorerError("inputs", f"example_inputs() must return arrays; got {type(leaf).__name__}", filename)


def load_gallery(name: str) -> LoadedModel:
    from sample_models import gallery

    entries = gallery()
    if name not in entries:
        raise ExplorerError("load", f"no gallery model named {name!r} (have: {', '.join(entries)})")
    e = entries[name]
    return load_source(e.source, str(e.path), name)


def load_file(path: str) -> LoadedModel:
    try:
        with open(path) as f:
            src = f.read()
    except OSError as e:
        raise ExplorerError("load", e.strerror or str(e), path) from None
    except UnicodeDecodeError:
        raise ExplorerError("load", "not a text file", path) from None
    return load_source(src, os.path.abspath(path), os.path.splitext(os.path.basename(path))[0])


# ----------------------------------------------------------------------------- environment


def select_device(backend: str):
    import jax

    if backend not in BACKENDS:
        raise ExplorerError("options", f"backend must be one of {', '.join(BACKENDS)}, not {backend!r}")
    if backend == "auto":
        return jax.devices()[0]
    try:
        return jax.devices(backend)[0]
    except RuntimeError:
        raise ExplorerError("options", f"no {backend.upper()} backend is available here "
                                       f"(present: {', '.join(available_backends())})") from None


def gpu_target_device(name: str):
    """A device of the named GPU target (``analysis.devices``) to compile for without a GPU.
    Needs the CUDA plugin (the ``cuda`` extra); with no GPU present, set
    ``JAX_SKIP_CUDA_CONSTRAINTS_CHECK=1`` before jax is imported so the plugin loads anyway."""
    from analysis.devices import target_config

    cfg = target_config(name)
    from jax.experimental import topologies

    try:
        topo = topologies.get_topology_desc(platform="cuda", target_config=cfg, topology="1x1x1")
    except Exception as e:  # noqa: BLE001 - no plugin, or a plugin that refused to load
        first = (str(e).strip().splitlines() or [type(e).__name__])[0]
        raise ExplorerError("options", f"cannot compile for GPU target {name!r} here: {first} "
                                       "(needs the cuda extra; with no GPU, set "
                                       "JAX_SKIP_CUDA_CONSTRAINTS_CHECK=1)") from None
    return topo.devices[0]


def available_backends() -> list[str]:
    import jax

    out = []
    for b in ("cpu", "gpu", "tpu"):
        try:
            if jax.devices(b):
                out.append(b)
        except RuntimeError:
            pass
    return out


def environment(device, gpu_target: str | None = None) -> dict:
    import jax
    import jaxlib

    env = {
        "jax": jax.__version__, "jaxlib": jaxlib.__version__,
        "python": _platform.python_version(), "backend": device.platform,
        "platform": "gpu" if device.platform in ("gpu", "cuda", "rocm") else device.platform,
        "device_kind": getattr(device, "device_kind", device.platform),
        "device_count": 1 if gpu_target else len(jax.devices(device.platform)),
        "machine": _platform.machine(), "cpu_count": os.cpu_count(),
    }
    if gpu_target:
        # compiled for a described device, not on one: no autotuning, nothing run
        env["deviceless"] = True
        env["gpu_target"] = gpu_target.lower()
    return env


def describe_inputs(inputs: tuple) -> list[dict]:
    import jax

    out = []
    for path, leaf in jax.tree_util.tree_flatten_with_path(inputs)[0]:
        out.append({"path": jax.tree_util.keystr(path), "shape": list(getattr(leaf, "shape", ())),
                    "dtype": str(getattr(leaf, "dtype", type(leaf).__name__))})
    return out


def parse_options(pairs: list[str] | None) -> dict[str, Any]:
    """``KEY=VALUE`` strings -> compiler options (true/false/ints converted)."""
    out: dict[str, Any] = {}
    for p in pairs or []:
        if "=" not in p:
            raise ExplorerError("options", f"option {p!r} is not KEY=VALUE")
        k, v = p.split("=", 1)
        k, v = k.strip(), v.strip()
        if not k:
            raise ExplorerError("options", f"option {p!r} has no key")
        low = v.lower()
        if low in ("true", "false"):
            out[k] = low == "true"
        elif v.lstrip("-").isdigit():
            out[k] = int(v)
        else:
            out[k] = v
    return out


# ----------------------------------------------------------------------------- compiling


def compile_to_bundle(loaded: LoadedModel, backend: str = "auto", compiler_options: dict | None = None,
                      progress: Callable[[str], None] | None = None, source_kind: str = "code",
                      gpu_target: str | None = None) -> Bundle:
    """Trace, lower, compile and analyze; returns a complete Bundle or raises ExplorerError.

    With ``gpu_target`` (a name in ``analysis.devices``) the program is compiled for that GPU
    without one being present: the inputs are only shapes, and the bundle cannot be measured."""
    import jax

    compiler_options = dict(compiler_options or {})
    say = progress or (lambda phase: None)
    if gpu_target:
        device, backend = gpu_target_device(gpu_target), "gpu"
    else:
        device = select_device(backend)
    fn = loaded.filename
    times: dict[str, float] = {}

    try:
        if gpu_target:
            from jax.sharding import SingleDeviceSharding

            on = SingleDeviceSharding(device)
            args = jax.tree_util.tree_map(
                lambda x: jax.ShapeDtypeStruct(jax.numpy.shape(x), jax.numpy.result_type(x), sharding=on),
                loaded.inputs)
        else:
            args = jax.device_put(loaded.inputs, device)
    except Exception as e:  # noqa: BLE001
        raise _error_from_exception("inputs", e, fn) from None

    say("trace")
    t0 = time.perf_counter()
    try:
        traced = jax.jit(loaded.model).trace(*args)
        jaxpr = str(traced.jaxpr)
    except Exception as e:  # noqa: BLE001
        raise _error_from_exception("trace", e, fn) from None
    times["trace"] = time.perf_counter() - t0

    say("lower")
    t0 = time.perf_counter()
    try:
        lowered = traced.lower()
        stablehlo = lowered.as_text()
        hlo_before = lowered.as_text(dialect="hlo", debug_info=True)
    except Exception as e:  # noqa: BLE001
        raise _error_from_exception("lower", e, fn) from None
    times["lower"] = time.perf_counter() - t0

    say("compile")
    t0 = time.perf_counter()
    try:
        compiled = lowered.compile(compiler_options=compiler_options) if compiler_options else lowered.compile()
        hlo_after = compiled.as_text()
    except Exception as e:  # noqa: BLE001
        msg = str(e).strip().splitlines()
        first = msg[0] if msg else type(e).__name__
        raise ExplorerError("compile", first, fn) from None
    times["compile"] = time.perf_counter() - t0

    say("analyze")
    t0 = time.perf_counter()
    cost = _cost_analysis(compiled)
    memory = _memory_analysis(compiled)
    bundle = Bundle(
        source={"kind": source_kind, "name": loaded.name, "file": fn, "code": loaded.source,
                "description": loaded.description, "inputs": describe_inputs(loaded.inputs)},
        options={"backend": backend, "compiler_options": compiler_options},
        environment=environment(device, gpu_target),
        stages={"jaxpr": jaxpr, "stablehlo": stablehlo, "hlo_before": hlo_before, "hlo_after": hlo_after},
        cost_analysis=cost, memory_analysis=memory, created=now(),
    )
    analyze(bundle)
    times["analyze"] = time.perf_counter() - t0
    bundle.phase_seconds = {k: round(v, 4) for k, v in times.items()}
    if not gpu_target:  # a deviceless compile has nothing to run on
        bundle.__dict__["_compiled"] = compiled  # for measurement in the same process; not serialized
        bundle.__dict__["_args"] = args
    return bundle


def _cost_analysis(compiled) -> dict | None:
    try:
        ca = compiled.cost_analysis()
    except Exception:  # noqa: BLE001 - some backends do not implement it
        return None
    if isinstance(ca, list):
        ca = ca[0] if ca else None
    if not ca:
        return None
    return {str(k): float(v) for k, v in ca.items()}


def _memory_analysis(compiled) -> dict | None:
    try:
        ma = compiled.memory_analysis()
    except Exception:  # noqa: BLE001
        return None
    if ma is None:
        return None
    out = {}
    for k in dir(ma):
        if k.endswith("_in_bytes"):
            try:
                out[k] = int(getattr(ma, k))
            except (TypeError, ValueError):
                pass
    return out or None


def analyze_model(model: str, backend: str = "auto", compiler_options: dict | None = None,
                  progress: Callable[[str], None] | None = None, gpu_target: str | None = None) -> Bundle:
    """``model`` is a gallery name or a path to a ``.py`` model file."""
    if gpu_target:
        # before the model's example inputs start JAX's backends: with no GPU the CUDA plugin
        # only loads when told to skip its device checks
        os.environ.setdefault("JAX_SKIP_CUDA_CONSTRAINTS_CHECK", "1")
    if model.endswith(".py") or os.sep in model:
        loaded = load_file(model)
        kind = "file"
    else:
        loaded = load_gallery(model)
        kind = "gallery"
    return compile_to_bundle(loaded, backend, compiler_options, progress, source_kind=kind, gpu_target=gpu_target)


if __name__ == "__main__":  # pragma: no cover - manual check
    b = analyze_model(sys.argv[1] if len(sys.argv) > 1 else "mlp")
    print(b.metrics)
