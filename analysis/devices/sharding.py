"""Shardings as XLA prints them on an instruction (``sharding={...}``), read and said in words:
which dimensions are split over how many devices, and which block each device holds. Pure
Python.

Forms read: ``{replicated}``, ``{maximal device=N}``, ``{manual}``, tiled ``{devices=[2,4]0,1,...}``
(devices listed) and ``{devices=[2,4]<=[8]}`` / ``<=[4,2]T(1,0)`` (iota), with
``last_tile_dim_replicate`` or ``last_tile_dims={manual, replicated}`` (the last tile
dimensions are not the array's: the devices in them hold the same block, or are manual), and a
tuple's ``{{...}, {...}}`` (one per element). Shardy's ``xla.sdy.sharding`` frontend attribute
says the same in its own words and is not read here: XLA prints ``sharding=`` beside it.

jax 0.12's XLA dumps the module it starts from with named shardings: ``{mesh['x'=2,'y'=4],
[{'x'}, {}]}`` (the mesh's axes and sizes, then for each dimension of the array the axes it is
split over, major first; an axis no dimension names holds copies). They are read as the tiled
form XLA converts them to: the devices (``device_ids=(...)``, else 0, 1, ... in the mesh's
order) laid out as the mesh, transposed so that each dimension's axes come first, then the
axes of the copies.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from analysis.devices.collectives import iota_devices


@dataclass(frozen=True)
class Sharding:
    kind: str  # "replicated" | "maximal" | "manual" | "tiled" | "unknown"
    tiles: tuple[int, ...] = ()  # how many blocks along each of the array's dimensions
    devices: tuple[int, ...] = ()  # the tile assignment, flattened (array tiles, then the last dims)
    replicated_copies: int = 1  # devices holding each block (last_tile_dim_replicate)
    device: int | None = None  # maximal
    trailing: int = 1  # devices per block in the last tile dimensions (replicated or manual)

    @property
    def device_count(self) -> int:
        return len(self.devices) if self.devices else (1 if self.kind == "maximal" else 0)

    def words(self, rank: int | None = None) -> str:
        """"rows split over 8 devices", "columns split over 4 devices, 2 copies of each", ..."""
        if self.kind == "replicated":
            return "replicated on every device"
        if self.kind == "maximal":
            return f"on device {self.device}"
        if self.kind == "manual":
            return "per device (manual: shard_map)"
        if self.kind != "tiled":
            return "sharded"
        split = [(d, n) for d, n in enumerate(self.tiles) if n > 1]
        if not split:
            return "replicated on every device"
        r = rank if rank is not None else len(self.tiles)

        def dim(d: int) -> str:
            if r == 2:
                return "rows" if d == 0 else "columns"
            if r == 1:
                return "elements"
            return f"dimension {d}"

        parts = [f"{dim(d)} split over {n} devices" for d, n in split]
        text = " and ".join(parts)
        if self.replicated_copies > 1:
            text += f", {self.replicated_copies} copies of each block"
        return text

    def block_of(self, device: int, shape: tuple[int, ...]) -> tuple[tuple[int, int], ...] | None:
        """The [start, stop) ranges of ``shape`` that ``device`` holds (None: it holds none)."""
        if self.kind in ("replicated", "manual") or (self.kind == "tiled" and not any(n > 1 for n in self.tiles)):
            return tuple((0, s) for s in shape)
        if self.kind == "maximal":
            return tuple((0, s) for s in shape) if device == self.device else None
        if self.kind != "tiled" or device not in self.devices or len(self.tiles) != len(shape):
            return None
        flat = self.devices.index(device) // self.trailing
        index = []
        for n in reversed(self.tiles):
            index.append(flat % n)
            flat //= n
        index.reverse()
        out = []
        for i, n, s in zip(index, self.tiles, shape):
            size = -(-s // n)
            out.append((min(s, i * size), min(s, (i + 1) * size)))
        return tuple(out)


def _ints(text: str) -> list[int]:
    return [int(x) for x in re.findall(r"\d+", text)]


def parse_sharding(text: str | None) -> Sharding | None:
    """One sharding (a tuple's: its first element's), or None where there is none."""
    t = (text or "").strip()
    if not t:
        return None
    if t.startswith("{{"):  # a tuple: {{...}, {...}}
        first = re.match(r"\{\s*(\{[^{}]*(?:\{[^{}]*\}[^{}]*)*\})", t)
        return parse_sharding(first.group(1)) if first else Sharding("unknown")
    body = (t[1:-1] if t.startswith("{") and t.endswith("}") else t).strip()
    if body.startswith("mesh["):
        return _named(body)
    if body.startswith("replicated"):
        return Sharding("replicated")
    if body.startswith("manual"):
        return Sharding("manual")
    m = re.match(r"maximal\s+device=(-?\d+)", body)
    if m:
        return Sharding("maximal", device=int(m.group(1)))
    m = re.match(r"devices=\[([\d,\s]+)\]\s*(<=\s*\[[\d,\s]+\](?:\s*T\([\d,\s]+\))?|[\d,\s]+)", body)
    if not m:
        return Sharding("unknown")
    dims = _ints(m.group(1))
    assign = m.group(2)
    if assign.lstrip().startswith("<="):
        im = re.match(r"<=\s*\[([\d,\s]+)\](?:\s*T\(([\d,\s]+)\))?", assign.strip())
        devices = iota_devices(dims, _ints(im.group(1)), _ints(im.group(2)) if im.group(2) else None)
    else:
        devices = _ints(assign)
    rest = body[m.end():]
    last = 0  # tile dimensions after the array's
    copies = 1
    if "last_tile_dim_replicate" in rest:
        last, copies = 1, dims[-1]
    lm = re.search(r"last_tile_dims=\{([^}]*)\}", rest)
    if lm:
        kinds = [k.strip() for k in lm.group(1).split(",") if k.strip()]
        last = len(kinds)
        for k, n in zip(kinds, dims[len(dims) - last:]):
            if k == "replicated":
                copies *= n
        if kinds and all(k == "manual" for k in kinds) and all(n == 1 for n in dims[:len(dims) - last]):
            return Sharding("manual", devices=tuple(devices))
    tiles = tuple(dims[:len(dims) - last]) if last else tuple(dims)
    trailing = 1
    for n in dims[len(tiles):]:
        trailing *= n
    return Sharding("tiled", tiles, tuple(devices), copies, trailing=trailing)


_MESH_RE = re.compile(r"mesh\[([^\]]*)\]")
_MESH_AXIS_RE = re.compile(r"'([^']*)'\s*=\s*(\d+)")
_DEVICE_IDS_RE = re.compile(r"device_ids=\(([\d,\s]*)\)")
_DIM_RE = re.compile(r"\{([^{}]*)\}")
_QUOTED_RE = re.compile(r"'([^']*)'")


def _named(body: str) -> Sharding:
    """A named sharding (``mesh['x'=2,'y'=4], [{'x'}, {}]``) as the tiled one it stands for."""
    m = _MESH_RE.match(body)
    if not m:
        return Sharding("unknown")
    axes = [(name, int(size)) for name, size in _MESH_AXIS_RE.findall(m.group(1))]
    sizes = dict(axes)
    rest = body[m.end():]
    ids = _DEVICE_IDS_RE.search(rest)
    if ids:
        rest = rest[:ids.start()] + rest[ids.end():]
    open_ = rest.find("[")
    close = rest.find("]", open_ + 1)
    if not axes or len(sizes) != len(axes) or open_ < 0 or close < 0 or ":(" in rest:
        return Sharding("unknown")  # (sub-axes, ``'x':(1)2``, are not read)
    dims = [_QUOTED_RE.findall(g) for g in _DIM_RE.findall(rest[open_ + 1:close])]
    used = [a for d in dims for a in d]
    if any(a not in sizes for a in used) or len(set(used)) != len(used):
        return Sharding("unknown")
    total = 1
    for _, n in axes:
        total *= n
    device_ids = _ints(ids.group(1)) if ids else list(range(total))
    if len(device_ids) != total:
        return Sharding("unknown")
    order = [a for a, _ in axes]
    copies_axes = [a for a in order if a not in used]
    perm = [order.index(a) for a in used + copies_axes]
    devices = [device_ids[i] for i in iota_devices([], [n for _, n in axes], perm)]
    tiles = []
    for d in dims:
        n = 1
        for a in d:
            n *= sizes[a]
        tiles.append(n)
    copies = 1
    for a in copies_axes:
        copies *= sizes[a]
    if not any(n > 1 for n in tiles):
        return Sharding("replicated")
    return Sharding("tiled", tuple(tiles), tuple(devices), copies, trailing=copies)


def sharding_of(inst) -> Sharding | None:
    """The sharding an instruction carries (``sharding=`` attribute), if any."""
    return parse_sharding(inst.attributes.get("sharding"))
