"""Our HLO parser against XLA's own C++ parser, instruction by instruction.

The oracle is ``jaxlib._hlo.hlo_module_from_text`` (private jaxlib API, used here only as a test
oracle, never by the product). The HLO texts are produced at test time from many small JAX
programs, both before optimization (``lower(...).as_text(dialect="hlo", debug_info=True)``) and
after (``compile().as_text()``), so the test follows whatever the installed jax prints.

What is compared, and why only that:
- computation names (as a set: the oracle may reorder computations, e.g. post-order);
- per computation, the instruction names in order, their opcodes in text spelling and their
  operand names in order;
- per instruction, the shape: we take the oracle's own print of the instruction
  (``HloInstruction.to_string()``) and cut the shape out of it, and compare it with ``str()`` of
  our parsed Shape. The oracle assigns default layouts to unoptimized HLO that prints none, so
  layouts are compared only where the input text had one.
The oracle keeps the names it reads (it does not re-number a module parsed from text); if a
future version renames, the name comparison will say so loudly rather than silently pass.
"""

from __future__ import annotations

import re

import pytest

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")
_hlo = pytest.importorskip("jaxlib._hlo")
from jax import lax  # noqa: E402

from analysis.hlo import async_sugar, parse_module  # noqa: E402
from analysis.hlo.shape import parse_shape  # noqa: E402

# ----------------------------------------------------------------------------- opcode spelling

# HloOpcode enum names whose text spelling is not the plain camelCase -> kebab-case conversion.
_OPCODE_EXCEPTIONS = {
    "kClz": "count-leading-zeros",
    "kCos": "cosine",
    "kSin": "sine",
    "kExp": "exponential",
    "kExpm1": "exponential-minus-one",
    "kLog1p": "log-plus-one",
    "kPopulationCount": "popcnt",
    "kOptimizationBarrier": "opt-barrier",
    "kTopK": "topk",
}


def opcode_text(op) -> str:
    name = op.name if hasattr(op, "name") else str(op).split(".")[-1]
    if name in _OPCODE_EXCEPTIONS:
        return _OPCODE_EXCEPTIONS[name]
    return re.sub(r"(?<!^)(?=[A-Z])", "-", name[1:]).lower()


def test_opcode_spelling_matches_xla_print():
    """The enum -> text table above is itself checked against what XLA prints."""
    text = _program_text("reductions", "optimized")
    mod = _hlo.hlo_module_from_text(text)
    for comp in mod.computations():
        for inst in comp.instructions():
            assert f" {opcode_text(inst.opcode)}(" in inst.to_string()


# ----------------------------------------------------------------------------- programs


def _mlp_loss(params, x, y):
    h = x
    for w, b in params[:-1]:
        h = jnp.tanh(h @ w + b)
    w, b = params[-1]
    return jnp.mean((h @ w + b - y) ** 2)


def _mlp_params():
    k = jax.random.PRNGKey(0)
    sizes = [8, 16, 16, 4]
    out = []
    for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:])):
        out.append((jax.random.normal(jax.random.fold_in(k, i), (a, b)), jnp.zeros((b,))))
    return out


def _named_scope_fn(x):
    with jax.named_scope("encoder"):
        with jax.named_scope("layer0"):
            y = jnp.sin(x) @ x
    with jax.named_scope("head"):
        return jnp.tanh(y).sum(axis=0)


def _scan_fn(xs):
    def step(carry, x):
        carry = jnp.tanh(carry * 0.9 + x)
        return carry, carry.sum()

    return lax.scan(step, jnp.zeros(xs.shape[1:]), xs)


def _cond_in_scan(xs):
    def step(c, x):
        c = lax.cond(x.sum() > 0, lambda v: v + x, lambda v: v - x, c)
        return c, None

    return lax.scan(step, jnp.zeros(xs.shape[1:]), xs)[0]


def _while_fn(x):
    return lax.while_loop(lambda s: s[0] < 10, lambda s: (s[0] + 1, s[1] * 1.5 + jnp.sin(s[1])), (0, x))


def _conv(x, w):
    return lax.conv_general_dilated(x, w, window_strides=(1, 1), padding="SAME",
                                    rhs_dilation=(2, 2), dimension_numbers=("NCHW", "OIHW", "NCHW"))


def _rng(key):
    k1, k2 = jax.random.split(key)
    return jax.random.normal(k1, (16,)) + jax.random.uniform(k2, (16,)), jax.random.bernoulli(k2, 0.3, (8,))


def _f32(*shape):
    return jnp.arange(int(jnp.prod(jnp.array(shape))) if shape else 1, dtype=jnp.float32).reshape(shape) / 7.0


def _spd(n):
    a = _f32(n, n) + jnp.eye(n)
    return a @ a.T + n * jnp.eye(n)


