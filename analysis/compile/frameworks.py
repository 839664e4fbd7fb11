"""Models written with a library: a Flax NNX module, an Equinox module or a Keras 3 model (JAX
backend) as ``model``, split into a pure function of (parameters, inputs) the way each library
expects, so the parameters are inputs of the compiled program, not constants baked into it.

- Flax NNX: ``graphdef, state = nnx.split(model)``; the program is
  ``nnx.merge(graphdef, state)(*args)`` with ``state`` as its first argument.
- Equinox: ``params, static = eqx.partition(model, eqx.is_array)``; the program is
  ``eqx.combine(params, static)(*args)``.
- Keras 3: ``model.stateless_call(trainable, non_trainable, *args)``, with the variables' values
  as the first two arguments.

Flax NNX and Equinox put no name scope of their own into the program, so while the program is
traced each submodule's call runs inside ``jax.named_scope`` of its attribute name: op names
read ``attn/q_proj/dot_general`` like Linen's and Keras's do, and the graph's name scopes are the
model's layers. A library is recognised by the model's class, only when the user's code
imported it (this module imports none of them itself). Flax Linen needs nothing: its ``apply`` already takes the
parameters (``model = lambda params, x: Net().apply(params, x)``).
"""

from __future__ import annotations

import contextlib
import functools
import sys
from dataclasses import dataclass, field, fields, is_dataclass
from typing import Callable, Iterable

from analysis.compile.user_errors import error_from_exception
from analysis.errors import ExplorerError

KERAS_BACKEND = "jax"  # set (if unset) before the user's code runs, so `import keras` picks JAX


@dataclass
class StateChanges:
    """The Flax NNX state a call changed (BatchNorm statistics, RNG counters, ``self.x = ...``),
    found as the program is traced: each variable's path and type, and whether the call created
    it. The program returns those variables' new values as a second output, as ``nnx.jit``
    hands a module's updated state back, so the compile holds the work that updates them."""

    changed: list = field(default_factory=list)  # [{"path": "bn/mean", "type": "BatchStat", "new": False}]


@dataclass(frozen=True)
class Split:
    fn: Callable
    inputs: tuple
    library: str | None  # "flax.nnx", "equinox", "keras" or None (a plain callable)
    parameters: int = 0  # how many parameter arrays became inputs
    state: StateChanges | None = None  # Flax NNX: the state the call changes (filled as it is traced)


def _is_instance(model, module: str, cls: str) -> bool:
    mod = sys.modules.get(module)
    typ = getattr(mod, cls, None) if mod is not None else None
    return isinstance(typ, type) and isinstance(model, typ)


@contextlib.contextmanager
def layer_scopes(modules: Iterable[tuple[tuple, object]], submodules: Callable | None = None):
    """While tracing: every module's call (``(path, module)`` pairs) inside a named scope of its
    last path element; scopes nest as calls do, so an op's name carries the module path. The
    classes' ``__call__`` is patched for the duration and restored, whatever happens.

    A library's transformation can call a copy of a module made while tracing (Flax NNX's
    ``nnx.scan`` over a stack of layers merges each step's layer anew): a module not among
    ``modules`` takes the name of the one place its class is found, and ``submodules(module)``
    (its ``(path, module)`` pairs, relative to it) names what it holds, so a scanned stack reads
    ``blocks/linear`` like any other layer."""
    import jax

    modules = list(modules)
    names = {id(m): str(path[-1]) for path, m in modules if path}
    where: dict[type, set] = {}
    for path, m in modules:
        if path:
            where.setdefault(type(m), set()).add(str(path[-1]))
    patched = {}
    for cls in {type(m) for _, m in modules}:
        if "__call__" not in cls.__dict__ and cls in patched:
            continue
        orig = cls.__call__

        def call(self, *args, __orig=orig, **kw):
            name = names.get(id(self))
            if name is None:
                only = where.get(type(self), ())
                if len(only) != 1:
                    return __orig(self, *args, **kw)
                name = names[id(self)] = next(iter(only))
                if submodules is not None:
                    for path, sub in submodules(self):
                        if path:
                            names.setdefault(id(sub), str(path[-1]))
            with jax.named_scope(name):
                return __orig(self, *args, **kw)

        patched[cls] = cls.__dict__.get("__call__")
        cls.__call__ = call
    try:
        yield
    finally:
        for cls, orig in patched.items():
            if orig is None:
                del cls.__call__
            else:
                cls.__call__ = orig


