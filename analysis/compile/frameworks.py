"""Models written with a library: a Flax NNX module, an Equinox module, a Keras 3 model (JAX
backend) or a Flax Linen module object as ``model``, or a training step handed Flax NNX objects,
split into a pure function of (parameters, inputs) the way each library expects, so the
parameters are inputs of the compiled program, not constants baked into it, and the state a call
changes is an output of it, as the library's own ``jit`` returns it.

- Flax NNX: ``graphdef, state = nnx.split(model)``; the program is
  ``nnx.merge(graphdef, state)(*args)`` with ``state`` as its first argument, and the variables
  the call changed (``StateChanges``) as a second output.
- A function (a training step) whose arguments hold Flax NNX graph nodes (``nnx.Module``,
  ``nnx.Optimizer``, ``nnx.MultiMetric``, ``nnx.Rngs``, anywhere in a tuple, list or dict
  argument) is compiled as ``nnx.jit`` runs it: one ``nnx.split`` over all of them (so an object
  two of them hold stays one), the state the program's first argument, merged inside the traced
  program and put back in the arguments' places; what the step changed (the parameters after the
  update, the optimizer's moments and step, BatchNorm statistics, RNG counts, metric totals) is
  returned beside what the step returns, each variable named by the argument that holds it
  (``optimizer/opt_state/0/mu/linear/kernel``).
- Equinox: ``params, static = eqx.partition(model, eqx.is_array)``; the program is
  ``eqx.combine(params, static)(*args)``.
- Keras 3: ``model.stateless_call(trainable, non_trainable, *args)``, with the variables' values
  as the first two arguments. A stateless training step (Keras's own guide's: ``stateless_call``
  and ``optimizer.stateless_apply`` on the variables it is handed, the new ones returned) is a
  plain function already; Keras variables among its arguments are handed over as their values.
- Flax Linen: an unbound module object (``model = Net()``) is initialized as Linen's examples do,
  ``variables = model.init(jax.random.key(0), *inputs)`` (with a key for each RNG stream it asks
  for); the program is ``model.apply(variables, *args)`` with ``variables`` its first argument,
  and where the call updates a collection (BatchNorm's ``batch_stats``) it is applied with that
  collection mutable and the new values are its second output.

Flax NNX and Equinox put no name scope of their own into the program, so while the program is
traced each submodule's call runs inside ``jax.named_scope`` of its attribute name: op names
read ``attn/q_proj/dot_general`` like Linen's and Keras's do, and the graph's name scopes are the
model's layers. A library is recognised by the model's class, only when the user's code
imported it (this module imports none of them itself). A Linen ``apply`` written by the user
needs nothing (``model = lambda params, x: Net().apply(params, x)``).
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import os
import re
import sys
import threading
import types
from dataclasses import dataclass, field, fields, is_dataclass, replace
from typing import Callable, Iterable

from analysis.compile.user_errors import error_from_exception
from analysis.errors import ExplorerError

KERAS_BACKEND = "jax"  # set (if unset) before the user's code runs, so `import keras` picks JAX


@dataclass
class StateChanges:
    """The state a call changed (Flax NNX: BatchNorm statistics, RNG counters, ``self.x = ...``, a
    training step's parameters, optimizer state and metrics; Flax Linen: the mutable
    collections it updated), found as the program is traced: each variable's path and type,
    whether the call created it and, for an optimizer's state, the optax transformation it
    belongs to. The program returns those variables' new values as a second output, as
    ``nnx.jit`` hands a module's updated state back, so the compile holds the work that
    updates them."""

    # [{"path": "bn/mean", "type": "BatchStat", "new": False}, {..., "optimizer": "adam"}]
    changed: list = field(default_factory=list)


@dataclass(frozen=True)
class Split:
    fn: Callable
    inputs: tuple
    library: str | None  # "flax.nnx", "flax.linen", "equinox", "keras", "torch" or None (a plain callable)
    parameters: int = 0  # how many parameter (and state) arrays became inputs
    state: StateChanges | None = None  # the state the call changes (filled as it is traced)


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
    ``blocks/linear`` like any other layer. A copy of a root module (one of ``modules`` with the
    empty path: Flax NNX's ``nnx.grad`` calls a copy of the model it differentiates) is not a
    layer, but what it holds is named as in the original."""
    import jax

    modules = list(modules)
    names = {id(m): str(path[-1]) for path, m in modules if path}
    roots = {type(m) for path, m in modules if not path}
    where: dict[type, set] = {}
    for path, m in modules:
        if path:
            where.setdefault(type(m), set()).add(str(path[-1]))
    patched = {}
    for cls in {type(m) for _, m in modules}:
        orig = getattr(cls, "__call__", None)
        if orig is None:  # a module called only through its other methods
            continue

        def call(self, *args, __orig=orig, **kw):
            name = names.get(id(self))
            if name is None:
                only = where.get(type(self), ())
                if len(only) != 1:
                    if type(self) in roots and submodules is not None:  # a root or its copy: not a layer
                        for path, sub in submodules(self):
                            if path:
                                names.setdefault(id(sub), str(path[-1]))
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
    """(path, module) of a Flax NNX module and every module under it, each path as the attributes
    read (``_attribute_path``): an item of an ``nnx.List`` or ``nnx.Dict`` is ``layers[0]``,
    ``blocks['attn']``, and the container itself is no layer of its own."""
    from flax import nnx

    graph = [(tuple(p), n) for p, n in nnx.iter_graph(model)]
    nodes = dict(graph)
    return [(_attribute_path(p, nodes), n) for p, n in graph
            if isinstance(n, nnx.Module) and not _is_container(n)]


