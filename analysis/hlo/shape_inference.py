"""Shape inference for an instruction written without a shape (XLA's parser infers it, as
``ShapeInference`` does): the shape of the result from the operands' shapes, the attributes and
the computations it calls, for the common opcodes. The parser (``analysis.hlo.parser``) asks
this when a shape is missing; anything else is a parse error that asks for the shape."""

from __future__ import annotations

# What ``inferred_shape`` knows, in words (the parser's error says so when it meets another opcode)
INFERRED = ("elementwise ops, compare, select, clamp, tuple, get-tuple-element, while, call, conditional, "
            "after-all, transpose, reduce, dot, sort")

# Opcodes whose result has the shape of their first operand.
_SAME_AS_OPERAND0 = frozenset({
    "abs", "add", "and", "atan2", "cbrt", "ceil", "copy", "cosine", "divide", "erf", "exponential",
    "exponential-minus-one", "floor", "imag", "is-finite", "log", "log-plus-one", "logistic", "maximum",
    "minimum", "multiply", "negate", "not", "or", "popcnt", "power", "real", "remainder",
    "round-nearest-afz", "round-nearest-even", "rsqrt", "shift-left", "shift-right-arithmetic",
    "shift-right-logical", "sign", "sine", "sqrt", "subtract", "tan", "tanh", "xor", "clz",
    "count-leading-zeros", "opt-barrier", "reduce-precision", "acos", "acosh", "asin", "asinh",
    "atanh", "cosh", "sinh", "mulhi",
})


def _ints(v: str | None) -> list[int]:
    return [int(x) for x in (v or "").strip("{} ").split(",") if x.strip()]


def _array(etype: str, dims, layout: bool = True) -> str:
    # the default layout (major-to-minor), as XLA assigns to an inferred shape
    lay = "{" + ",".join(str(i) for i in range(len(dims) - 1, -1, -1)) + "}" if dims and layout else ""
    return f"{etype}[{','.join(str(d) for d in dims)}]{lay}"


def inferred_shape(opcode: str, shapes: list, attrs: dict, comps: dict) -> str | None:
    """The shape text of an ``opcode`` instruction with operands of ``shapes`` (Shape objects),
    ``attrs`` (attribute texts) and the module's computations so far (``comps``, by name);
    None when this opcode is not inferred. May raise IndexError, KeyError, ValueError or
    AttributeError on operands that do not fit the opcode."""
    def root_of(attr):
        v = attrs.get(attr, "").strip("{} ").split(",")[0].strip().lstrip("%")
        c = comps.get(v)
        return str(c.root.shape) if c is not None and c.root is not None else None

    if opcode in _SAME_AS_OPERAND0 and shapes:
        return str(shapes[0])
    if opcode == "tuple":
        return "(" + ", ".join(str(sh) for sh in shapes) + ")"
    if opcode == "get-tuple-element":
        return str(shapes[0].tuple_shapes[int(attrs["index"])])
    if opcode == "compare" and not shapes[0].is_tuple:
        return "pred" + str(shapes[0])[len(shapes[0].element_type):]
    if opcode in ("select", "clamp") and len(shapes) == 3:
        return str(shapes[1])
    if opcode == "while":
        return str(shapes[0])
    if opcode == "call":
        return root_of("to_apply")
    if opcode == "conditional":
        return root_of("branch_computations") or root_of("true_computation")
    if opcode == "after-all":
        return "token[]"
    if opcode == "transpose":
        sh, perm = shapes[0], _ints(attrs.get("dimensions"))
        return _array(sh.element_type, [sh.dimensions[i] for i in perm])
    if opcode == "reduce":
        half = len(shapes) // 2
        drop = set(_ints(attrs.get("dimensions")))
        outs = [_array(sh.element_type, [d for i, d in enumerate(sh.dimensions) if i not in drop])
                for sh in shapes[:half]]
        return outs[0] if half == 1 else "(" + ", ".join(outs) + ")"
    if opcode == "dot":
        lhs, rhs = shapes[0], shapes[1]
        lb, lc = _ints(attrs.get("lhs_batch_dims")), _ints(attrs.get("lhs_contracting_dims"))
        rb, rc = _ints(attrs.get("rhs_batch_dims")), _ints(attrs.get("rhs_contracting_dims"))
        dims = ([lhs.dimensions[i] for i in lb] + [d for i, d in enumerate(lhs.dimensions) if i not in lb + lc]
                + [d for i, d in enumerate(rhs.dimensions) if i not in rb + rc])
        return _array(lhs.element_type, dims)
    if opcode == "sort":
        return str(shapes[0]) if len(shapes) == 1 else "(" + ", ".join(str(sh) for sh in shapes) + ")"
    return None
