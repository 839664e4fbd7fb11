"""Lessons of the gallery's PyTorch models (compiled by XLA through torchax), from the numbers of
the compile at hand, as ``sample_models.lessons`` writes the others: every claim is checked on
the compile and said not to hold where it does not. What makes them PyTorch's: the module's
parameters as the program's inputs, its submodules' names as the layers, the PyTorch op each HLO
op came from (``aten::gelu`` in its name) and the user's own ``forward`` as every kernel's source.
Pure Python: reads a Bundle, never imports JAX or torch.
"""

from __future__ import annotations

from analysis.bundle.core import Bundle
from analysis.program.layers import layers_of_bundle
from sample_models.lesson_kit import Check, Lesson, basics, kernels_of, layer_counts, params_check, pre_ops


def _names(ks) -> str:
    ks = sorted(ks)
    return ", ".join(f"`{k}`" for k in ks[:4]) + (f" and {len(ks) - 4} more" if len(ks) > 4 else "")


def _sources_in_file(b: Bundle) -> tuple[int, int]:
    """(kernels with a source line, those whose every line is in the model's own file)."""
    file = b.source.get("file") or ""
    with_lines = [k for k in b.kernels if k.source_lines]
    own = [k for k in with_lines if all(f == file or f.endswith("/" + file) for f, _ in k.source_lines)]
    return len(with_lines), len(own)


def _source_check(b: Bundle) -> Check:
    n, own = _sources_in_file(b)
    return Check(f"every kernel's source line is in the model's `forward`, not in torch or torchax ({own} of {n})",
                 n > 0 and own == n)


def _matmul_kernels(b: Bundle, ops) -> tuple[dict, set[str], set[str]]:
    """The kernels that compute the dots ``ops`` (a kernel can hold a dot's bias add and no dot: the
    layer norm after it), and of them the library calls and the Triton GEMMs (on a GPU XLA writes
    some matmuls through Triton instead of calling cuBLAS)."""
    ks = kernels_of(b, ops)
    holders = {k.name: k for k in b.kernels if k.name in ks and (k.route == "library" or k.opcode == "dot"
                                                                   or "dot" in k.fused_opcodes)}
    return (holders, {n for n, k in holders.items() if k.route == "library"},
            {n for n, k in holders.items() if k.route == "triton"})


def _handed_off(what: str, holders: dict, lib: set, tri: set) -> Check:
    return Check(f"{what} are library calls or Triton GEMMs, none left to XLA's loop emitter "
                 f"({len(lib)} library, {len(tri)} Triton, of the {len(holders)} kernels with a dot)",
                 len(lib) + len(tri) == len(holders) > 0)


def _torch_mlp(b: Bundle) -> Lesson:
    dots = pre_ops(b, "dot")
    k_dot, lib, tri = _matmul_kernels(b, dots)
    bias = pre_ops(b, "add", scope="hidden")
    act_ops, act_k = layer_counts(b, "act")
    k_act = kernels_of(b, pre_ops(b, scope="act"))
    shared = kernels_of(b, bias) & k_act
    transposes = [k.name for k in b.kernels if k.opcode == "transpose" or "transpose" in k.fused_opcodes]
    text = (basics(b) + f" The module's {b.source.get('parameters', 0)} parameter arrays (`named_parameters()`, "
            f"through `torchax.extract_jax`) are the program's inputs. `nn.Linear` computes `x @ W.T + b`: its "
            f"{len(dots)} matmuls ended in {_names(k_dot)}"
            + (f" ({len(lib)} library call(s))" if lib else "") + (f" ({len(tri)} Triton GEMM(s))" if tri else "")
            + (", reading the weight as it is stored: no transpose kernel" if not transposes else
               f"; the transpose ran in {_names(transposes)}")
            + f". The exact GELU (`nn.GELU()`, an erf: {act_ops} ops) ran in {act_k} kernel(s)"
            + (", together with the hidden layer's bias add" if shared else "") + ".")
    return Lesson("torch_mlp", text, [
        params_check(b, 1),
        Check(f"the program has the two matmuls of the two `nn.Linear` layers ({len(dots)})", len(dots) == 2),
        _handed_off("the matmuls", k_dot, lib, tri),
        Check(f"the GELU's {act_ops} ops run in one kernel with the bias add before it"
              + (f" ({_names(shared)})" if shared else ""), act_k == 1 < act_ops and bool(shared)),
        Check("no transpose kernel for `W.T`" + (f" (found {_names(transposes)})" if transposes else ""),
              not transposes),
        _source_check(b),
    ])