def _is_container(node) -> bool:
    """A list or dict of modules (``nnx.List``, ``nnx.Dict``, a plain list or dict held as data):
    its items are named by their index or key within it."""
    from flax import nnx

    return isinstance(node, (nnx.List, nnx.Dict, list, tuple, dict))


def _attribute_path(path: tuple, nodes: dict) -> tuple:
    """A graph path as the attributes a user reads: each element after a container joined to the
    container's name as an index (``("layers", 0)`` -> ``("layers[0]",)``,
    ``("blocks", "attn", "q")`` -> ``("blocks['attn']", "q")``, ``("grid", 0, 1)`` ->
    ``("grid[0][1]",)``)."""
    out: list[str] = []
    for i, key in enumerate(path):
        if out and i and _is_container(nodes.get(path[:i])):
            out[-1] += f"[{key!r}]"
        else:
            out.append(str(key))
    return tuple(out)


def _nnx_node_modules(nodes: dict) -> list:
    """The (path, module) pairs of a training step's graph nodes, each path relative to the
    argument that holds it (a module handed to the step is a root, like a model object); a module
    two of them hold is named once, by its shortest path."""
    seen: dict[int, tuple] = {}
    for node in nodes.values():
        for path, m in _nnx_modules(node):
            if id(m) not in seen or len(path) < len(seen[id(m)][0]):
                seen[id(m)] = (path, m)
    return list(seen.values())


def _path_text(path) -> str:
    return "/".join(map(str, path))


# optax states that only wrap another's or count: not what an optimizer is called
_OPTAX_WRAPPERS = ("Empty", "InjectHyperparams", "InjectStatefulHyperparams", "MultiSteps", "Masked",
                   "ScaleBySchedule", "ApplyIfFinite", "Partition", "MultiTransform")


def optax_kind(opt_state) -> str:
    """The optax transformation an optimizer's state belongs to, from its state classes' names
    (``ScaleByAdamState`` -> ``adam``, ``TraceState`` -> ``momentum``), ``+``-joined for a chain;
    empty where none holds moments (plain SGD)."""
    names, todo = [], [opt_state]
    while todo:
        x = todo.pop(0)
        if isinstance(x, tuple) and hasattr(x, "_fields"):
            name = type(x).__name__
            name = name[:-len("State")] if name.endswith("State") else name
            name = name[len("ScaleBy"):] if name.startswith("ScaleBy") else name
            if name not in _OPTAX_WRAPPERS and any(f != "count" for f in x._fields):
                names.append({"Trace": "momentum"}.get(name, name.lower()))
            todo.extend(x)
        elif isinstance(x, (tuple, list)):
            todo.extend(x)
        elif isinstance(x, dict):
            todo.extend(x.values())
    return "+".join(dict.fromkeys(names))


# optax transformations that only run others: their update is no layer of its own
_OPTAX_PASS_THROUGH = frozenset({"chain", "named_chain", "with_extra_args_support"})
_NNX_UPDATE = "\x00nnx.Optimizer.update"  # names itself after its optimizer's state


