"""The layer tree: a model's layers as the hierarchy of the graph, from the ops' names.

Every op of the pre-optimization module carries the name scopes it was traced under in its
``op_name`` (``jit(model)/Net/conv1/conv_general_dilated``; Flax Linen and Keras name their
layers themselves, Flax NNX and Equinox modules get their attribute names from
``analysis.compile.frameworks``, plain JAX code from ``jax.named_scope``). The path without the
``jit(...)`` root, without transformation wrappers (``jvp(...)``, ``transpose(...)``,
``vmap()``, a nested ``jit(_where)``) and without the primitive at its end is the op's layer.

Each layer gets its ops, the kernels they ended in (through the bundle's provenance), and the
bytes and measured time of the kernels that hold only its ops; a kernel holding ops of several
layers (a fusion across a layer boundary) is the parent's and is listed as shared by them.
Pure: reads a Bundle.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field

from analysis.hlo import Module
from analysis.provenance import _walk_compute

_WRAPPER = re.compile(r"^[\w.]*\(.*\)$")  # jit(f), jvp(jit(f)), transpose(...), vmap(), remat(...)


@functools.lru_cache(maxsize=1 << 16)  # the same op_names come back for every view laid out
def layer_path(op_name: str) -> tuple[str, ...]:
    """The layer an op belongs to, from its op_name: scope components without the root, the
    transformation wrappers and the primitive (the last component)."""
    # an op XLA or JAX merged from several carries their names joined by ";": the first one is its own
    parts = [p for p in op_name.split(";", 1)[0].split("/") if p]
    if len(parts) <= 1:
        return ()
    return tuple(p for p in parts[:-1] if not _WRAPPER.match(p))


@dataclass
class Layer:
    path: tuple[str, ...]
    ops: list[str] = field(default_factory=list)  # pre-optimization instructions directly in it
    children: dict[str, "Layer"] = field(default_factory=dict)
    kernels: list[str] = field(default_factory=list)  # kernels holding ops of this layer only (its subtree)
    shared: list[str] = field(default_factory=list)  # kernels that also hold ops of other layers
    bytes: int = 0  # of its own kernels
    time_s: float | None = None  # of its own kernels, per step, when measured
    unnamed: set = field(default_factory=set)  # (the root's) ops without an op_name: see layers_of_bundle

    @property
    def name(self) -> str:
        return self.path[-1] if self.path else "(model)"

    def walk(self):
        """This layer and every layer below it, depth first."""
        yield self
        for c in self.children.values():
            yield from c.walk()

    def all_ops(self) -> list[str]:
        return [op for layer in self.walk() for op in layer.ops]

    def find(self, path: tuple[str, ...]) -> "Layer | None":
        node = self
        for p in path[len(self.path):]:
            node = node.children.get(p)
            if node is None:
                return None
        return node


def layer_tree(pre: Module) -> Layer:
    """The layers of a pre-optimization module, each with the compute ops directly in it."""
    root = Layer(())
    for inst, key in _walk_compute(pre):
        path = layer_path(key[0]) if key else ()
        if not key or not key[0]:
            root.unnamed.add(inst.name)
        node = root
        for i in range(len(path)):
            node = node.children.setdefault(path[i], Layer(path[: i + 1]))
        node.ops.append(inst.name)
    return root


def layers_of_bundle(bundle) -> Layer | None:
    """The layer tree of a bundle with kernels, bytes and (when measured) time per layer; made
    once per bundle (and again when its program, provenance, kernels or timings are replaced).
    Callers must not change it."""
    return bundle.derived("layers", (bundle.stages.get("hlo_before"), bundle.provenance, bundle.kernels,
                                     bundle.timings), lambda: _layers_of_bundle(bundle))


def _layers_of_bundle(bundle) -> Layer | None:
    pre = bundle.module("hlo_before")
    if pre is None:
        return None
    root = layer_tree(pre)
    prov = bundle.provenance
    if prov is None:
        return root
    by_kernel = {k.name: k for k in bundle.kernels}
    rows = (bundle.timings or {}).get("kernels") or {}
    # the deepest layer that holds all of a kernel's ops
    # Ops without an op_name (constants and their broadcasts that JAX hoisted and XLA shares)
    # say nothing about where a kernel belongs: counted, they put every layer norm of a stack
    # at the root (its epsilon) rather than in its layer. A kernel of such ops only is the root's.
    owner: dict[str, tuple[str, ...]] = {}
    for layer in root.walk():
        for op in layer.ops:
            if op in root.unnamed:
                continue
            for kn in prov.pre_to_kernels.get(op, []):
                p = owner.get(kn)
                owner[kn] = layer.path if p is None else _common(p, layer.path)
    for op in root.unnamed:
        for kn in prov.pre_to_kernels.get(op, []):
            owner.setdefault(kn, ())
    for kn, path in owner.items():
        layer = root.find(path)
        if layer is None:
            continue
        layer.kernels.append(kn)
        k = by_kernel.get(kn)
        layer.bytes += k.bytes if k is not None else 0
        row = rows.get(kn)
        if row is not None and row.get("median_s") is not None and not row.get("inclusive"):
            layer.time_s = (layer.time_s or 0.0) + row["median_s"]
    for layer in root.walk():  # kernels that cross into this layer from a parent's fusion
        mine = set(layer.all_ops())
        inside = {kn for sub in layer.walk() for kn in sub.kernels}
        layer.shared = sorted({kn for op in mine for kn in prov.pre_to_kernels.get(op, [])} - inside)
    _roll_up(root)
    return root


def _common(a: tuple, b: tuple) -> tuple:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return a[:n]


def _roll_up(layer: Layer) -> tuple[int, float | None]:
    """Totals of a subtree into each layer: bytes and time include the layers below."""
    total_b, total_t = layer.bytes, layer.time_s
    for c in layer.children.values():
        b, t = _roll_up(c)
        total_b += b
        if t is not None:
            total_t = (total_t or 0.0) + t
    layer.bytes, layer.time_s = total_b, total_t
    return total_b, total_t
