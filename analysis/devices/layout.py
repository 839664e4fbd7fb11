"""What each device holds: a sharded program's mesh, its inputs and outputs with their shardings
(which block of each array every device holds, the bytes per device) and its collectives with
the traffic they cause. Read from a Bundle's two HLO texts: the global shapes before the SPMD
partitioner, each device's after it, and the shardings XLA prints. Pure Python.

The Devices view, the CLI and the report read this one model; the bytes each collective moves
are ``analysis.devices.collectives``' ring estimates.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from analysis.devices.collectives import Collective, collectives, module_devices
from analysis.devices.sharding import Sharding, parse_sharding, sharding_of
from analysis.devices.collectives import devices_words


@dataclass
class ArrayLayout:
    role: str  # "input" | "output"
    name: str  # the input's path in the model's arguments (``[1]``), or ``output[i]``
    shape: tuple[int, ...]  # global
    dtype: str
    sharding: Sharding | None
    words: str
    device_bytes: int  # what one device holds of it (the optimized module's per-device shape)
    total_bytes: int  # the whole array
    grid: list[list[str]] = field(default_factory=list)  # the blocks of its first two dims: devices holding each
    parameter: str | None = None  # the optimized entry's parameter (inputs)
    reader: str | None = None  # a kernel that reads it (inputs) or writes it (outputs)


@dataclass
class DeviceLayout:
    devices: int
    mesh: dict | None  # {"axes": {name: size}, "device_ids": [...]} where the bundle records one
    arrays: list[ArrayLayout]
    collectives: list[Collective]

    @property
    def sent_bytes(self) -> int:
        """Bytes each device sends (and receives) for all the collectives, a ring estimate."""
        return sum(c.sent_bytes for c in self.collectives)


_MESH = re.compile(r'#sdy\.mesh<\[([^\]]*)\]')


def mesh_of_module(module) -> dict | None:
    """The Shardy mesh a module names in its frontend attributes (``xla.sdy.meshes``)."""
    text = module.attributes.get("frontend_attributes", "") if module is not None else ""
    m = _MESH.search(text.replace('\\"', '"'))
    if not m:
        return None
    axes = {a: int(n) for a, n in re.findall(r'"([^"]+)"\s*=\s*(\d+)', m.group(1))}
    return {"axes": axes} if axes else None


def _leaves(shape):
    return list(shape.tuple_shapes) if shape.is_tuple else [shape]


def _inferred(global_dims, local_dims) -> Sharding:
    """A sharding read off the shapes alone (global over per-device): devices in order."""
    tiles = tuple(g // l if l and g % l == 0 and g != l else 1 for g, l in zip(global_dims, local_dims))
    n = 1
    for t in tiles:
        n *= t
    return Sharding("tiled", tiles, tuple(range(n))) if n > 1 else Sharding("replicated")


def _grid(s: Sharding | None, shape: tuple[int, ...], devices: int) -> list[list[str]]:
    """Rows x columns of the blocks of ``shape``'s first two dimensions, each the devices holding it."""
    if not shape:
        return [["all" if (s is None or s.kind != "maximal") else str(s.device)]]
    rows_n = s.tiles[0] if s is not None and s.kind == "tiled" and s.tiles else 1
    cols_n = s.tiles[1] if s is not None and s.kind == "tiled" and len(s.tiles) > 1 else 1
    cells = [[[] for _ in range(cols_n)] for _ in range(rows_n)]
    for d in range(devices):
        block = s.block_of(d, shape) if s is not None else tuple((0, x) for x in shape)
        if block is None:
            continue
        r = block[0][0] * rows_n // max(1, shape[0])
        c = block[1][0] * cols_n // max(1, shape[1]) if len(shape) > 1 else 0
        cells[min(r, rows_n - 1)][min(c, cols_n - 1)].append(d)
    return [[devices_words(ds).removeprefix("devices ").removeprefix("device ") if ds else "-" for ds in row]
            for row in cells]


def device_layout(bundle) -> DeviceLayout | None:
    """The bundle's program as its devices hold it; None for a program on one device."""
    post, pre = bundle.module("hlo_after"), bundle.module("hlo_before")
    if post is None:
        return None
    n = module_devices(post)
    if n <= 1:
        return None
    described = bundle.source.get("inputs") or []
    kernel_names = {k.name for k in bundle.kernels}
    entry_users = post.entry.users()

    def reader(name: str) -> str | None:
        """The first kernel reading ``name``, through what launches nothing (bitcasts, tuples)."""
        todo, seen = [name], set()
        while todo:
            for u in entry_users.get(todo.pop(0), []):
                if u.name in kernel_names:
                    return u.name
                if u.name not in seen:
                    seen.add(u.name)
                    todo.append(u.name)
        return None

    def writer(name: str) -> str | None:
        inst = post.entry.by_name.get(name)
        while inst is not None and inst.name not in kernel_names and inst.operands:
            inst = post.entry.by_name.get(inst.operands[0])
        return inst.name if inst is not None and inst.name in kernel_names else None
    arrays: list[ArrayLayout] = []
    post_params = sorted((i for i in post.entry.instructions if i.opcode == "parameter"),
                         key=lambda i: int(i.operand_text or 0) if str(i.operand_text or "0").isdigit() else 0)
    pre_params = sorted((i for i in pre.entry.instructions if i.opcode == "parameter"),
                        key=lambda i: int(i.operand_text or 0) if str(i.operand_text or "0").isdigit() else 0) \
        if pre is not None else []
    for idx, p in enumerate(post_params):
        g = pre_params[idx] if idx < len(pre_params) else p
        s = sharding_of(p) or (sharding_of(g) if g is not p else None) or _inferred(g.shape.dimensions, p.shape.dimensions)
        name = described[idx]["path"] if idx < len(described) and described[idx].get("path") else f"parameter {idx}"
        shape = tuple(g.shape.dimensions)
        arrays.append(ArrayLayout("input", name, shape, g.shape.element_type, s, s.words(len(shape)),
                                  p.shape.byte_size, g.shape.byte_size, _grid(s, shape, n), p.name, reader(p.name)))
    if pre is not None and pre.entry.root is not None and post.entry.root is not None:
        outs = list(zip(_leaves(pre.entry.root.shape), _leaves(post.entry.root.shape)))
        root_sh = parse_sharding(post.entry.root.attributes.get("sharding"))
        for i, (g, local) in enumerate(outs):
            s = root_sh if root_sh is not None and len(outs) == 1 else _inferred(g.dimensions, local.dimensions)
            shape = tuple(g.dimensions)
            writes = post.entry.root.operands[i] if post.entry.root.opcode == "tuple" and i < len(post.entry.root.operands) \
                else post.entry.root.name
            arrays.append(ArrayLayout("output", f"output[{i}]" if len(outs) > 1 else "output", shape, g.element_type, s,
                                      s.words(len(shape)), local.byte_size, g.byte_size, _grid(s, shape, n),
                                      None, writer(writes)))
    mesh = bundle.options.get("mesh") or mesh_of_module(pre)
    return DeviceLayout(n, mesh, arrays, collectives(post))