def _optax_update_codes(modules: tuple) -> dict:
    """The code of each optax transformation's update function, by the transformation that makes
    it: optax writes each as a function inside its maker (``scale_by_adam.<locals>.update_fn``
    -> ``scale_by_adam``), and ``apply_updates``; read from the optax modules loaded."""
    out = {}
    for name in modules:
        for v in list(vars(sys.modules[name]).values()):
            if not isinstance(v, types.FunctionType) or v.__module__ != name:
                continue
            if v.__name__ == "apply_updates":
                out[v.__code__] = "apply_updates"
            for c in v.__code__.co_consts:
                if isinstance(c, types.CodeType) and c.co_name in ("update_fn", "update") \
                        and c.co_qualname == f"{v.__name__}.<locals>.{c.co_name}":
                    out[c] = v.__name__
    return out


_optax_codes = functools.lru_cache(maxsize=4)(_optax_update_codes)
_scopes_held = threading.Lock()


@contextlib.contextmanager
def optimizer_scopes():
    """While tracing: an optimizer's update inside a named scope, so its ops are a layer named
    after the optimizer, as Keras names its own (``adam``): the outermost optax update (a
    user's ``tx.update(grads, opt_state, params)``, or ``nnx.Optimizer.update``) is named by
    its state's transformations (``optax_kind``: ``adam``; ``optimizer`` where no state holds
    moments), and inside it each transformation of a chain by its maker
    (``clip_by_global_norm``, ``scale_by_adam``, ``scale``, ``apply_updates``).

    optax's transformations are closures inside tuples that cannot be wrapped in place; Python's
    ``sys.monitoring`` (3.12+) reports the start and return of just their update functions'
    code, and the scope is entered and left there. Nothing of the user's code or of optax is
    changed; without ``sys.monitoring`` (Python 3.11) the update stays unnamed."""
    mon = getattr(sys, "monitoring", None)
    codes: dict = {}
    loaded = tuple(sorted(n for n in list(sys.modules) if n == "optax" or n.startswith("optax.")))
    if loaded:
        codes.update(_optax_codes(loaded))
    nnx = sys.modules.get("flax.nnx")
    update = getattr(getattr(nnx, "Optimizer", None), "update", None)
    if isinstance(update, types.FunctionType):
        codes[update.__code__] = _NNX_UPDATE
    if mon is None or not codes or not _scopes_held.acquire(blocking=False):
        yield  # (already held: an outer program's scopes are on)
        return
    tool = next((i for i in (4, 3, 5, 2) if mon.get_tool(i) is None), None)
    if tool is None:
        _scopes_held.release()
        yield
        return
    import jax

    local = threading.local()

    def stack() -> list:
        got = getattr(local, "stack", None)
        if got is None:
            got = local.stack = []
        return got

    def started(code, offset):
        what = codes.get(code)
        frame = sys._getframe(1)
        held = stack()
        if what == _NNX_UPDATE:
            name = optax_kind(getattr(frame.f_locals.get("self"), "opt_state", None)) or "optimizer"
        elif not held:  # the outermost update: the optimizer
            name = what if what == "apply_updates" else optax_kind(frame.f_locals.get("state")) or "optimizer"
        else:
            name = None if what in _OPTAX_PASS_THROUGH else what
        scope = jax.named_scope(name) if name else None
        if scope is not None:
            scope.__enter__()
        held.append((frame, scope))

    def returned(code, offset, value):
        frame, held = sys._getframe(1), stack()
        if any(f is frame for f, _ in held):  # (one that raised is left here)
            while held:
                f, scope = held.pop()
                if scope is not None:
                    scope.__exit__(None, None, None)
                if f is frame:
                    break

    events = mon.events.PY_START | mon.events.PY_RETURN
    try:
        mon.use_tool_id(tool, "xla-explorer layer scopes")
        mon.register_callback(tool, mon.events.PY_START, started)
        mon.register_callback(tool, mon.events.PY_RETURN, returned)
        for code in codes:
            mon.set_local_events(tool, code, events)
        yield
    finally:
        for code in codes:
            mon.set_local_events(tool, code, 0)
        mon.register_callback(tool, mon.events.PY_START, None)
        mon.register_callback(tool, mon.events.PY_RETURN, None)
        mon.free_tool_id(tool)
        held = stack()
        while held:  # an update that raised: its scope is left with it
            _, scope = held.pop()
            if scope is not None:
                scope.__exit__(None, None, None)
        _scopes_held.release()


