"""Loading a model: run a model file's text and fetch ``model`` and ``example_inputs``.

The one loader for every path that runs user code (a compile, a measurement's recompile, a
shape sweep). Errors the user's code causes come back as ``ExplorerError`` with the phase and
the line of the user's code.
"""

from __future__ import annotations

import builtins
import contextlib
import linecache
import os
import sys
import types
from dataclasses import dataclass
from typing import Callable

import jax
import numpy as np

from analysis.compile.frameworks import KERAS_BACKEND, split_model
from analysis.compile.user_errors import call_user, defined_at, error_from_exception
from analysis.errors import ExplorerError
from sample_models import gallery_entry


@dataclass(frozen=True)
class ModelFile:
    """A model file that has been run: its ``model`` and ``example_inputs``, not yet called."""

    model: Callable
    make_inputs: Callable
    source: str
    filename: str
    name: str
    description: str = ""
    module: types.ModuleType | None = None  # the file's ``__main__`` module (see ``as_main``)


@dataclass(frozen=True)
class LoadedModel:
    """A model with the inputs ``example_inputs()`` returned: ready to trace."""

    model: Callable
    inputs: tuple
    source: str
    filename: str
    name: str
    description: str = ""
    library: str | None = None  # the model was a Flax NNX / Equinox / Keras module (analysis.compile.frameworks)
    parameters: int = 0  # parameter arrays that the split turned into inputs
    module: types.ModuleType | None = None  # the file's ``__main__`` module (see ``as_main``)
    state: object = None  # frameworks.StateChanges of a Flax NNX model, filled in as it is traced
    # A PyTorch model's object and example inputs as the file gave them, before the split: what
    # Inductor compiles beside XLA (analysis.compile.inductor); None for every other library
    original: tuple | None = None


def new_main_module(source: str, filename: str) -> tuple[types.CodeType, types.ModuleType]:
    """A model file's code and the module it runs in, as ``python FILE`` makes them: the code
    compiled with the file's own ``__future__`` imports only (``dont_inherit``: none of this
    module's), a fresh module named ``__main__`` with ``__file__`` the file's name; the
    docstring becomes ``__doc__`` as the code runs."""
    try:
        code = compile(source, filename, "exec", flags=0, dont_inherit=True)
    except SyntaxError as e:
        raise error_from_exception("syntax", e, filename) from None
    except ValueError as e:  # e.g. null bytes
        raise ExplorerError("syntax", str(e), filename) from None
    mod = types.ModuleType("__main__")
    mod.__file__ = filename
    mod.__builtins__ = builtins
    mod.__spec__ = None  # as for a script: no import system behind it
    mod.__loader__ = None
    return code, mod


@contextlib.contextmanager
def as_main(module: types.ModuleType | None):
    """While the user's code runs (the file itself, ``example_inputs``, tracing, measuring): its
    module is ``sys.modules["__main__"]`` and ``sys.argv`` is ``[FILE]``, as under ``python
    FILE``. ``dataclasses`` (so Flax Linen, Equinox, ``flax.struct``) and ``typing`` look a
    class's module up there by its ``__module__`` (``"__main__"``). What was there before is
    put back after; nested uses of the same module are harmless."""
    if module is None:
        yield
        return
    saved_main, saved_argv = sys.modules.get("__main__"), sys.argv
    sys.modules["__main__"] = module
    sys.argv = [module.__file__ or ""]
    try:
        yield
    finally:
        sys.argv = saved_argv
        if saved_main is None:
            sys.modules.pop("__main__", None)
        else:
            sys.modules["__main__"] = saved_main


def run_model_file(source: str, filename: str = "<pasted code>", name: str = "pasted",
                   inputs_doc: str = "example_inputs()") -> ModelFile:
    """Execute a model file's text as ``python FILE`` would (``new_main_module``, ``as_main``);
    it must define ``model`` and ``example_inputs``."""
    code, mod = new_main_module(source, filename)
    os.environ.setdefault("KERAS_BACKEND", KERAS_BACKEND)  # a Keras model compiles through JAX
    # Let tracebacks and jax's source info show the user's lines.
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    with as_main(mod):
        call_user("import", exec, filename, code, mod.__dict__)
    model = mod.__dict__.get("model")
    if model is None or not callable(model):
        raise ExplorerError("import", "the code defines no callable named `model`", filename)
    make_inputs = mod.__dict__.get("example_inputs")
    if make_inputs is None or not callable(make_inputs):
        raise ExplorerError("import", f"the code defines no `{inputs_doc}` function", filename)
    doc = mod.__dict__.get("__doc__")
    return ModelFile(model, make_inputs, source, filename, name, (doc if isinstance(doc, str) else "").strip(), mod)


def as_inputs(value, filename: str, where: int | None = None) -> tuple:
    """What ``example_inputs`` returned, as the argument tuple; only arrays and numbers (else an
    error at ``where``, the line that defines ``example_inputs``)."""
    inputs = value
    if not isinstance(inputs, tuple):
        inputs = tuple(inputs) if isinstance(inputs, list) else (inputs,)
    for leaf in jax.tree_util.tree_leaves(inputs):
        if not (hasattr(leaf, "shape") and hasattr(leaf, "dtype")) and \
                not isinstance(leaf, (int, float, bool, complex, np.number)):
            excerpt = linecache.getline(filename, where).strip()[:160] if where else ""
            raise ExplorerError("inputs", f"example_inputs() must return arrays; got {type(leaf).__name__}", filename,
                                where, None, excerpt or None)
    return inputs


def load_source(source: str, filename: str = "<pasted code>", name: str = "pasted") -> LoadedModel:
    """Execute a model file's text and call its ``example_inputs()``."""
    f = run_model_file(source, filename, name)
    with as_main(f.module):
        inputs = as_inputs(call_user("inputs", f.make_inputs, filename), filename, defined_at(source, "example_inputs"))
        s = split_model(f.model, inputs, filename)
    return LoadedModel(s.fn, s.inputs, f.source, f.filename, f.name, f.description, s.library, s.parameters,
                       f.module, s.state, (f.model, inputs) if s.library == "torch" else None)


def load_gallery(name: str) -> LoadedModel:
    e = gallery_entry(name)
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


def load_model(model: str) -> tuple[LoadedModel, str]:
    """``model`` is a gallery name or a path to a ``.py`` model file; returns it with its
    source kind (``gallery`` or ``file``)."""
    if model.endswith(".py") or os.sep in model:
        return load_file(model), "file"
    return load_gallery(model), "gallery"


def describe_inputs(inputs: tuple) -> list[dict]:
    out = []
    for path, leaf in jax.tree_util.tree_flatten_with_path(inputs)[0]:
        out.append({"path": jax.tree_util.keystr(path), "shape": list(getattr(leaf, "shape", ())),
                    "dtype": str(getattr(leaf, "dtype", type(leaf).__name__))})
    return out
