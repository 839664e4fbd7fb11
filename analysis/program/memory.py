"""What the compiled program allocates: XLA's buffer assignment, live ranges over the schedule,
the peak and what is live at it (``bundle.memory``, docs/bundle.md "memory").

XLA writes beside the optimized module (``xla_dump_to``; the formats are in docs/xla-findings.md)::

    ...after_optimizations-buffer-assignment.txt   allocations, and the HLO values in each
    ...after_optimizations-live-range.txt          the flattened schedule, each value's live range
    ...after_optimizations-buffer-assignment-values.txt, -memory-usage-report.txt  (not needed)

``parse_buffer_assignment`` and ``parse_live_range`` turn the texts into plain data;
``memory_from_texts`` joins them with the bundle's kernels and optimized module into the
``memory`` dict; ``live_curve``, ``peak_buffers``, ``kernel_temp_bytes`` and ``compare_memory``
read that dict. Pure Python: no JAX.

Live bytes at a point of the schedule are the bytes of the allocation slices that hold a live
value, each byte counted once: values that share a slice (a loop's state updated in place, an
output written over an intermediate) cost it once. Thread-local buffers (scratch of a reduction's
body, on the stack) are not heap memory and are left out, as ``memory_analysis()`` leaves them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from analysis import linear_re
from analysis.errors import ExplorerError

KINDS = ("parameter", "output", "temp", "constant", "thread-local")
HEAP_KINDS = ("parameter", "output", "constant", "temp")  # what the live curve adds up

# A dump is a user's upload: RE2 patterns (``analysis.linear_re``), linear in a line however it is
# written (under ``re`` a lazy "(.*?):?\s*$", or a lazy name before "{...}", took time quadratic in
# one long line), each tried where a cheap test of the line finds what it starts with.
ALLOC = linear_re.compile(r"^allocation (\d+): size (\d+)(.*)$")
VALUE = linear_re.compile(r"^value: <(\d+) ([^\s{>]+)(\{[^}]*\})?( \(phi\))?(?: @(\d+))?> "
                           r"\(size=(\d+),offset=(\d+)\): (.*)$")
PARAM = linear_re.compile(r"parameter (\d+)")
SHAPE = linear_re.compile(r"shape (?:is )?\|([^|]*)\|")
COLOR = linear_re.compile(r"color (\d+)")
SEQ = linear_re.compile(r"^(\d+):(\S+)$")
RANGE = linear_re.compile(r"^(\S+?)(\{[^}]*\}):(\d+)-(\d+)$")
_MAX = linear_re.compile(r"HloLiveRange \(max (\d+)\)")
_DIGITS = frozenset("0123456789")
_BLANK_SET = frozenset(" \t\n\r\f")  # RE2's \s

# Every line of the texts meets one of these: the usual line is read with str methods, and only
# where they find it as the pattern would (tests/ground/test_linear_readers.py checks it); any other
# line goes to the pattern. (A number is ``isdigit() and isascii()``: [0-9]+, tested inline.)


def _no_blank(s: str) -> bool:
    return bool(s) and _BLANK_SET.isdisjoint(s)


def allocation_of(line: str) -> tuple[str, str, str] | None:
    """(number, size, the rest) of ``allocation N: size S...`` (``ALLOC``), else None."""
    if not line.startswith("allocation "):
        return None
    number, colon, rest = line[11:].partition(": size ")
    size = rest[:len(rest) - len(rest.lstrip("0123456789"))]
    if colon and number.isdigit() and number.isascii() and size and "\n" not in rest:
        return number, size, rest[len(size):]
    m = ALLOC.match(line)
    return m.groups() if m else None


def number_after(text: str, words: str, pattern) -> int | None:
    """The number right after the first ``words`` (``parameter 3``: ``pattern``'s group), else
    the pattern's, which looks further."""
    i = text.find(words)
    if i < 0:
        return None
    tail = text[i + len(words):]
    digits = tail[:len(tail) - len(tail.lstrip("0123456789"))]
    if not digits:
        m = pattern.search(text[i:])
        digits = m.group(1) if m else ""
    return int(digits) if digits else None


def shape_of(attrs: str) -> str | None:
    """``shape |...|`` or ``shape is |...|`` (``SHAPE``), else None."""
    i = attrs.find("shape ")
    if i < 0:
        return None
    j = i + 6 + (3 if attrs.startswith("is |", i + 6) else 0)
    end = attrs.find("|", j + 1)
    if attrs[j:j + 1] == "|" and end > j:
        return attrs[j + 1:end]
    m = SHAPE.search(attrs[i:])
    return m.group(1) if m else None


def sequence_step(line: str) -> tuple[str, str] | None:
    """(step, instruction) of ``N:name`` (``SEQ``), else None."""
    step, colon, name = line.partition(":")
    if colon and step.isdigit() and step.isascii() and _no_blank(name):
        return step, name
    m = SEQ.match(line) if line[:1] in _DIGITS else None
    return (m.group(1), m.group(2)) if m else None


def live_range_of(line: str) -> tuple[str, str, str, str] | None:
    """(value, index, first, last) of ``name{index}:first-last`` (``RANGE``), else None."""
    before, colon, steps = line.rpartition(":")
    first, dash, last = steps.partition("-")
    if colon and dash and first.isdigit() and first.isascii() and last.isdigit() and last.isascii() \
            and before.endswith("}"):
        inner_close = before.rfind("}", 0, len(before) - 1)  # the index's "{" comes after any other "}"
        at = before.find("{", max(inner_close + 1, 1))
        if at > 0 and _no_blank(before[:at]):
            return before[:at], before[at:], first, last
    m = RANGE.match(line) if "}:" in line else None
    return m.groups() if m else None


def value_fields(line: str) -> tuple | None:
    """``VALUE``'s groups of a ``value: <id name{index} (phi) @pos> (size=S,offset=O): shape`` line
    (index, ``(phi)`` and ``@pos`` each there or not), else None."""
    head, close, tail = line.partition("> (size=")
    if close and head.startswith("value: <"):
        ident, space, rest = head[8:].partition(" ")
        rest, at, pos = rest.partition(" @")
        phi = " (phi)" if rest.endswith(" (phi)") else None
        rest = rest[:-6] if phi else rest
        brace = rest.find("{")
        name, index = (rest[:brace], rest[brace:]) if brace >= 0 else (rest, None)
        sizes, paren, shape = tail.partition("): ")
        size, comma, offset = sizes.partition(",offset=")
        numbers = ident + size + offset + (pos if at else "0")
        if space and paren and comma and ident and size and offset and (not at or pos) and numbers.isdigit() \
                and numbers.isascii() and _no_blank(name) and ">" not in name and "\n" not in shape \
                and (index is None or index.endswith("}") and "}" not in index[:-1]):
            return ident, name, index, phi, pos if at else None, size, offset, shape
    m = VALUE.match(line) if line.startswith("value: <") else None
    return m.groups() if m else None


@dataclass
class Value:
    """One HLO value in an allocation: the instruction that defines it (and the tuple index)."""

    id: int
    instruction: str
    index: str  # "{}" for the whole result, "{1}" for a tuple element
    size: int
    offset: int
    shape: str
    phi: bool = False
    allocation: int = -1

    @property
    def key(self) -> str:
        return self.instruction + self.index


@dataclass
class Allocation:
    index: int
    size: int
    kind: str  # one of KINDS
    parameter: int | None = None
    maybe_live_out: bool = False
    color: int = 0
    shape: str | None = None
    values: list[Value] = field(default_factory=list)


def _kind(attrs: str) -> str:
    if number_after(attrs, "parameter ", PARAM) is not None:
        return "parameter"
    if "thread-local" in attrs:
        return "thread-local"
    if "constant" in attrs:
        return "constant"
    if "maybe-live-out" in attrs or "output" in attrs:
        return "output"
    return "temp"


def parse_buffer_assignment(text: str, file: str | None = None) -> list[Allocation]:
    """The allocations of a ``*-buffer-assignment.txt`` and the values in each."""
    if not isinstance(text, str) or "allocation" not in text:
        raise ExplorerError("load", "not an XLA buffer assignment (no 'allocation N: size S' line)", file)
    out: list[Allocation] = []
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        m = allocation_of(line)
        if m:
            attrs = m[2].rstrip()
            attrs = attrs[:-1] if attrs.endswith(":") else attrs
            color = number_after(attrs, "color ", COLOR)
            out.append(Allocation(int(m[0]), int(m[1]), _kind(attrs), number_after(attrs, "parameter ", PARAM),
                                  "maybe-live-out" in attrs, color if color is not None else 0, shape_of(attrs)))
            continue
        if line.startswith("value:"):
            v = value_fields(line)
            if v is None or not out:
                raise ExplorerError("load", f"cannot read this buffer-assignment value: {line[:80]!r}", file, lineno)
            out[-1].values.append(Value(int(v[0]), v[1], v[2] or "{}", int(v[5]), int(v[6]), v[7].strip(), bool(v[3]),
                                        out[-1].index))
        elif line.startswith(("Total bytes used", "Used values", "HloLiveRange", "BufferLiveRange")):
            break  # a verbose form appends other sections; the allocations are all above
    if not out:
        raise ExplorerError("load", "no allocation in the buffer assignment", file)
    return out


@dataclass
class LiveRanges:
    schedule: list[str]  # time step -> instruction (every computation, flattened as XLA runs them)
    ranges: dict[str, tuple[int, int]]  # value key ("name{index}") -> (first, last) step, inclusive
    end: int  # XLA's "max": a range ending here lives to the end of the program


def parse_live_range(text: str, file: str | None = None) -> LiveRanges:
    """A ``*-live-range.txt``: the flattened instruction sequence and each value's live range."""
    m = _MAX.search(text or "")
    if m is None:
        raise ExplorerError("load", "not an XLA live-range dump (no 'HloLiveRange (max N)' line)", file)
    schedule: list[str] = []
    ranges: dict[str, tuple[int, int]] = {}
    section = ""
    for raw in text.splitlines():
        line = raw.strip()
        if line.endswith(":") and sequence_step(line) is None:
            section = line
            continue
        if line.startswith("Live ranges at") or line.startswith("Stack trace"):
            section = "other"
            continue
        if section.startswith("InstructionSequence"):
            s = sequence_step(line)
            if s:
                schedule.append(s[1])
        elif section.startswith("BufferLiveRange"):
            r = live_range_of(line)
            if r:
                ranges[r[0] + r[1]] = (int(r[2]), int(r[3]))
    return LiveRanges(schedule, ranges, int(m.group(1)))


def schedule_live_ranges(module, allocations: list[Allocation]) -> LiveRanges:
    """Live ranges read off the scheduled module when the dump has no live-range file: each
    computation's instructions in order, called computations before their caller (as XLA
    flattens them); a value lives from its instruction to its last user; parameters of the
    entry and the values of live-out allocations live to the end."""
    schedule: list[str] = []
    comps = module.by_name

    def visit(comp, seen):
        if comp.name in seen:
            return
        seen.add(comp.name)
        for inst in comp.instructions:
            if inst.opcode != "fusion":
                for c in inst.called_computations:
                    if c in comps and inst.opcode in ("while", "conditional", "call", "async-start"):
                        visit(comps[c], seen)
            schedule.append(inst.name)

    visit(module.entry, set())
    pos = {n: i for i, n in enumerate(schedule)}
    last = dict(pos)
    for comp in module.computations:
        for inst in comp.instructions:
            for op in inst.operands:
                if op in pos and inst.name in pos:
                    last[op] = max(last[op], pos[inst.name])
    end = len(schedule)
    live_out = {a.index for a in allocations if a.maybe_live_out}
    ranges: dict[str, tuple[int, int]] = {}
    entry_params = {i.name for i in module.entry.instructions if i.opcode == "parameter"}
    for a in allocations:
        for v in a.values:
            if v.instruction not in pos:
                continue
            start = pos[v.instruction]
            stop = end if (v.instruction in entry_params or a.index in live_out) else last[v.instruction]
            ranges[v.key] = (start, stop)
    return LiveRanges(schedule, ranges, end)


# ----------------------------------------------------------------------------- the bundle's memory


def memory_from_texts(buffer_assignment: str, live_range: str | None = None, module=None,
                      kernels=None, files: list[str] | None = None) -> dict:
    """The ``memory`` dict of a bundle (docs/bundle.md) from the dump's texts, with values linked
    to the kernels (``bundle.kernels``) and source lines (``module``: the optimized HLO) that make
    them. Without ``live_range`` the ranges come from ``module``'s schedule."""
    allocs = parse_buffer_assignment(buffer_assignment, (files or [None])[0])
    if live_range:
        lr, how = parse_live_range(live_range, (files or [None, None])[-1]), "xla"
    elif module is not None:
        lr, how = schedule_live_ranges(module, allocs), "schedule"
    else:
        lr, how = LiveRanges([], {}, 0), None
    kernel_names = {k.name for k in (kernels or [])}
    insts = {i.name: i for i in module.instructions()} if module is not None else {}
    values = []
    for a in allocs:
        for v in a.values:
            inst = insts.get(v.instruction)
            md = inst.metadata if inst is not None else None
            src = md.source if md is not None else None
            start, stop = lr.ranges.get(v.key, (None, None))
            values.append({
                "id": v.id, "name": v.key, "instruction": v.instruction, "index": v.index, "phi": v.phi,
                "allocation": a.index, "offset": v.offset, "size": v.size, "shape": v.shape, "kind": a.kind,
                "start": start, "end": stop,
                "kernel": v.instruction if v.instruction in kernel_names else None,
                "opcode": inst.opcode if inst is not None else None,
                "op_name": md.op_name if md is not None else "",
                "source": [src.file or "", src.line] if src is not None and src.line is not None else None,
            })
    mem = {
        "files": list(files or []),
        "live_ranges": how,
        "schedule": lr.schedule,
        "end": lr.end,
        "allocations": [{"index": a.index, "size": a.size, "kind": a.kind, "parameter": a.parameter,
                         "maybe_live_out": a.maybe_live_out, "color": a.color, "shape": a.shape,
                         "values": len(a.values)} for a in allocs],
        "values": values,
    }
    mem["totals"] = totals(mem)
    mem["peak"] = peak(mem)
    return mem


def totals(mem: dict) -> dict:
    """Bytes by allocation kind (the allocations' sizes, as ``memory_analysis()`` adds them):
    ``argument``, ``output``, ``temp``, ``constant``, ``thread_local``, ``alias`` (a parameter's
    allocation that is also live-out: donated) and ``all``."""
    t = {"argument": 0, "output": 0, "temp": 0, "constant": 0, "thread_local": 0, "alias": 0, "all": 0}
    for a in mem.get("allocations", []):
        size, kind = a["size"], a["kind"]
        t["all"] += size
        if kind == "parameter":
            t["argument"] += size
            if a.get("maybe_live_out"):
                t["output"] += size
                t["alias"] += size
        elif kind == "output":
            t["output"] += size
        elif kind == "thread-local":
            t["thread_local"] += size
        else:
            t[kind] += size
    return t


def _heap_values(mem: dict) -> list[dict]:
    return [v for v in mem.get("values", []) if v["kind"] in HEAP_KINDS and v.get("start") is not None]


def live_at(mem: dict, t: int) -> list[dict]:
    """The values live at step ``t`` (first <= t <= last), heap memory only."""
    return [v for v in _heap_values(mem) if v["start"] <= t <= v["end"]]


class _Coverage:
    """The bytes of one allocation covered by at least one of its live slices, kept as slices come
    and go: a segment tree over the slices' boundaries (each node: how many slices cover all of
    it, and its covered length), so a slice added or removed costs the log of the allocation's
    slices. Summing every live slice again at each change grew with steps x slices (an allocation
    of 20,000 values in an uploaded dump took minutes)."""

    def __init__(self, bounds):
        self.xs = sorted(set(bounds))
        self.at = {x: i for i, x in enumerate(self.xs)}
        n = max(1, len(self.xs) - 1)
        self.n, self.count, self.cov = n, [0] * (4 * n), [0] * (4 * n)

    def add(self, lo: int, hi: int, d: int) -> int:
        """Slice [lo, hi) added (``d`` 1) or removed (-1); returns the covered bytes after."""
        a, b = self.at[lo], self.at[hi]
        if a < b:
            self._update(1, 0, self.n, a, b, d)
        return self.cov[1]

    def _update(self, node: int, l: int, r: int, a: int, b: int, d: int) -> None:
        # (recursive: the depth is the log of the slices)
        if b <= l or r <= a:
            return
        if a <= l and r <= b:
            self.count[node] += d
        else:
            m = (l + r) // 2
            self._update(2 * node, l, m, a, b, d)
            self._update(2 * node + 1, m, r, a, b, d)
        if self.count[node] > 0:
            self.cov[node] = self.xs[r] - self.xs[l]
        elif r - l == 1:
            self.cov[node] = 0
        else:
            self.cov[node] = self.cov[2 * node] + self.cov[2 * node + 1]


def _coverages(vals) -> dict:
    """A ``_Coverage`` for each (kind, allocation) of ``vals``, over all its slices' bounds."""
    bounds: dict[tuple, list[int]] = {}
    for v in vals:
        bounds.setdefault((v["kind"], v["allocation"]), []).extend((v["offset"], v["offset"] + v["size"]))
    return {k: _Coverage(b) for k, b in bounds.items()}


def live_curve(mem: dict) -> list[dict]:
    """Live bytes at every step of the schedule: ``[{step, instruction, total, parameter, output,
    constant, temp}]``; a byte of an allocation slice is counted once however many values share it."""
    sched = mem.get("schedule") or []
    vals = _heap_values(mem)
    # sweep: values join at their first step and leave after their last; an allocation's covered
    # bytes are kept up to date as they do (``_Coverage``), so each step costs its changes
    starts: dict[int, list[dict]] = {}
    ends: dict[int, list[dict]] = {}
    for v in vals:
        starts.setdefault(v["start"], []).append(v)
        ends.setdefault(max(v["end"], v["start"]) + 1, []).append(v)
    cover = _coverages(vals)
    sums: dict[tuple[str, int], int] = {}
    by = {k: 0 for k in HEAP_KINDS}
    out = []
    for t in range(len(sched)):
        now: dict[tuple[str, int], int] = {}
        for d, group in ((-1, ends.get(t, ())), (1, starts.get(t, ()))):
            for v in group:
                key = (v["kind"], v["allocation"])
                now[key] = cover[key].add(v["offset"], v["offset"] + v["size"], d)
        for key, covered in now.items():
            by[key[0]] += covered - sums.get(key, 0)
            sums[key] = covered
        out.append({"step": t, "instruction": sched[t], "total": sum(by.values()), **by})
    return out


def peak(mem: dict) -> dict | None:
    """The step where the most bytes are live: ``{bytes, step, instruction, by_kind, temp_bytes,
    temp_peak_bytes}`` (``temp_peak_bytes``: the most temporary bytes live at any step, which is at
    most the temp allocations' size); None without live ranges."""
    curve = live_curve(mem)
    if not curve:
        return None
    top = max(curve, key=lambda r: (r["total"], -r["step"]))
    return {"bytes": top["total"], "step": top["step"], "instruction": top["instruction"],
            "by_kind": {k: top[k] for k in HEAP_KINDS}, "temp_bytes": top["temp"],
            "temp_peak_bytes": max(r["temp"] for r in curve)}


def peak_buffers(mem: dict, step: int | None = None) -> list[dict]:
    """The buffers live at the peak (or at ``step``), biggest first: one row per allocation slice,
    named after its latest-defined value, with ``aliases`` (the other live values in that slice)
    and ``bytes`` (the slice's bytes not already counted for a bigger row of the same allocation)."""
    if step is None:
        p = mem.get("peak") or peak(mem)
        if not p:
            return []
        step = p["step"]
    live = live_at(mem, step)
    groups: dict[tuple[int, int, int], list[dict]] = {}
    for v in live:
        groups.setdefault((v["allocation"], v["offset"], v["size"]), []).append(v)
    rows = []
    for (alloc, offset, size), vs in groups.items():
        vs.sort(key=lambda v: (v["start"], not v["phi"], v["id"]))
        main = vs[-1]
        rows.append({**main, "bytes": size, "aliases": [v["name"] for v in vs[:-1]]})
    rows.sort(key=lambda r: (-r["size"], r["allocation"], r["offset"]))
    cover = _coverages([{**r, "kind": ""} for r in rows])
    before: dict[int, int] = {}
    for r in rows:  # a slice inside a bigger live slice (a tuple element) adds no bytes
        after = cover[("", r["allocation"])].add(r["offset"], r["offset"] + r["size"], 1)
        r["bytes"] = after - before.get(r["allocation"], 0)
        before[r["allocation"]] = after
    return rows


def kernel_temp_bytes(mem: dict | None) -> dict[str, int]:
    """Kernel name -> temporary bytes it writes (its values in temp allocations; loop-carried
    phi values are no writes)."""
    out: dict[str, int] = {}
    for v in (mem or {}).get("values", []):
        if v.get("kernel") and v["kind"] == "temp" and not v.get("phi"):
            out[v["kernel"]] = out.get(v["kernel"], 0) + v["size"]
    return out


def biggest_temporaries(mem: dict | None, n: int = 10, where=None) -> list[dict]:
    """The temporaries written by kernels, biggest first (``where(value)`` filters)."""
    vals = [v for v in (mem or {}).get("values", []) if v["kind"] == "temp" and v.get("kernel")
            and not v.get("phi") and (where is None or where(v))]
    return sorted(vals, key=lambda v: (-v["size"], v["id"]))[:n]


def agreement(mem: dict, memory_analysis: dict | None) -> dict | None:
    """This buffer assignment next to ``compiled.memory_analysis()``: ``{field: {ours, xla, diff}}``
    for argument, output, temp and alias bytes (the same allocations added up: they agree to the
    byte), and ``peak``: XLA's ``peak_memory_in_bytes`` next to our parts of it (see
    docs/xla-findings.md: on the CPU it is arguments + outputs + constants, no temporaries; on
    XLA:GPU that plus the most temporaries live at once)."""
    if not memory_analysis:
        return None
    t = mem.get("totals") or totals(mem)
    out = {}
    for ours, xla in (("argument", "argument_size_in_bytes"), ("output", "output_size_in_bytes"),
                      ("temp", "temp_size_in_bytes"), ("alias", "alias_size_in_bytes")):
        if xla in memory_analysis:
            out[ours] = {"ours": t[ours], "xla": memory_analysis[xla], "diff": t[ours] - memory_analysis[xla]}
    if "peak_memory_in_bytes" in memory_analysis:
        p = mem.get("peak") or {}
        persistent = t["argument"] + t["output"] - t["alias"] + t["constant"]
        # XLA's figure holds the allocations that live the whole program (parameters, outputs,
        # constants) plus the most temporaries live at once; XLA:CPU keeps no heap trace of its
        # temporaries, so there it is the persistent part alone (docs/xla-findings.md)
        out["peak"] = {"xla": memory_analysis["peak_memory_in_bytes"], "live_peak": p.get("bytes"),
                       "persistent": persistent, "persistent_plus_temp_peak": persistent + (p.get("temp_peak_bytes") or 0),
                       "bound": persistent + t["temp"]}
    return out


# ----------------------------------------------------------------------------- fusion on and off


def _written(mem: dict) -> list[dict]:
    """Values a kernel writes to memory that is no parameter and no live-out result."""
    return [v for v in mem.get("values", []) if v.get("kernel") and not v.get("phi")
            and v["kind"] in ("temp", "output") and v.get("end") is not None and v["end"] < (mem.get("end") or 0)]


def _scope_key(v: dict) -> tuple[str, str]:
    return (v.get("op_name") or v["instruction"], v["shape"].split("{")[0])


def compare_memory(fused: dict | None, unfused: dict | None) -> dict | None:
    """The default compile's memory next to the fusion-disabled one's: peak, temp totals, and the
    intermediates only the unfused compile writes (``only_unfused``: values whose defining op,
    by JAX op_name and shape, writes nothing in the fused compile)."""
    if not fused or not unfused:
        return None
    seen = {_scope_key(v) for v in _written(fused)}
    only = [v for v in _written(unfused) if _scope_key(v) not in seen]
    only.sort(key=lambda v: (-v["size"], v["id"]))
    fp, up = fused.get("peak") or {}, unfused.get("peak") or {}
    ft, ut = fused.get("totals") or {}, unfused.get("totals") or {}
    return {
        "default": {"peak_bytes": fp.get("bytes"), "temp_bytes": ft.get("temp"),
                    "temp_peak_bytes": fp.get("temp_peak_bytes")},
        "unfused": {"peak_bytes": up.get("bytes"), "temp_bytes": ut.get("temp"),
                    "temp_peak_bytes": up.get("temp_peak_bytes")},
        "only_unfused": [{k: v.get(k) for k in ("name", "kernel", "shape", "size", "op_name", "source")}
                         for v in only[:50]],
        "only_unfused_count": len(only),
        "only_unfused_bytes": sum(v["size"] for v in only),
    }


# ----------------------------------------------------------------------------- from a dump

BUFFER_ASSIGNMENT_SUFFIX = "after_optimizations-buffer-assignment.txt"
LIVE_RANGE_SUFFIX = "after_optimizations-live-range.txt"


def bundle_memory(bundle, buffer_assignment: str, live_range: str | None = None,
                  files: list[str] | None = None) -> dict:
    """``bundle.memory`` from the dump texts of its compile (docs/bundle.md "memory"); a text
    that cannot be read gives ``{"error": message}`` rather than failing the compile."""
    try:
        mem = memory_from_texts(buffer_assignment, live_range, bundle.module("hlo_after"), bundle.kernels, files)
    except ExplorerError as e:
        return {"error": e.message, "files": list(files or [])}
    _names_from_provenance(mem, bundle)
    mem["agreement"] = agreement(mem, bundle.memory_analysis)
    return mem


def agree_with_xla(bundle) -> None:
    """Set ``bundle.memory``'s agreement with ``bundle.memory_analysis``, for a bundle whose
    memory was read before XLA's estimate came (``analysis.compile.stages``)."""
    mem = bundle.memory
    if isinstance(mem, dict) and "error" not in mem and "totals" in mem:
        mem["agreement"] = agreement(mem, bundle.memory_analysis)


def _names_from_provenance(mem: dict, bundle) -> None:
    """A kernel XLA re-created without metadata (a reshaped dot, a layout copy) gets the JAX
    op_name and source line of the program op that provenance maps to it."""
    prov, pre = bundle.provenance, bundle.module("hlo_before")
    if prov is None or pre is None:
        return
    pre_insts = {i.name: i for i in pre.instructions()}
    for v in mem["values"]:
        if v["op_name"] or not v.get("kernel"):
            continue
        for name in prov.kernel_to_pre.get(v["kernel"], []):
            inst = pre_insts.get(name)
            md = inst.metadata if inst is not None else None
            if md is not None and md.op_name:
                v["op_name"], v["op_name_from"] = md.op_name, "provenance"
                if v["source"] is None and md.source is not None and md.source.line is not None:
                    v["source"] = [md.source.file or "", md.source.line]
                break


def memory_from_dir(dump_dir: str, bundle) -> dict | None:
    """``bundle.memory`` from a ``xla_dump_to`` folder: the buffer assignment (and live ranges)
    of the module the bundle holds; None when XLA wrote none."""
    import os

    try:
        names = sorted(os.listdir(dump_dir))
    except OSError:
        return None
    found = [n for n in names if n.endswith(BUFFER_ASSIGNMENT_SUFFIX)]
    if not found:
        return None
    module = bundle.module("hlo_after")
    mine = [n for n in found if module is not None and f".{module.name}." in n]
    ba = (mine or found)[-1]  # the last compile of the folder is this one
    lr = ba[: -len(BUFFER_ASSIGNMENT_SUFFIX)] + LIVE_RANGE_SUFFIX
    read = lambda n: open(os.path.join(dump_dir, n), encoding="utf-8", errors="replace").read()  # noqa: E731
    return bundle_memory(bundle, read(ba), read(lr) if lr in names else None, [ba] + ([lr] if lr in names else []))