def _holds_optax_state(inputs) -> bool:
    """Whether a function's arguments hold an optax optimizer state (a state tuple of optax's)."""
    todo = list(inputs)
    while todo:
        x = todo.pop()
        if isinstance(x, tuple) and hasattr(x, "_fields") and type(x).__module__.startswith("optax"):
            return True
        if isinstance(x, (tuple, list)):
            todo.extend(x)
        elif isinstance(x, dict):
            todo.extend(x.values())
        elif is_dataclass(x) and not isinstance(x, type):  # flax.struct's TrainState
            todo.extend(getattr(x, f.name, None) for f in fields(x))
    return False


def _with_optimizer_scopes(fn):
    @functools.wraps(fn)  # the program keeps its name (``jit(train_step)``)
    def program(*args, **kwargs):
        with optimizer_scopes():
            return fn(*args, **kwargs)
    return program


def _optimizers(root) -> dict:
    """Where each ``nnx.Optimizer`` under ``root`` is (its path) -> its ``optax_kind``."""
    from flax import nnx

    return {tuple(p): optax_kind(getattr(n, "opt_state", None)) for p, n in nnx.iter_graph(root)
            if isinstance(n, nnx.Optimizer)}


def _nnx_changed(before: dict, root, changes: StateChanges, optimizers: dict | None = None) -> dict:
    """The variables of ``root`` (after the call) whose value is not the one they came in with
    (``before``: path -> id of the value), recorded in ``changes``; their new values by path."""
    from flax import nnx

    changed = {p: v for p, v in nnx.to_flat_state(nnx.state(root)) if before.get(p) != id(v.get_value())}
    entries = []
    for p, v in changed.items():
        e = {"path": _path_text(p), "type": type(v).__name__, "new": p not in before}
        for where, kind in (optimizers or {}).items():
            if kind and tuple(p[:len(where) + 1]) == (*where, "opt_state"):
                e["optimizer"] = kind
        entries.append(e)
    changes.changed = entries
    return {_path_text(p): v.get_value() for p, v in changed.items()}


def _value_ids(state) -> dict:
    from flax import nnx

    return {p: id(v.get_value()) for p, v in nnx.to_flat_state(state)}


def _argument_names(fn, n: int) -> list[str]:
    """The names of ``fn``'s first ``n`` positional parameters (``args[i]`` past a ``*args``,
    ``arg<i>`` where there is no signature)."""
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        params = []
    names = []
    for i in range(n):
        star = next((k for k, p in enumerate(params[:i + 1]) if p.kind == p.VAR_POSITIONAL), None)
        if star is not None:
            names.append(f"{params[star].name}[{i - star}]")
        elif i < len(params) and params[i].kind in (params[i].POSITIONAL_ONLY, params[i].POSITIONAL_OR_KEYWORD):
            names.append(params[i].name)
        else:
            names.append(f"arg{i}")
    return names


def _nnx_step(model, inputs: tuple) -> Split | None:
    """A function handed Flax NNX graph nodes, as ``nnx.jit`` runs it (see the module's
    docstring); None where no argument holds one."""
    import jax
    from flax import nnx
    from flax.nnx import graph

    def hole_or_node(x):
        return x is None or graph.is_graph_node(x)

    flat, treedef = jax.tree_util.tree_flatten_with_path(inputs, is_leaf=hole_or_node)
    names = _argument_names(model, len(inputs))
    at: dict[int, str] = {}  # leaf index -> the node's name (its argument, and where in it)
    for i, (path, leaf) in enumerate(flat):
        if leaf is not None and graph.is_graph_node(leaf):
            at[i] = names[path[0].idx] + jax.tree_util.keystr(tuple(path[1:]))
    if not at:
        return None
    nodes = {key: flat[i][1] for i, key in at.items()}
    graphdef, state = nnx.split(nodes)  # one split: an object two of them hold stays one
    optimizers = _optimizers(nodes)
    holed = treedef.unflatten([None if i in at else leaf for i, (_, leaf) in enumerate(flat)])
    changes = StateChanges()

    def nnx_step_program(state, *args):
        before = _value_ids(state)
        merged = nnx.merge(graphdef, state)
        leaves = treedef.flatten_up_to(args)
        for i, key in at.items():
            leaves[i] = merged[key]
        with layer_scopes(_nnx_node_modules(merged), _nnx_modules):
            out = model(*treedef.unflatten(leaves))
        new = _nnx_changed(before, merged, changes, optimizers)
        return (out, new) if new else out

    # the program is named as the user's function (``jit(train_step)``); its signature is its own
    nnx_step_program.__name__ = nnx_step_program.__qualname__ = getattr(model, "__name__", "model")
    return Split(nnx_step_program, (state, *holed), "flax.nnx", len(jax.tree_util.tree_leaves(state)), changes)


