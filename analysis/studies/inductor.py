"""XLA beside Inductor: one PyTorch model's kernels from both compilers, layer by layer (docs/pytorch.md,
"XLA beside Inductor").

Reads a bundle whose job compiled the model with Inductor too (``bundle.inductor``, made by
``analysis.compile.inductor``, checked by ``analysis.bundle.checks.check_inductor``). A layer is a
module path as both sides name it (``layers.0/attn``, ``mlp/1``; ``""`` for the model's own
forward). Each kernel is listed under every layer it holds ops of, with the torch ops of that layer
it holds (XLA's from its ops' ``op_name``: ``up/torch::linear/...``; Inductor's from the original
ATen op of each node it fused), and the other layers it also holds: where one compiler fused
across a layer's border and the other did not, the two rows say so. A kernel's time counts in
one layer only, its home (XLA's layer tree's owner; Inductor's the module of its result).

The two programs' whole calls were timed alternated in one run: the verdict is said only where
their spreads part (``analysis.measures.verdict``). Pure: reads a Bundle.
"""

from __future__ import annotations

from dataclasses import dataclass

from analysis import measures
from analysis.program.layers import layer_path, layers_of_bundle
from analysis.program.kernels import launching

ROOT = "(model)"


@dataclass(frozen=True)
class SideKernel:
    """One kernel of one side in one layer's row."""

    name: str
    what: str  # how it runs: "XLA fusion", "YNNPACK library call", "C++ kernel", "ATen CPU BLAS (MKL)"
    ops: tuple[str, ...]  # the torch ops of this layer it holds (``aten::gelu``, ``torch::linear``)
    also: tuple[str, ...]  # the other layers whose ops it holds too
    home: bool  # its time counts in this layer
    time: measures.Spread | None  # its time per call, measured (None: not measured)


@dataclass(frozen=True)
class LayerRow:
    layer: str  # a module path (``layers.0/attn``), ROOT for the model's own forward
    xla: tuple[SideKernel, ...]
    inductor: tuple[SideKernel, ...]
    xla_s: float | None  # its home kernels' medians summed
    inductor_s: float | None


@dataclass(frozen=True)
class BesideInductor:
    rows: list[LayerRow]
    xla_kernels: int  # kernels that launch
    inductor_kernels: int  # call sites (a kernel called twice is two)
    inductor_cpp: int  # of them, Inductor's own C++ kernels
    inductor_library: int  # of them, ATen ops run as library routines or as they are
    xla_call: measures.Spread | None  # alternated calls
    inductor_call: measures.Spread | None
    verdict: str  # "" where not measured
    torch: str
    graphs: int


def torch_op(segment: str) -> str:
    """``aten::add.Tensor`` -> ``aten::add``: the op as both sides name it, without its overload."""
    ns, _, name = segment.partition("::")
    return f"{ns}::{name.split('.')[0]}" if name else segment


def _op_of(op_name: str) -> str | None:
    """The torch op an XLA op came from: the first scope of its ``op_name`` that is an op
    (``namespace::name``)."""
    for part in op_name.split("/"):
        if "::" in part:
            return torch_op(part)
    return None


# Ops that only view or move their operand (a reshape, a transpose): a kernel that holds one of a
# layer and real work of another is that other layer's, not listed under this one as well
VIEW_OPS = frozenset({"aten::view", "aten::_unsafe_view", "aten::reshape", "aten::t", "aten::transpose",
                      "aten::permute", "aten::unsqueeze", "aten::squeeze", "aten::select", "aten::expand",
                      "aten::clone", "aten::slice", "aten::alias", "aten::contiguous"})


def _working(per: dict[str, list[str]]) -> dict[str, list[str]]:
    """A kernel's layers without those it only views or moves data of, unless that is all it does."""
    real = {layer: ops for layer, ops in per.items() if not ops or any(op not in VIEW_OPS for op in ops)}
    return real or per


def _layer_name(path) -> str:
    return "/".join(path) if path else ROOT


