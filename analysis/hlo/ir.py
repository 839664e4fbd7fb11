"""The HLO object model: Module / Computation / Instruction (plain dataclasses, pure Python).

What ``parse_module`` returns. Instructions keep their text as written (shape, operand list and
attribute values as raw strings) and decode the rest on first access: the shape, metadata (with
its source location resolved through the module's stack-frame tables) and the backend config.
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
from dataclasses import dataclass, field
from functools import cached_property, lru_cache

from analysis.hlo.shape import Shape, parse_shape

_STR = r'"(?:[^"\\]|\\.)*+"'
_META_RE = re.compile(r"(\w+)=(" + _STR + r"|[^\s}]+)")

# Attributes that name called computations, and which role each plays.
CALL_ATTRS = ("calls", "to_apply", "body", "condition", "branch_computations",
              "true_computation", "false_computation", "called_computations", "async_wrapped")
_CALL_ATTR_SET = frozenset(CALL_ATTRS)

# Async opcodes XLA has of its own. Any other ``X-start`` / ``X-update`` / ``X-done`` is sugar that
# XLA's parser turns into ``async-start`` / ``async-update`` / ``async-done`` over a computation
# wrapping one ``X`` (``reduce-scatter-start``, ``all-to-all-start``, ``custom-call-start``,
# ``call-start``, ``fusion-start``, ...).
NATIVE_ASYNC = frozenset({
    "all-reduce-start", "all-reduce-done", "all-gather-start", "all-gather-done",
    "collective-permute-start", "collective-permute-done", "copy-start", "copy-done",
    "async-start", "async-update", "async-done", "send-done", "recv-done",
})


def async_sugar(opcode: str) -> tuple[str, str] | None:
    """``'reduce-scatter-start'`` -> ``('reduce-scatter', 'start')``; None for anything that is
    not ``X-start``/``X-update``/``X-done`` sugar (native async opcodes included)."""
    if opcode in NATIVE_ASYNC:
        return None
    for part in ("start", "update", "done"):
        if opcode.endswith("-" + part) and len(opcode) > len(part) + 1:
            return opcode[: -len(part) - 1], part
    return None


def unquote(s: str) -> str:
    if len(s) >= 2 and s[0] == '"' and s[-1] == '"':
        if "\\" not in s:  # nothing escaped: skip the JSON decoder
            return s[1:-1]
        try:
            return json.loads(s)
        except ValueError:
            pass
        # XLA escapes strings C-style (CEscape), which JSON does not fully accept: \' for a quote,
        # octal bytes. Decode those escapes by hand.
        return _c_unescape(s[1:-1])
    return s


_C_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "'": "'", '"': '"', "\\": "\\", "?": "?"}


def _c_unescape(body: str) -> str:
    out = bytearray()  # octal/hex escapes are bytes of UTF-8 text
    i, n = 0, len(body)
    while i < n:
        c = body[i]
        if c == "\\" and i + 1 < n:
            nxt = body[i + 1]
            if nxt in _C_ESCAPES:
                out += _C_ESCAPES[nxt].encode()
                i += 2
                continue
            if nxt in "01234567":
                j = i + 1
                while j < min(i + 4, n) and body[j] in "01234567":
                    j += 1
                out.append(int(body[i + 1:j], 8) & 0xFF)
                i = j
                continue
            if nxt == "x":
                j = i + 2
                while j < min(i + 4, n) and body[j] in "0123456789abcdefABCDEF":
                    j += 1
                if j > i + 2:
                    out.append(int(body[i + 2:j], 16))
                    i = j
                    continue
        out += c.encode()
        i += 1
    return out.decode("utf-8", errors="replace")


@lru_cache(maxsize=65536)
def cached_shape(text: str) -> Shape:
    return parse_shape(text)


# ----------------------------------------------------------------------------- data model


@dataclass(frozen=True)
class SourceLocation:
    file: str | None
    line: int | None
    end_line: int | None = None
    column: int | None = None
    end_column: int | None = None
    function: str | None = None

    def __str__(self) -> str:
        where = f"{self.file or '?'}:{self.line}"
        return where + (f" ({self.function})" if self.function else "")


@dataclass(frozen=True, slots=True)
class Metadata:
    """``metadata={...}`` resolved: op_name/op_type, and the source location (either printed
    inline as ``source_file``/``source_line`` or through a stack frame id, kept as written)."""

    op_name: str = ""
    op_type: str = ""
    source: SourceLocation | None = None
    stack: tuple[SourceLocation, ...] = ()  # innermost first
    stack_frame_id: str | None = None


_NO_METADATA = Metadata()


@dataclass(eq=False, slots=True)
class Instruction:
    # Slots, not an instance dict: a big program parses into tens of thousands of instructions,
    # and a dict each (grown again by every decoded attribute) was a fifth of the app's memory
    # (docs/performance.md).
    name: str
    opcode: str
    shape_text: str
    operands: list[str]
    attributes: dict[str, str]
    is_root: bool = False
    line: int = 0
    operand_text: str = ""
    computation: "Computation | None" = field(default=None, repr=False)
    # decoded on first access (``__getattr__`` below fills the empty slot from ``_LAZY``)
    shape: Shape = field(init=False, repr=False)
    called_computations: list[str] = field(init=False, repr=False)
    control_predecessors: list[str] = field(init=False, repr=False)
    metadata: "Metadata" = field(init=False, repr=False)
    backend_config: object = field(init=False, repr=False)
    fusion_kind: str | None = field(init=False, repr=False)

    def __getattr__(self, name: str):
        make = _LAZY.get(name)
        if make is None:
            raise AttributeError(f"'Instruction' object has no attribute {name!r}")
        value = make(self)
        setattr(self, name, value)
        return value

    def _make_shape(self) -> Shape:
        return cached_shape(self.shape_text)

    @property
    def text(self) -> str:
        """The instruction re-printed in HLO syntax."""
        attrs = "".join(f", {k}={v}" for k, v in self.attributes.items())
        return f"{'ROOT ' if self.is_root else ''}%{self.name} = {self.shape_text} {self.opcode}({self.operand_text}){attrs}"

    def _make_called_computations(self) -> list[str]:
        out: list[str] = []
        for key, v in self.attributes.items():  # in text order: condition before body, ...
            if key not in _CALL_ATTR_SET:
                continue
            v = v.strip()
            if v.startswith("{"):
                v = v[1:-1]
            out.extend(p.strip().lstrip("%") for p in v.split(",") if p.strip())
        return out

    def _make_control_predecessors(self) -> list[str]:
        v = self.attributes.get("control-predecessors", "").strip("{} ")
        return [p.strip().lstrip("%") for p in v.split(",") if p.strip()]

    def _make_metadata(self) -> Metadata:
        raw_text = self.attributes.get("metadata")
        if not raw_text:
            return _NO_METADATA
        mod = self.computation.module if self.computation is not None else None
        if mod is None:
            return self._resolve_metadata(raw_text, None)
        # Metadata is frozen and resolved within its module only, so equal texts share one: a
        # big module has many instructions per distinct metadata text (docs/performance.md)
        memo = mod._metadata_cache
        got = memo.get(raw_text)
        if got is None:
            got = memo[raw_text] = self._resolve_metadata(raw_text, mod)
        return got

    @staticmethod
    def _resolve_metadata(raw_text: str, mod: "Module | None") -> Metadata:
        raw = {k: unquote(v) for k, v in _META_RE.findall(raw_text[1:-1])}
        source = None
        stack: tuple[SourceLocation, ...] = ()
        frame = str(raw.get("stack_frame_id", ""))
        if frame.isdigit() and mod is not None:  # a malformed id resolves to no location
            stack = mod.stack_trace(int(frame))
            source = stack[0] if stack else None
        elif "source_file" in raw or "source_line" in raw:
            def num(k):
                return int(raw[k]) if k in raw and str(raw[k]).lstrip("-").isdigit() else None
            source = SourceLocation(raw.get("source_file"), num("source_line"), num("source_end_line"),
                                    num("source_column"), num("source_end_column"))
            stack = (source,)
        # op names and types are shared by the two modules' instructions: one string each
        return Metadata(sys.intern(raw.get("op_name", "")), sys.intern(raw.get("op_type", "")), source, stack,
                        raw.get("stack_frame_id"))

    def _make_backend_config(self):
        """``backend_config`` decoded from JSON (raw or quoted-escaped); None if absent/invalid."""
        v = self.attributes.get("backend_config")
        if not v:
            return None
        v = v.strip()
        try:
            obj = json.loads(v)
            if isinstance(obj, str):
                obj = json.loads(obj) if obj.strip().startswith("{") else obj
            return obj
        except ValueError:
            return None

    @property
    def custom_call_target(self) -> str | None:
        v = self.attributes.get("custom_call_target")
        return unquote(v) if v is not None else None

    def _make_fusion_kind(self) -> str | None:
        """``kLoop``/``kInput``/``kOutput``, or for ``kCustom`` the backend's kind
        (``__triton_gemm``, ``__cudnn$fusion``, ``__ynn_fusion``, ...)."""
        if self.opcode != "fusion":
            return None
        kind = self.attributes.get("kind")
        if kind == "kCustom":
            bc = self.backend_config
            if isinstance(bc, dict):
                for key in ("fusion_backend_config", "fusion_config"):
                    sub = bc.get(key)
                    if isinstance(sub, dict) and sub.get("kind"):
                        return sub["kind"]
        return kind

    def operand_instructions(self) -> list["Instruction"]:
        comp = self.computation
        return [comp.by_name[o] for o in self.operands if comp is not None and o in comp.by_name]

    @property
    def async_wrapped(self) -> "Instruction | str | None":
        """What an async instruction runs. For ``X-start``/``X-update``/``X-done`` sugar: the
        opcode ``X`` (XLA builds the wrapped instruction from this instruction's own operands and
        attributes); for ``async-start``/``-update``/``-done``: the root instruction of the
        wrapped computation (``calls=``), if the module has it; else None."""
        sugar = async_sugar(self.opcode)
        if sugar is not None:
            return sugar[0]
        if self.opcode in ("async-start", "async-update", "async-done"):
            mod = self.computation.module if self.computation is not None else None
            for cname in self.called_computations:
                comp = mod.by_name.get(cname) if mod is not None else None
                if comp is not None:
                    return comp.root
        return None


_LAZY = {name: getattr(Instruction, '_make_' + name) for name in (
    'shape', 'called_computations', 'control_predecessors', 'metadata', 'backend_config', 'fusion_kind')}


@dataclass(eq=False)
class Computation:
    name: str
    instructions: list[Instruction]
    is_entry: bool = False
    execution_thread: str | None = None
    signature: str = ""
    line: int = 0
    module: "Module | None" = field(default=None, repr=False)

    @cached_property
    def by_name(self) -> dict[str, Instruction]:
        return {i.name: i for i in self.instructions}

    @cached_property
    def root(self) -> Instruction | None:
        for i in self.instructions:
            if i.is_root:
                return i
        return self.instructions[-1] if self.instructions else None

    def users(self) -> dict[str, list[Instruction]]:
        """Instruction name -> the instructions that use it, each once (as XLA's users())."""
        out: dict[str, list[Instruction]] = {i.name: [] for i in self.instructions}
        for i in self.instructions:
            for o in dict.fromkeys(i.operands):
                if o in out:
                    out[o].append(i)
        return out


@dataclass(eq=False)
class Module:
    name: str
    computations: list[Computation]
    attributes: dict[str, str] = field(default_factory=dict)
    file_names: dict[int, str] = field(default_factory=dict)
    function_names: dict[int, str] = field(default_factory=dict)
    file_locations: dict[int, dict[str, int]] = field(default_factory=dict)
    stack_frames: dict[int, dict[str, int]] = field(default_factory=dict)
    text: str = field(default="", repr=False)

    @cached_property
    def by_name(self) -> dict[str, Computation]:
        return {c.name: c for c in self.computations}

    @cached_property
    def entry(self) -> Computation:
        for c in self.computations:
            if c.is_entry:
                return c
        return self.computations[-1]

    @cached_property
    def digest(self) -> str:
        """A digest of the text this module was parsed from, made when first read: what a
        value made from the module is kept by (``analysis.bundle.content``). A module made the
        parse of another text that prints it (``analysis.pipeline.same_module_text``) keeps it."""
        return hashlib.blake2b(self.text.encode(), digest_size=16).hexdigest()

    @property
    def is_scheduled(self) -> bool:
        return self.attributes.get("is_scheduled") == "true"

    def instructions(self):
        for c in self.computations:
            yield from c.instructions

    @cached_property
    def _parent_offset(self) -> int:
        # XLA prints ``parent_frame_id`` one higher than the id of the parent frame (0 = none),
        # so a root frame appears to name itself. Seen with jax 0.10: ``1 {.. parent_frame_id=1}``
        # for a root and ``4 {.. parent_frame_id=4}`` for a frame whose parent is 3. If no frame
        # names itself, read the ids as written.
        return 1 if any(f.get("parent_frame_id") == fid for fid, f in self.stack_frames.items()) else 0

    def location(self, file_location_id: int) -> SourceLocation | None:
        loc = self.file_locations.get(file_location_id)
        if loc is None:
            return None
        return SourceLocation(
            self.file_names.get(loc.get("file_name_id", -1)), loc.get("line"), loc.get("end_line"),
            loc.get("column"), loc.get("end_column"), self.function_names.get(loc.get("function_name_id", -1)),
        )

    @cached_property
    def _stack_cache(self) -> dict[int, tuple[SourceLocation, ...]]:
        return {}

    @cached_property
    def _metadata_cache(self) -> dict[str, Metadata]:
        return {}

    def stack_trace(self, frame_id: int) -> tuple[SourceLocation, ...]:
        """Source locations from the frame outwards (innermost first)."""
        cached = self._stack_cache.get(frame_id)
        if cached is None:
            cached = self._stack_cache[frame_id] = self._walk_stack(frame_id)
        return cached

    def _walk_stack(self, frame_id: int) -> tuple[SourceLocation, ...]:
        out: list[SourceLocation] = []
        seen: set[int] = set()
        fid = frame_id
        while fid and fid in self.stack_frames and fid not in seen:
            seen.add(fid)
            frame = self.stack_frames[fid]
            loc = self.location(frame.get("file_location_id", -1))
            if loc is not None:
                out.append(loc)
            fid = frame.get("parent_frame_id", 0) - self._parent_offset
        return tuple(out)

    def called_by(self) -> dict[str, list[Instruction]]:
        """Computation name -> the instructions that call it."""
        out: dict[str, list[Instruction]] = {}
        for inst in self.instructions():
            for c in inst.called_computations:
                out.setdefault(c, []).append(inst)
        return out