# Flax Linen's words for an RNG stream a call needs and was not given
_NEEDS_RNG = re.compile(r'needs PRNG for "(\w+)"')


def _linen_object(model, inputs: tuple) -> Split:
    """An unbound Flax Linen module: initialized as Linen's examples do, applied as a function of
    its variables (see the module's docstring)."""
    import jax
    from flax import errors as flax_errors

    variables = model.init(jax.random.key(0), *inputs)
    rngs: dict = {}  # streams the call asks for (dropout), a key each, the program's second input
    mutable: list | bool = False
    for _ in range(8):  # each try finds one stream or one collection the call needs
        try:
            jax.eval_shape(lambda v, r, *a: model.apply(v, *a, rngs=r or None, mutable=mutable), variables, rngs,
                           *inputs)
            break
        except flax_errors.InvalidRngError as e:
            m = _NEEDS_RNG.search(str(e))
            if m is None or m.group(1) in rngs:
                raise
            rngs[m.group(1)] = jax.random.key(len(rngs) + 1)
        except flax_errors.ModifyScopeVariableError:
            if mutable:
                raise
            mutable = [c for c in variables if c != "params"]
    changes = StateChanges()

    def linen_program(variables, *args):
        r, args = (args[0], args[1:]) if rngs else (None, args)
        if not mutable:
            return model.apply(variables, *args, rngs=r)
        out, updates = model.apply(variables, *args, rngs=r, mutable=mutable)
        before = {jax.tree_util.keystr(p): id(x) for p, x in jax.tree_util.tree_flatten_with_path(variables)[0]}
        changes.changed = [
            {"path": _path_text(k.key for k in p), "type": "BatchStat" if p[0].key == "batch_stats" else str(p[0].key),
             "new": jax.tree_util.keystr(p) not in before}
            for p, x in jax.tree_util.tree_flatten_with_path(updates)[0] if before.get(jax.tree_util.keystr(p)) != id(x)]
        return out, updates

    return Split(linen_program, (variables, *((rngs,) if rngs else ()), *inputs), "flax.linen",
                 len(jax.tree_util.tree_leaves(variables)), changes)


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
                walk(x, p[:-1] + (f"{p[-1]}[{k!r}]",) if p else (str(k),))

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


def _is_torch_module(model) -> bool:
    return _is_instance(model, "torch.nn", "Module")


def _holds_torch(inputs) -> bool:
    """Whether a torch tensor is among the inputs (top level, or in a tuple, list or dict)."""
    torch = sys.modules.get("torch")
    if torch is None:
        return False
    stack = list(inputs)
    while stack:
        v = stack.pop()
        if isinstance(v, torch.Tensor):
            return True
        if isinstance(v, (list, tuple)):
            stack.extend(v)
        elif isinstance(v, dict):
            stack.extend(v.values())
    return False


def _torch_paths(model) -> list:
    """(path, module) of a PyTorch module and every module under it, by ``named_modules()``'s
    names; an item of a container that is never called itself (``nn.ModuleList``,
    ``nn.ModuleDict``) is joined to the container's name (``layers.0``), so the scopes read as the
    module's own dotted names with ``/`` where calls nest (``encoder/layers.0/self_attn``). A
    ``nn.Sequential`` is called, so it is a layer and its items ``0``, ``1`` within it."""
    import torch

    containers = (torch.nn.ModuleList, torch.nn.ModuleDict, torch.nn.ParameterList, torch.nn.ParameterDict)
    mods = dict(model.named_modules(remove_duplicate=True))
    out = []
    for name, m in mods.items():
        if isinstance(m, containers):
            continue
        if not name:
            out.append(((), m))
            continue
        parts = name.split(".")
        path: list[str] = []
        for i, key in enumerate(parts):
            parent = mods.get(".".join(parts[:i])) if i else None
            if path and isinstance(parent, containers):
                path[-1] += "." + key
            else:
                path.append(key)
        out.append((tuple(path), m))
    return out


@contextlib.contextmanager
def _torch_op_scopes():
    """While tracing: torchax scopes each op it lowers under the op's name, ``aten::gelu`` for an
    op PyTorch dispatched, but only ``linear`` for a torch function it lowers whole
    (``F.linear``), a name a submodule could have. Such a function is named ``torch::linear`` for
    the duration, so every op's scope reads as PyTorch names ops (``namespace::name``) and the
    layer tree tells ops from modules (``analysis.program.layers``). torchax's naming function is
    put back whatever happens; a torchax without it is left alone."""
    from torchax import tensor

    orig = getattr(tensor, "_name_of_func", None)
    if orig is None:
        yield
        return

    def name(func):
        n = orig(func)
        return n if "::" in n else f"torch::{n}"

    tensor._name_of_func = name
    try:
        yield
    finally:
        tensor._name_of_func = orig