# name -> (function, args thunk, jit kwargs). Args are built lazily so collection stays cheap.
PROGRAMS = {
    "while_loop": (_while_fn, lambda: (_f32(4),), {}),
    "fori_loop": (lambda x: lax.fori_loop(0, 5, lambda i, v: v * 2 + i, x), lambda: (_f32(3),), {}),
    "cond": (lambda p, x: lax.cond(p > 0, jnp.sin, jnp.cos, x), lambda: (jnp.float32(1), _f32(4)), {}),
    "switch": (lambda i, x: lax.switch(i, [jnp.sin, jnp.cos, lambda v: v * 3], x),
               lambda: (jnp.int32(1), _f32(4)), {}),
    "scan": (_scan_fn, lambda: (_f32(5, 3),), {}),
    "cond_in_scan": (_cond_in_scan, lambda: (_f32(4, 2),), {}),
    "sort": (lambda x: jnp.sort(x, axis=-1), lambda: (_f32(4, 6)[:, ::-1],), {}),
    "argsort": (lambda x: jnp.argsort(x), lambda: (_f32(9)[::-1],), {}),
    "gather": (lambda x, i: x[i], lambda: (_f32(10, 3), jnp.array([3, 1, 7])), {}),
    "scatter_add": (lambda x, i, u: x.at[i].add(u), lambda: (_f32(10), jnp.array([1, 1, 4]), _f32(3)), {}),
    "fft": (lambda x: jnp.fft.rfft(x).real + jnp.fft.fft(x.astype(jnp.complex64)).imag[:5],
            lambda: (_f32(8),), {}),
    "cholesky": (jnp.linalg.cholesky, lambda: (_spd(4),), {}),
    "qr": (jnp.linalg.qr, lambda: (_f32(5, 3),), {}),
    "solve": (jnp.linalg.solve, lambda: (_spd(4), _f32(4, 2)), {}),
    "eigh": (jnp.linalg.eigh, lambda: (_spd(4),), {}),
    "svd": (lambda a: jnp.linalg.svd(a, full_matrices=False), lambda: (_f32(4, 3),), {}),
    "random": (_rng, lambda: (jax.random.PRNGKey(42),), {}),
    "bf16": (lambda a, b: (a.astype(jnp.bfloat16) @ b.astype(jnp.bfloat16)).astype(jnp.float32).sum(0),
             lambda: (_f32(8, 8), _f32(8, 4)), {}),
    "conv": (_conv, lambda: (_f32(1, 2, 8, 8), _f32(3, 2, 3, 3)), {}),
    "grad_mlp": (jax.grad(_mlp_loss), lambda: (_mlp_params(), _f32(5, 8), _f32(5, 4)), {}),
    "named_scope": (_named_scope_fn, lambda: (_f32(4, 4),), {}),
    "donation": (lambda a, b: (a + b, a * b), lambda: (_f32(6), _f32(6)), {"donate_argnums": (0,)}),
    "cumsum": (lambda x: jnp.cumsum(x, axis=1) + jnp.cumprod(x, axis=0), lambda: (_f32(3, 4),), {}),
    "top_k": (lambda x: lax.top_k(x, 3), lambda: (_f32(4, 10),), {}),
    "reductions": (lambda x: (x.max(0), x.mean(1), jnp.argmax(x, 1), jnp.log1p(jnp.exp(x)).std()),
                   lambda: (_f32(4, 5),), {}),
    "dynamic_slice": (lambda x, i: lax.dynamic_update_slice(x, lax.dynamic_slice(x, (i, 0), (2, 3)) * 2, (0, i)),
                      lambda: (_f32(6, 6), jnp.int32(2)), {}),
    "tuple_outputs": (lambda x: (x, (x * 2, {"a": x.sum()}), [x.T]), lambda: (_f32(2, 3),), {}),
    "vmap_remat": (jax.vmap(jax.checkpoint(lambda x: jnp.sin(jnp.sin(x)).sum())), lambda: (_f32(3, 4),), {}),
    "reduce_window": (lambda x: lax.reduce_window(x, -jnp.inf, lax.max, (2, 2), (1, 1), "VALID"),
                      lambda: (_f32(4, 4),), {}),
    "rng_bit_generator": (lambda k: lax.rng_bit_generator(k, (4, 4), dtype=jnp.uint32),
                          lambda: (jnp.zeros((4,), jnp.uint32),), {}),
    "maxpool_grad": (jax.grad(lambda x: lax.reduce_window(x, -jnp.inf, lax.max, (2, 2), (2, 2), "VALID").sum()),
                     lambda: (_f32(4, 4),), {}),
    "integer_bits": (lambda x: (lax.population_count(x), lax.clz(x), x >> 2, x ^ 7),
                     lambda: (jnp.arange(8, dtype=jnp.uint32),), {}),
}
STAGES = ("unoptimized", "optimized")

_CACHE: dict[tuple[str, str], str] = {}