def _what_xla(k) -> str:
    if k.route == "library":
        return f"{k.library or 'library'} library call"
    if k.route == "emitter":
        return "XLA fusion" if k.fusion_kind or k.opcode == "fusion" else f"XLA {k.opcode}"
    return f"XLA {k.route}"


def _what_inductor(k: dict) -> str:
    if k["kind"] == "cpp":
        return "Inductor C++ kernel"
    if k["kind"] == "extern":
        return k.get("library") or "library call"
    return "ATen op (run as it is)"


def _spread(d: dict, prefix: str = "") -> measures.Spread | None:
    med = d.get(f"{prefix}median_s")
    if not isinstance(med, (int, float)) or isinstance(med, bool):
        return None

    def num(k, default):
        v = d.get(f"{prefix}{k}")
        return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else default

    n = d.get("calls", d.get("alternated_calls"))
    return measures.Spread(float(med), num("q1_s", med), num("q3_s", med), num("min_s", med), num("max_s", med),
                           n if type(n) is int else 1)


def _xla_time(row) -> measures.Spread | None:
    """An XLA kernel's time per call from its timings row: the profiler's median (the row keeps
    no quartiles: the spread is that median alone)."""
    med = row.get("median_s") if isinstance(row, dict) else None
    if not isinstance(med, (int, float)) or isinstance(med, bool):
        return None
    return measures.Spread(float(med), float(med), float(med), float(med), float(med), 1)


def _call(side: dict | None) -> measures.Spread | None:
    return _spread(side, "call_") if isinstance(side, dict) else None


def _xla_side(bundle) -> tuple[dict, int, list[str]]:
    """Per layer: XLA's kernels holding ops of it ({layer: [SideKernel]}), the launching kernels'
    count, and the layers in program order."""
    root = layers_of_bundle(bundle)
    home: dict[str, str] = {}
    order: list[str] = []
    if root is not None:
        for layer in root.walk():
            name = _layer_name(layer.path)
            order.append(name)
            for kn in layer.kernels:
                home[kn] = name
    rows = (bundle.timings or {}).get("kernels") or {}
    kernels = launching(bundle.kernels)
    by_layer: dict[str, list[SideKernel]] = {}
    for k in kernels:
        ops: dict[str, list[str]] = {}
        for op_name in k.op_names or ():
            layer = _layer_name(layer_path(op_name))
            op = _op_of(op_name)
            got = ops.setdefault(layer, [])
            if op and op not in got:
                got.append(op)
        if not ops and k.name in home:
            ops[home[k.name]] = []
        ops = _working(ops)
        row = rows.get(k.name) if isinstance(rows, dict) else None
        t = _xla_time(row)
        mine = home.get(k.name) or (next(iter(ops)) if ops else None)
        for layer, layer_ops in ops.items():
            by_layer.setdefault(layer, []).append(SideKernel(
                k.name, _what_xla(k), tuple(layer_ops), tuple(x for x in ops if x != layer), layer == mine, t))
    return by_layer, len(kernels), order


def _inductor_side(ind: dict) -> tuple[dict, list[str]]:
    by_layer: dict[str, list[SideKernel]] = {}
    order: list[str] = []
    for k in ind.get("kernels") or []:
        per: dict[str, list[str]] = {}
        for mod, op in k.get("parts") or []:
            got = per.setdefault(_layer_name(tuple(p for p in mod.split("/") if p)), [])
            op = torch_op(op)
            if op not in got:
                got.append(op)
        for mod in k.get("modules") or []:
            per.setdefault(_layer_name(tuple(p for p in mod.split("/") if p)), [])
        per = _working(per)
        mod = k.get("module")
        mine = _layer_name(tuple(p for p in mod.split("/") if p)) if isinstance(mod, str) else None
        if not per:
            per[mine or ROOT] = [torch_op(a) for a in k.get("aten") or []]
        t = _spread(k)
        label = f"{k['name']} #{k['handle']}" if k.get("handle") is not None else k["name"]
        for layer, ops in per.items():
            if layer not in order:
                order.append(layer)
            by_layer.setdefault(layer, []).append(SideKernel(
                label, _what_inductor(k), tuple(ops), tuple(x for x in per if x != layer),
                layer == (mine if mine in per else next(iter(per))), t))
    return by_layer, order