def _nnx_modules(model):
    from flax import nnx

    return [(tuple(p), n) for p, n in nnx.iter_graph(model) if isinstance(n, nnx.Module)]


def _eqx_modules(model, path=()):
    """(path, module) of an Equinox module and its submodules (fields, lists, tuples, dicts)."""
    import equinox as eqx

    out = [(path, model)]

    def walk(v, p):
        if isinstance(v, eqx.Module):
            out.extend(_eqx_modules(v, p))
        elif isinstance(v, (list, tuple)):  # layers[0], layers[1], ... (the scope is the last element)
            for i, x in enumerate(v):
                walk(x, p[:-1] + (f"{p[-1]}[{i}]",) if p else (str(i),))
        elif isinstance(v, dict):
            for k, x in v.items():
                walk(x, p[:-1] + (f"{p[-1]}[{k}]",) if p else (str(k),))

    if is_dataclass(model):
        for f in fields(model):
            walk(getattr(model, f.name, None), path + (f.name,))
    return out


def _eqx_inputs(inputs: tuple) -> list:
    """The (path, module) pairs of the Equinox modules among a function's arguments (top level, or
    in a tuple, list or dict argument), named by their attributes within each."""
    out = []
    for arg in inputs:
        for v in (arg.values() if isinstance(arg, dict) else arg if isinstance(arg, (list, tuple)) else (arg,)):
            if _is_instance(v, "equinox", "Module"):
                out.extend(_eqx_modules(v))
    return out


def split_model(model, inputs: tuple, filename: str) -> Split:
    """``model`` and its example inputs as a function of arrays only."""
    import jax

    try:
        if _is_instance(model, "flax.nnx", "Module"):
            from flax import nnx

            graphdef, state = nnx.split(model)
            changes = StateChanges()

            def nnx_program(state, *args):
                before = {p: id(v.get_value()) for p, v in nnx.to_flat_state(state)}
                m = nnx.merge(graphdef, state)
                with layer_scopes(_nnx_modules(m), _nnx_modules):
                    out = m(*args)
                changed = {p: v for p, v in nnx.to_flat_state(nnx.state(m)) if before.get(p) != id(v.get_value())}
                changes.changed = [{"path": "/".join(map(str, p)), "type": type(v).__name__, "new": p not in before}
                                   for p, v in changed.items()]
                if not changed:
                    return out
                return out, {"/".join(map(str, p)): v.get_value() for p, v in changed.items()}

            return Split(nnx_program, (state, *inputs), "flax.nnx", len(jax.tree_util.tree_leaves(state)), changes)
        if _is_instance(model, "equinox", "Module"):
            import equinox as eqx

            params, static = eqx.partition(model, eqx.is_array)

            def eqx_program(params, *args):
                m = eqx.combine(params, static)
                with layer_scopes(_eqx_modules(m), _eqx_modules):
                    return m(*args)

            return Split(eqx_program, (params, *inputs), "equinox", len(jax.tree_util.tree_leaves(params)))
        if _is_instance(model, "keras", "Model") or _is_instance(model, "keras", "Layer"):
            if not model.built:
                model(*inputs)  # Keras creates its variables on the first call
            trainable = [v.value for v in model.trainable_variables]
            frozen = [v.value for v in model.non_trainable_variables]

            def keras_program(trainable, frozen, *args):
                out, _ = model.stateless_call(trainable, frozen, *args)
                return out

            return Split(keras_program, (trainable, frozen, *inputs), "keras", len(trainable) + len(frozen))
        if sys.modules.get("equinox") is not None:
            held = _eqx_inputs(inputs)
            if held:  # a plain function (a training step) given Equinox modules: their layers named too
                @functools.wraps(model)  # the program keeps the user's function's name
                def eqx_inputs_program(*args):
                    with layer_scopes(held, _eqx_modules):
                        return model(*args)

                return Split(eqx_inputs_program, inputs, None)
    except ExplorerError:
        raise
    except Exception as e:  # noqa: BLE001 - the user's module fails to split or build: one line at their code
        raise error_from_exception("inputs", e, filename) from None
    return Split(model, inputs, None)