def _program_text(name: str, stage: str) -> str:
    key = (name, stage)
    if key not in _CACHE:
        fn, args, kw = PROGRAMS[name]
        lowered = jax.jit(fn, **kw).lower(*args())
        _CACHE[(name, "unoptimized")] = lowered.as_text(dialect="hlo", debug_info=True)
        _CACHE[(name, "optimized")] = lowered.compile().as_text()
    return _CACHE[key]


@pytest.fixture(scope="session")
def hlo_text():
    """Lazily lowers/compiles each program once per session (both stages from one lowering)."""
    return _program_text


# ----------------------------------------------------------------------------- comparison


def _oracle_shape_text(inst) -> str:
    """The shape as XLA prints it: between '= ' and ' opcode(' in the instruction's own print."""
    s = inst.to_string()
    start = s.index(" = ") + 3
    op = opcode_text(inst.opcode)
    if f" {op}(" not in s and op.startswith("async-"):  # printed as its sugar (reduce-scatter-start)
        end = re.search(r" [a-z][a-z0-9\-]*-" + op[len("async-"):] + r"\(", s[start:]).start() + start
    else:
        end = s.index(f" {op}(", start)
    return s[start:end]


def _drop_comments(shape_text: str) -> str:
    """XLA prints ``/*index=5*/`` inside long tuple shapes; our ``str(Shape)`` does not."""
    return re.sub(r"/\*.*?\*/", "", shape_text)


def _strip_layouts(shape_text: str) -> str:
    return re.sub(r"\{[^{}]*\}", "", shape_text)


def _compare(text: str) -> int:
    ours = parse_module(text)
    theirs = _hlo.hlo_module_from_text(text)

    # Computations: same names in the same order (the oracle keeps text order when it parses
    # a module; if a future version re-orders, compare sets here instead).
    # (for ``X-start`` sugar such as ``reduce-scatter-start`` the oracle makes the wrapped
    # computation the text only implies, named by itself; ours keeps the sugar as written)
    sugar = any(async_sugar(i.opcode) for i in ours.instructions())
    their_comps = [c for c in theirs.computations() if not sugar or c.name in text]
    assert [c.name for c in ours.computations] == [c.name for c in their_comps]
    printed = theirs.to_string()
    entry = re.search(r"^ENTRY %?(\S+)", printed, re.M).group(1)
    assert ours.entry.name == entry and ours.entry.is_entry
    # Instruction.to_string() has no ROOT marker; the module print has one per computation.
    # (Instruction names are unique module-wide in XLA, so a set of names is enough.)
    their_roots = set(re.findall(r"^\s*ROOT %?(\S+) =", printed, re.M))
    if sugar:
        their_roots &= {i.name for c in their_comps for i in c.instructions()}
    assert {c.root.name for c in ours.computations} == their_roots

    n = 0
    for comp, tc in zip(ours.computations, their_comps):
        their_insts = tc.instructions()
        users = comp.users()
        order = {i.name: k for k, i in enumerate(comp.instructions)}
        assert [i.name for i in comp.instructions] == [i.name for i in their_insts], comp.name
        for inst, ti in zip(comp.instructions, their_insts):
            where = f"{comp.name}/{inst.name}"
            part = async_sugar(inst.opcode)
            assert (f"async-{part[1]}" if part else inst.opcode) == opcode_text(ti.opcode), where
            assert inst.operands == [o.name for o in ti.operands()], where
            assert [u.name for u in users[inst.name]] == sorted(
                (u.name for u in ti.users()), key=order.__getitem__), where
            their_raw = _oracle_shape_text(ti)
            their_shape = _drop_comments(their_raw)
            our_shape = str(inst.shape)
            if "{" in inst.shape_text or not inst.shape.dimensions and not inst.shape.is_tuple:
                assert our_shape == their_shape, where
            else:  # no layout in the input text: the oracle filled in defaults
                assert _strip_layouts(our_shape) == _strip_layouts(their_shape), where
            # and the oracle's shape print is parseable by our shape parser, to the same thing
            assert str(parse_shape(their_raw)) == their_shape, where
            n += 1
        assert comp.root is not None and any(i.is_root for i in comp.instructions), comp.name
    return n


@pytest.mark.parametrize("stage", STAGES)
@pytest.mark.parametrize("program", sorted(PROGRAMS))
def test_matches_xla_parser(hlo_text, program, stage):
    text = hlo_text(program, stage)
    n = _compare(text)
    assert n == sum(len(c.instructions()) for c in _hlo.hlo_module_from_text(text).computations())


def test_metadata_resolves_to_this_file(hlo_text):
    """Unoptimized text with debug_info carries stack frames that point back into this file."""
    mod = parse_module(hlo_text("named_scope", "unoptimized"))
    located = [i for i in mod.instructions() if i.metadata.source is not None]
    assert located
    assert any(s.file and s.file.endswith("test_hlo_oracle.py") and s.function == "_named_scope_fn"
               for i in located for s in i.metadata.stack)
    scoped = [i for i in mod.instructions() if "encoder/layer0" in i.metadata.op_name]
    assert scoped
