"""Shapes and layouts as HLO text writes them.

``f32[64,256]{1,0}`` is an array of 64x256 float32 whose layout lists the dimensions from
minor (fastest varying in memory) to major. Tuples nest: ``(f32[2]{0}, (s32[], u8[0]{0}))``.
Layouts may carry extensions after a colon: tiles ``T(8,128)``, element size ``E(4)``,
memory space ``S(1)``. Dimensions may be dynamic: ``<=8`` (bounded) or ``?`` (unbounded).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property

# Bytes per element; sub-byte types are rounded up to one byte, as XLA stores them unpacked
# unless a layout says otherwise (``E(4)``), which we honour in ``Shape.byte_size``.
ELEMENT_BITS = {
    "pred": 8, "s1": 1, "s2": 2, "s4": 4, "s8": 8, "s16": 16, "s32": 32, "s64": 64,
    "u1": 1, "u2": 2, "u4": 4, "u8": 8, "u16": 16, "u32": 32, "u64": 64,
    "f16": 16, "bf16": 16, "f32": 32, "f64": 64, "c64": 64, "c128": 128,
    "f8e5m2": 8, "f8e4m3": 8, "f8e4m3fn": 8, "f8e4m3b11fnuz": 8, "f8e5m2fnuz": 8,
    "f8e4m3fnuz": 8, "f8e3m4": 8, "f8e8m0fnu": 8, "f4e2m1fn": 4,
    "token": 0, "opaque": 0,
}


class ShapeParseError(ValueError):
    """A shape string that is not HLO shape syntax; ``pos`` is the offset in the string."""

    def __init__(self, message: str, text: str, pos: int):
        shown = text if len(text) <= 80 else text[:77] + "..."
        super().__init__(f"{message} at offset {pos} in shape {shown!r}")
        self.message = message
        self.text = text
        self.pos = pos


@dataclass(frozen=True)
class Layout:
    """``{minor_to_major[:extensions]}``; ``extensions`` keeps the raw text (tiles etc.)."""

    minor_to_major: tuple[int, ...]
    tiles: tuple[tuple[int, ...], ...] = ()
    element_size_bits: int | None = None
    memory_space: int | None = None
    extensions: str = ""

    def __str__(self) -> str:
        body = ",".join(map(str, self.minor_to_major))
        return "{" + body + (":" + self.extensions if self.extensions else "") + "}"


@dataclass(frozen=True)
class Shape:
    """An array shape, or a tuple of shapes when ``tuple_shapes`` is not None."""

    element_type: str
    dimensions: tuple[int, ...] = ()
    dynamic: tuple[bool, ...] = ()
    layout: Layout | None = None
    tuple_shapes: tuple["Shape", ...] | None = None
    buffer: bool = False  # 'b(f32[16])': a buffer holding that array (XLA's buffer type)

    @property
    def is_tuple(self) -> bool:
        return self.tuple_shapes is not None

    @property
    def rank(self) -> int:
        return len(self.dimensions)

    @cached_property
    def num_elements(self) -> int:
        n = 1
        for d in self.dimensions:
            n *= d
        return n

    @cached_property
    def byte_size(self) -> int:
        """Bytes this shape occupies (sum over tuple leaves, ignoring tile padding)."""
        if self.tuple_shapes is not None:
            return sum(s.byte_size for s in self.tuple_shapes)
        bits = ELEMENT_BITS.get(self.element_type, 32)
        if self.layout is not None and self.layout.element_size_bits:
            bits = self.layout.element_size_bits
        return (self.num_elements * bits + 7) // 8

    def leaves(self) -> list["Shape"]:
        if self.tuple_shapes is None:
            return [self]
        out: list[Shape] = []
        for s in self.tuple_shapes:
            out.extend(s.leaves())
        return out

    def dims_text(self) -> str:
        parts = []
        for d, dyn in zip(self.dimensions, self.dynamic or (False,) * len(self.dimensions)):
            parts.append(("<=" if dyn and d >= 0 else "") + (str(d) if d >= 0 else "?"))
        return f"{self.element_type}[{','.join(parts)}]"

    def __str__(self) -> str:
        if self.buffer:
            from dataclasses import replace

            return "b(" + str(replace(self, buffer=False)) + ")"
        if self.tuple_shapes is not None:
            return "(" + ", ".join(str(s) for s in self.tuple_shapes) + ")"
        return self.dims_text() + (str(self.layout) if self.layout is not None else "")

    def describe_layout(self) -> str:
        """The layout in words: which dimension varies fastest in memory."""
        if self.tuple_shapes is not None:
            return "a tuple: " + "; ".join(s.describe_layout() for s in self.tuple_shapes)
        if not self.dimensions:
            return "a scalar: no layout to choose"
        if self.layout is None:
            return "no layout assigned yet (layouts are chosen during optimization)"
        m2m = self.layout.minor_to_major
        if not m2m:
            return "no layout"
        words = [f"dimension {m2m[0]} (size {self.dimensions[m2m[0]]}) varies fastest in memory"]
        if len(m2m) > 1:
            words.append(f"dimension {m2m[-1]} (size {self.dimensions[m2m[-1]]}) slowest")
        default = tuple(range(len(self.dimensions) - 1, -1, -1))
        words.append("row-major (the default)" if m2m == default else "NOT the default row-major order")
        if self.layout.tiles:
            words.append("tiled " + " then ".join("x".join(map(str, t)) for t in self.layout.tiles))
        if self.layout.memory_space:
            words.append(f"in memory space {self.layout.memory_space}")
        return "; ".join(words)


# (XLA's lexer allows spaces between the tokens of a shape: 'f32[2, 3] {1, 0}')
_ARRAY_RE = re.compile(r"\s*([a-z][a-z0-9]*)\s*\[([^\]]*)\](?:\s*(\{[^}]*\}))?")
_BUFFER_RE = re.compile(r"\s*b\s*\(")
_TILE_RE = re.compile(r"T((?:\([^)]*\))+)")
_TILE_DIMS_RE = re.compile(r"\(([^)]*)\)")


def _parse_layout(text: str, src: str, pos: int) -> Layout:
    body = text[1:-1]
    ext = ""
    if ":" in body:
        body, ext = body.split(":", 1)
    try:
        m2m = tuple(int(x) for x in body.split(",") if x.strip())
    except ValueError:
        raise ShapeParseError("bad layout", src, pos) from None
    tiles: tuple[tuple[int, ...], ...] = ()
    esize = mspace = None
    if ext:
        # ``T(8,128)(2,1)`` is one tiling of two tiles: the second tiles the first.
        tiles = tuple(
            tuple(int(v) if v.strip() not in ("*", "") else -1 for v in t.split(","))
            for group in _TILE_RE.findall(ext)
            for t in _TILE_DIMS_RE.findall(group)
        )
        m = re.search(r"E\((\d+)\)", ext)
        esize = int(m.group(1)) if m else None
        m = re.search(r"S\((\d+)\)", ext)
        mspace = int(m.group(1)) if m else None
    return Layout(m2m, tiles, esize, mspace, ext)


def _skip_space(text: str, pos: int, n: int) -> int:
    """Skip whitespace and ``/*...*/`` comments (XLA writes ``/*index=5*/`` in long tuples)."""
    while pos < n:
        c = text[pos]
        if c.isspace():
            pos += 1
        elif c == "/" and text.startswith("/*", pos):
            end = text.find("*/", pos + 2)
            if end < 0:
                raise ShapeParseError("unterminated comment", text, pos)
            pos = end + 2
        else:
            break
    return pos


# Deeper tuple nesting than this is refused with a ShapeParseError instead of a RecursionError.
MAX_TUPLE_DEPTH = 64


def _parse_at(text: str, pos: int, depth: int = 0) -> tuple[Shape, int]:
    n = len(text)
    pos = _skip_space(text, pos, n)
    if pos < n and text[pos] == "(":
        if depth >= MAX_TUPLE_DEPTH:
            raise ShapeParseError(f"tuple shape nested deeper than {MAX_TUPLE_DEPTH}", text, pos)
        pos += 1
        elems: list[Shape] = []
        while True:
            pos = _skip_space(text, pos, n)
            if pos < n and text[pos] == ")":
                return Shape("tuple", tuple_shapes=tuple(elems)), pos + 1
            if elems:
                if pos >= n or text[pos] != ",":
                    raise ShapeParseError("expected ',' or ')' in tuple shape", text, pos)
                pos += 1
            sub, pos = _parse_at(text, pos, depth + 1)
            elems.append(sub)
    b = _BUFFER_RE.match(text, pos)
    if b:
        inner, pos = _parse_at(text, b.end(), depth + 1)
        pos = _skip_space(text, pos, n)
        if pos >= n or text[pos] != ")":
            raise ShapeParseError("expected ')' to close a buffer shape b(...)", text, pos)
        return Shape(inner.element_type, inner.dimensions, inner.dynamic, inner.layout, inner.tuple_shapes,
                     True), pos + 1
    m = _ARRAY_RE.match(text, pos)
    if not m:
        raise ShapeParseError("expected a shape like f32[2,3]", text, pos)
    etype, dims_s, layout_s = m.groups()
    dims: list[int] = []
    dyn: list[bool] = []
    for d in dims_s.split(","):
        d = d.strip()
        if not d:
            continue
        if d.startswith("<="):
            dims.append(int(d[2:])), dyn.append(True)
        elif d == "?":
            dims.append(-1), dyn.append(True)
        elif d.isdigit():
            dims.append(int(d)), dyn.append(False)
        else:
            raise ShapeParseError(f"bad dimension {d!r}", text, m.start(2))
    layout = _parse_layout(layout_s, text, m.start(3)) if layout_s else None
    return Shape(etype, tuple(dims), tuple(dyn) if any(dyn) else (), layout), m.end()


def parse_shape(text: str) -> Shape:
    """Parse one HLO shape string; raises ShapeParseError on anything else."""
    shape, end = _parse_at(text, 0)
    if text[end:].strip():
        raise ShapeParseError("unexpected text after shape", text, end)
    return shape