def _torch_block(b: Bundle) -> Lesson:
    root = layers_of_bundle(b)
    blocks = list(root.children) if root is not None else []
    want = {("layers.0", "attn"), ("layers.0", "mlp", "0"), ("layers.1", "ln2")}
    found = {p for p in want if root is not None and root.find(p) is not None}
    soft = pre_ops(b, scope="attn", op_name_has="aten::softmax")
    k_soft = kernels_of(b, soft)
    ln_ops, ln_k = layer_counts(b, "layers.0", "ln1")
    proj = pre_ops(b, "dot", scope="attn")
    holders, lib, tri = _matmul_kernels(b, proj)
    text = (basics(b) + f" The layer tree is the module's own: {', '.join(f'`{n}`' for n in blocks[:4])}, each with "
            "`ln1`, `attn`, `ln2` and `mlp` (an `nn.ModuleList` item is named as `named_modules()` names it). "
            f"The softmax of the {len(blocks)} blocks' attention ({len(soft)} ops, `aten::softmax` in their names) ran "
            f"in {len(k_soft)} kernel(s); the first layer norm's {ln_ops} ops in {ln_k} (kernels it shares with the "
            f"residual adds around it among them); the attention's {len(proj)} matmuls (projections and the batched "
            f"products) in {len(holders)} kernel(s), {len(lib)} of them library calls"
            + (f", {len(tri)} Triton GEMMs" if tri else "") + ".")
    return Lesson("torch_block", text, [
        Check(f"the layers are named as `named_modules()` names them ({len(found)} of {len(want)} looked for)",
              found == want),
        Check(f"the softmax is fused: {len(soft)} ops in {len(k_soft)} kernel(s)", 0 < len(k_soft) < len(soft)),
        Check(f"the layer norm is fused: {ln_ops} ops in {ln_k} kernel(s)", 0 < ln_k < ln_ops),
        _handed_off("the attention's matmuls", holders, lib, tri),
        _source_check(b),
    ])


LESSONS = {"torch_mlp": _torch_mlp, "torch_block": _torch_block}


# ----------------------------------------------------------------------------- beside Inductor

def _row(r, layer: str):
    return next((row for row in r.rows if row.layer == layer), None)


def _inductor_mlp(b: Bundle, r) -> Lesson | None:
    hidden, act, out = (_row(r, n) for n in ("hidden", "act", "out"))
    if None in (hidden, act, out):
        return None
    x_gelu = [k for k in act.xla if "aten::gelu" in k.ops]
    i_gelu = [k for k in act.inductor if "aten::gelu" in k.ops]
    x_lib = [k for k in out.xla if "library" in k.what]
    text = ("Both compilers run this MLP's two matmuls in a library (XLA: YNNPACK, Inductor: ATen's CPU BLAS) "
            "and generate the GELU, but they draw the kernels' borders differently. Inductor turns each "
            "`nn.Linear` into one `addmm`: the bias is added inside the library call. XLA hands YNNPACK the matmul "
            "alone and adds the bias in a fusion of its own making, and for the hidden layer that fusion is the "
            "GELU's: the bias add and the erf-GELU after it are one kernel, so the pre-activation never goes to "
            "memory. Inductor's GELU is a C++ kernel that reads the `addmm`'s result. Same ops, same model: "
            "which ops share a kernel is the compiler's choice, and it depends on what its library calls can "
            "absorb.")
    return Lesson("torch_mlp: where XLA and Inductor fuse differently", text, [
        Check("Inductor runs each Linear, bias included, as one library call (`hidden`: "
              f"{', '.join(k.name for k in hidden.inductor) or 'none'}; `out`: "
              f"{', '.join(k.name for k in out.inductor) or 'none'})",
              all(len(row.inductor) == 1 and "addmm" in row.inductor[0].name for row in (hidden, out))),
        Check(f"XLA runs `out` as a library matmul and a fusion for its bias ({len(out.xla)} kernels, "
              f"{len(x_lib)} a library call)", len(out.xla) == 2 and len(x_lib) == 1),
        Check("XLA's GELU kernel holds `hidden`'s bias add too (it fuses across the layers' border)"
              + (f": {x_gelu[0].name}" if x_gelu else ""),
              len(x_gelu) == 1 and "hidden" in x_gelu[0].also),
        Check("Inductor's GELU kernel holds the GELU alone" + (f": {i_gelu[0].name}" if i_gelu else ""),
              len(i_gelu) == 1 and not i_gelu[0].also),
    ])


INDUCTOR_LESSONS = {"torch_mlp": _inductor_mlp}


def inductor_lesson(b: Bundle, r=None) -> Lesson | None:
    """The gallery's lesson on where XLA and Inductor fuse one of its PyTorch models differently,
    checked on a bundle that holds both compiles (``Job.inductor``); None for any other. ``r``: the
    bundle's ``beside_inductor`` where the caller has it already."""
    from analysis.studies.inductor import beside_inductor

    name = (b.source or {}).get("name")
    if (b.source or {}).get("kind") != "gallery" or name not in INDUCTOR_LESSONS:
        return None
    r = r if r is not None else beside_inductor(b)
    return INDUCTOR_LESSONS[name](b, r) if r is not None else None