def _torch_split(model, inputs: tuple, filename: str) -> Split:
    """A PyTorch ``nn.Module`` (or a function of torch tensors) as a JAX function through torchax:
    the module's parameters and buffers (``torchax.extract_jax``, deduplicated: a tied weight is
    one input) the program's first argument, the example inputs' tensors as arrays; each
    submodule's call inside ``jax.named_scope`` of its name (``_torch_paths``). torch is imported
    only here, for a model that is torch's."""
    import torch
    import torchax
    from jax.extend import source_info_util

    # An op's source line is the user's: JAX skips torch's and torchax's frames as it skips its own
    # (else every op would point into torchax's lowering of it), and this file's call wrapper
    # (``layer_scopes``), which sits between a module's caller and its forward
    for path in (os.path.dirname(torch.__file__) + os.sep, os.path.dirname(torchax.__file__) + os.sep, __file__):
        source_info_util.register_exclusion(path)
    env = torchax.default_env()
    args = env.t2j_copy(inputs)
    if isinstance(model, torch.nn.Module):
        states, jax_fn = torchax.extract_jax(model, env)
        paths = _torch_paths(model)

        def torch_program(states, *args):
            with layer_scopes(paths), _torch_op_scopes():
                return jax_fn(states, args)

        torch_program.__name__ = torch_program.__qualname__ = type(model).__name__
        import jax

        return Split(torch_program, (states, *args), "torch", len(jax.tree_util.tree_leaves(states)))

    # a function of torch tensors (a training step calling ``torch.func.functional_call(net, ...)``):
    # the modules the file binds at its top level are its layers, each under the name it is bound to
    held = [((name, *path), m) for name, v in (getattr(model, "__globals__", None) or {}).items()
            if isinstance(v, torch.nn.Module) and v is not model for path, m in _torch_paths(v)]

    @functools.wraps(model)  # the user's name kept
    def torch_function(*args):
        with env, layer_scopes(held), _torch_op_scopes():
            out = model(*env.j2t_iso(args))
        return env.t2j_iso(out)

    return Split(torch_function, args, "torch")


def split_model(model, inputs: tuple, filename: str) -> Split:
    """``model`` and its example inputs as a function of arrays only; a training step's optimizer
    update (a Flax NNX or Equinox program's, or a function handed an optax state) traced inside
    ``optimizer_scopes``."""
    s = _split_model(model, inputs, filename)
    if s.library in ("flax.nnx", "equinox") or (s.library is None and
                                                 (s.fn is not model or _holds_optax_state(s.inputs))):
        s = replace(s, fn=_with_optimizer_scopes(s.fn))
    return s


def _split_model(model, inputs: tuple, filename: str) -> Split:
    import jax

    try:
        if _is_torch_module(model) or _holds_torch(inputs):
            return _torch_split(model, inputs, filename)
        if _is_instance(model, "flax.nnx", "Module"):
            from flax import nnx

            graphdef, state = nnx.split(model)
            changes = StateChanges()

            def nnx_program(state, *args):
                before = _value_ids(state)
                m = nnx.merge(graphdef, state)
                with layer_scopes(_nnx_modules(m), _nnx_modules):
                    out = m(*args)
                new = _nnx_changed(before, m, changes)
                return (out, new) if new else out

            return Split(nnx_program, (state, *inputs), "flax.nnx", len(jax.tree_util.tree_leaves(state)), changes)
        if _is_instance(model, "flax.linen", "Module") and getattr(model, "scope", None) is None:
            return _linen_object(model, inputs)
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
        if sys.modules.get("keras") is not None:  # a Keras stateless step handed the variables themselves
            def keras_variable(v):
                return _is_instance(v, "keras", "Variable")

            if any(keras_variable(v) for v in jax.tree_util.tree_leaves(inputs, is_leaf=keras_variable)):
                inputs = jax.tree_util.tree_map(lambda v: v.value if keras_variable(v) else v, inputs,
                                                is_leaf=keras_variable)
        if sys.modules.get("flax.nnx") is not None:
            step = _nnx_step(model, inputs)
            if step is not None:
                return step
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
