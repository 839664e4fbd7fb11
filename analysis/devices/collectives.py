"""Collectives of an optimized module: which devices take part (replica groups, in every form XLA
prints), in words, and how many bytes each device sends and receives, an estimate under the
standard ring algorithms. Pure Python: reads ``analysis.hlo`` instructions.

The estimate (``Collective.sent_bytes``): for a group of n devices and a per-device buffer of B
bytes, a ring all-reduce sends 2(n-1)/n x B from each device (a reduce-scatter then an
all-gather), an all-gather (n-1)/n of the gathered buffer, a reduce-scatter (n-1)/n of its
input, an all-to-all (n-1)/n of its input (each device keeps its own block); a
collective-permute sends its whole operand from every source. Each device receives as much as
it sends. Times at a link's bandwidth are estimates too (``estimate_seconds``), said so
wherever they are shown.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from analysis.hlo.ir import Instruction, Module
from analysis.program.kernels import NO_KERNEL

# The communicating opcodes (an async start stands for its pair: the done moves nothing).
KINDS = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all", "collective-permute",
         "collective-broadcast", "ragged-all-to-all")

# NVIDIA H200 data sheet: NVLink 900 GB/s per GPU, both directions together.
NVLINK_H200_BYTES_PER_S = 900e9


@dataclass(frozen=True)
class Collective:
    name: str  # the instruction that launches it (an async pair: its start)
    kind: str  # one of KINDS
    groups: tuple[tuple[int, ...], ...]  # the devices of each group (empty: not known)
    pairs: tuple[tuple[int, int], ...]  # collective-permute: (source, target) pairs
    buffer_bytes: int  # the buffer the algorithm works on, per device (see the module's docstring)
    is_async: bool = False
    # an async pair: the kernels XLA scheduled between its start and its done (work that can
    # overlap the communication), in schedule order
    overlapped: tuple[str, ...] = ()

    @property
    def group_size(self) -> int:
        return max((len(g) for g in self.groups), default=1)

    @property
    def sent_bytes(self) -> int:
        """Bytes each device sends (and receives), an estimate under the ring algorithms."""
        n, b = self.group_size, self.buffer_bytes
        if self.kind == "collective-permute":
            return b if self.pairs else 0
        if n <= 1:
            return 0
        if self.kind == "all-reduce":
            return 2 * (n - 1) * b // n
        return (n - 1) * b // n

    def estimate_seconds(self, bytes_per_s: float = NVLINK_H200_BYTES_PER_S) -> float:
        """The time to move ``sent_bytes`` each way at ``bytes_per_s`` (both directions together,
        as data sheets give it): an estimate, never a measurement."""
        return self.sent_bytes / (bytes_per_s / 2)

    def words(self) -> str:
        """What it does, in words: "sum over devices 0-7", "each device sends to the next: ..."."""
        if self.kind == "collective-permute":
            return permute_words(self.pairs)
        verb = {"all-reduce": "sum over", "all-gather": "gathered from", "reduce-scatter": "summed and split over",
                "all-to-all": "exchanged among", "ragged-all-to-all": "exchanged among",
                "collective-broadcast": "broadcast to"}.get(self.kind, "over")
        return f"{verb} {groups_words(self.groups)}"


# ----------------------------------------------------------------------------- replica groups

def _ints(text: str) -> list[int]:
    return [int(x) for x in re.findall(r"-?\d+", text)]


def iota_devices(dims: list[int], reshape: list[int], perm: list[int] | None) -> list[int]:
    """The device list of an iota tile assignment: range(prod) shaped ``reshape``, transposed
    by ``perm``, flattened."""
    total = 1
    for d in reshape:
        total *= d
    flat = list(range(total))
    if not perm:
        return flat
    strides = [1] * len(reshape)
    for i in range(len(reshape) - 2, -1, -1):
        strides[i] = strides[i + 1] * reshape[i + 1]
    shape_t = [reshape[p] for p in perm]
    out = []
    index = [0] * len(shape_t)
    for _ in range(total):
        out.append(sum(index[k] * strides[perm[k]] for k in range(len(perm))))
        for k in range(len(shape_t) - 1, -1, -1):  # next index, last dimension fastest
            index[k] += 1
            if index[k] < shape_t[k]:
                break
            index[k] = 0
    return out


def parse_replica_groups(text: str | None, devices: int = 1) -> tuple[tuple[int, ...], ...]:
    """Replica groups as XLA prints them -> the devices of each group:
    ``{{0,1},{2,3}}``; ``{}`` (all ``devices`` in one); the iota form ``[2,4]<=[8]`` or
    ``[2,4]<=[4,2]T(1,0)``; the mesh form ``mesh['a'=2,'b'=4] {'b'}`` (groups along the named
    axes). Empty where the text is none of these."""
    t = (text or "").strip()
    if not t or t == "{}":
        return (tuple(range(devices)),) if devices > 1 else ()
    m = re.fullmatch(r"\[([\d,\s]+)\]\s*<=\s*\[([\d,\s]+)\](?:\s*T\(([\d,\s]+)\))?", t)
    if m:
        shape, reshape = _ints(m.group(1)), _ints(m.group(2))
        flat = iota_devices(shape, reshape, _ints(m.group(3)) if m.group(3) else None)
        size = shape[-1] if shape else 1
        return tuple(tuple(flat[i:i + size]) for i in range(0, len(flat), size))
    m = re.fullmatch(r"mesh\[(.*?)\]\s*\{(.*?)\}", t)
    if m:
        axes = [(a, int(n)) for a, n in re.findall(r"'?([\w.]+)'?\s*=\s*(\d+)", m.group(1))]
        along = re.findall(r"'?([\w.]+)'?", m.group(2))
        names = [a for a, _ in axes]
        if not axes or any(a not in names for a in along):
            return ()
        sizes = [n for _, n in axes]
        # devices numbered row-major over the mesh; a group: the other axes fixed, these varying
        rest = [i for i, a in enumerate(names) if a not in along]
        inner = [names.index(a) for a in along]
        groups = []
        for fixed in _product([sizes[i] for i in rest]):
            group = []
            for varying in _product([sizes[i] for i in inner]):
                index = [0] * len(sizes)
                for i, v in zip(rest, fixed):
                    index[i] = v
                for i, v in zip(inner, varying):
                    index[i] = v
                flat = 0
                for i, v in enumerate(index):
                    flat = flat * sizes[i] + v
                group.append(flat)
            groups.append(tuple(group))
        return tuple(groups)
    if t.startswith("{"):
        groups = re.findall(r"\{([\d,\s]*)\}", t)
        return tuple(tuple(_ints(g)) for g in groups if g.strip())
    return ()


def _product(sizes: list[int]):
    if not sizes:
        yield ()
        return
    for head in range(sizes[0]):
        for tail in _product(sizes[1:]):
            yield (head,) + tail


def parse_pairs(text: str | None) -> tuple[tuple[int, int], ...]:
    """``source_target_pairs={{0,1},{1,2}}`` -> ((0, 1), (1, 2))."""
    return tuple((int(a), int(b)) for a, b in re.findall(r"\{\s*(\d+)\s*,\s*(\d+)\s*\}", text or ""))


def devices_words(ids) -> str:
    """Device ids in words, runs shortened: "devices 0-7", "devices 0, 2, 4 and 6"."""
    ids = sorted(set(ids))
    if not ids:
        return "no devices"
    runs, start = [], ids[0]
    for prev, cur in zip(ids, ids[1:] + [None]):
        if cur != prev + 1:
            runs.append(f"{start}-{prev}" if prev - start >= 2 else
                        f"{start}, {prev}" if prev != start else str(start))
            start = cur
    words = ", ".join(runs)
    if len(runs) > 1:
        head, _, last = words.rpartition(", ")
        words = f"{head} and {last}"
    return ("device " if len(ids) == 1 else "devices ") + words


def groups_words(groups) -> str:
    if not groups:
        return "its replica groups"
    if len(groups) == 1:
        return devices_words(groups[0])
    shown = "; ".join(devices_words(g).removeprefix("devices ") for g in groups[:4])
    return f"{len(groups)} groups of {len(groups[0])} devices ({shown}{'; ...' if len(groups) > 4 else ''})"


def permute_words(pairs) -> str:
    if not pairs:
        return "sends nothing"
    n = len(pairs)
    if all(t == (s + 1) % n for s, t in pairs) and sorted(s for s, _ in pairs) == list(range(n)):
        return f"a ring: each of devices 0-{n - 1} sends to the next ({pairs[0][0]}→{pairs[0][1]}, ..., {n - 1}→0)"
    shown = ", ".join(f"{s}→{t}" for s, t in pairs[:6])
    return f"sends {shown}{', ...' if n > 6 else ''}"


# ----------------------------------------------------------------------------- of a module

def _kind(inst: Instruction) -> tuple[str | None, Instruction, bool]:
    """(the collective it is, the instruction that carries its attributes, is it async)."""
    op = inst.opcode
    if op in KINDS:
        return op, inst, False
    if op.endswith("-start") and op[:-len("-start")] in KINDS:
        return op[:-len("-start")], inst, True
    if op == "async-start":
        wrapped = inst.async_wrapped
        if isinstance(wrapped, Instruction) and wrapped.opcode in KINDS:
            return wrapped.opcode, wrapped, True
    return None, inst, False


def _bytes(shape) -> int:
    try:
        return int(shape.byte_size)
    except (AttributeError, TypeError, ValueError):
        return 0


def _operand_bytes(inst: Instruction) -> int:
    return sum(_bytes(o.shape) for o in inst.operand_instructions())


def module_devices(module: Module) -> int:
    """The devices the module runs on: ``num_partitions`` x ``replica_count`` of its header."""
    def num(key):
        try:
            return max(1, int(module.attributes.get(key, "1")))
        except ValueError:
            return 1
    return num("num_partitions") * num("replica_count")


def collective_of(inst: Instruction, devices: int = 1) -> Collective | None:
    kind, carrier, is_async = _kind(inst)
    if kind is None:
        return None
    out = _bytes(carrier.shape)
    if is_async and carrier is inst and inst.shape.is_tuple:  # X-start returns (operands, results, ...)
        leaves = inst.shape.tuple_shapes
        out = _bytes(leaves[1]) if len(leaves) > 1 else out
    operands = _operand_bytes(carrier) or out
    buffer = {"all-gather": out, "reduce-scatter": operands}.get(kind, operands)
    if kind == "collective-permute":
        pairs = parse_pairs(carrier.attributes.get("source_target_pairs"))
        groups = (tuple(sorted({d for p in pairs for d in p})),) if pairs else ()
    else:
        pairs = ()
        groups = parse_replica_groups(carrier.attributes.get("replica_groups"), devices)
    return Collective(inst.name, kind, groups, pairs, buffer, is_async)


def _between(inst: Instruction) -> tuple[str, ...]:
    """The kernel-launching instructions scheduled between an async start and its done."""
    comp = inst.computation
    if comp is None:
        return ()
    order = comp.instructions
    i = next((k for k, x in enumerate(order) if x is inst), None)
    if i is None:
        return ()
    out = []
    for x in order[i + 1:]:
        if x.opcode.endswith("-done") and inst.name in x.operands:
            return tuple(out)
        if x.opcode not in NO_KERNEL and not x.opcode.endswith(("-done", "-update")):
            out.append(x.name)
    return ()  # no done found: nothing said


def collectives(module: Module | None) -> list[Collective]:
    """Every collective of the module, in text order (async pairs once, by their start, with
    the kernels scheduled inside the pair)."""
    if module is None:
        return []
    n = module_devices(module)
    out = []
    for inst in module.instructions():
        c = collective_of(inst, n)
        if c is not None and c.is_async:
            c = replace(c, overlapped=_between(inst))
        if c is not None:
            out.append(c)
    return out