def beside_inductor(bundle) -> BesideInductor | None:
    """The two compilers' kernels of one PyTorch model, layer by layer, and the whole calls'
    verdict; None when the bundle holds no Inductor compile."""
    ind = bundle.inductor
    if not isinstance(ind, dict):
        return None
    xla, xla_count, order = _xla_side(bundle)
    torch_side, torch_order = _inductor_side(ind)
    for layer in torch_order:
        if layer not in order:
            order.append(layer)
    rows = []

    def home_sum(ks) -> float | None:
        ts = [k.time.median for k in ks if k.home and k.time is not None]
        return sum(ts) if ts else None

    for layer in order:
        a, b = tuple(xla.get(layer, ())), tuple(torch_side.get(layer, ()))
        if a or b:
            rows.append(LayerRow(layer, a, b, home_sum(a), home_sum(b)))
    sites = ind.get("kernels") or []
    xc, ic = _call(ind.get("xla")), _call(ind.get("compiled"))
    return BesideInductor(rows, xla_count, len(sites), sum(1 for k in sites if k["kind"] == "cpp"),
                          sum(1 for k in sites if k["kind"] != "cpp"), xc, ic, call_verdict(ind),
                          str(ind.get("torch") or ""), ind.get("graphs") or 0)


def call_verdict(ind: dict | None) -> str:
    """The two whole calls' verdict in words, from the numbers alone: "Inductor's module is
    faster" / "slower" (than XLA's program), or "within the spread: no verdict" with the calls
    made; "" where they were not measured."""
    if not isinstance(ind, dict) or not ind.get("measured"):
        return ""
    v = measures.verdict(_call(ind.get("xla")), _call(ind.get("compiled")))
    if v in ("faster", "slower"):
        return f"Inductor's module is {v} than XLA's program"
    if not v:
        return ""
    alt = ind.get("alternation") if isinstance(ind.get("alternation"), dict) else {}
    n = alt.get("calls")
    return "within the spread: no verdict" + (f" after {n} alternated calls each" if type(n) is int else "")


def differences(r: BesideInductor) -> list[str]:
    """Where the two compilers grouped the ops differently, in sentences read off the rows: a
    kernel that holds ops of several layers (it fused across a layer's border) beside the other
    compiler's kernels for those layers, and each layer whose ops the two ran in a different
    number of kernels. The same sentences for the app, the CLI and the report."""
    out: list[str] = []
    sides = (("XLA", "Inductor", lambda row: row.xla, lambda row: row.inductor),
             ("Inductor", "XLA", lambda row: row.inductor, lambda row: row.xla))
    for me, other, mine, theirs in sides:
        for row in r.rows:
            for k in mine(row):
                if not (k.home and k.also):
                    continue
                layers = [row.layer, *k.also]
                held = []
                for layer in layers:
                    same = next((x for rr in r.rows if rr.layer == layer for x in mine(rr) if x.name == k.name), None)
                    ops = ", ".join(f"`{op}`" for op in (same.ops if same else ())[:3])
                    held.append(f"{ops} of `{layer}`" if ops else f"ops of `{layer}`")
                spans = [x for rr in r.rows if rr.layer in layers for x in theirs(rr)
                         if x.also and set(layers) <= {rr.layer, *x.also}]
                out.append(f"{me}'s `{k.name}` ({k.what}) holds {' and '.join(held)}: it fused across the "
                           "layers' border"
                           + (f"; so does {other}'s `{spans[0].name}`." if spans else
                              f"; {other} keeps them in separate kernels."))
    for row in r.rows:
        nx, ni = len(row.xla), len(row.inductor)
        if nx and ni and nx != ni:
            names = lambda ks: ", ".join(f"`{k.name}`" for k in ks[:4]) + (" …" if len(ks) > 4 else "")  # noqa: E731
            out.append(f"`{row.layer}`: its ops run in {nx} XLA kernels ({names(row.xla)}) and in {ni} "
                       f"Inductor kernel{'' if ni == 1 else 's'} ({names(row.inductor)}).")
    return out
