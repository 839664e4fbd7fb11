"""Lessons on what changed between two XLA releases for one gallery model: the same program
compiled by two jax releases (the Compare page's *One model, two XLA (jax) versions*; ``xla-explorer
compare MODEL --jax A --jax B``), told from the numbers of the two compiles at hand, as
``sample_models.lessons`` tells one compile: every claim is checked on the two compiles and said
not to hold where it does not. What changed is ``analysis.studies.compare.versions_diff``'s. Pure
Python: reads two Bundles, never imports JAX.
"""

from __future__ import annotations

from analysis.bundle.core import Bundle
from analysis.render.format import human_bytes
from analysis.studies.compare import versions_diff
from sample_models.lesson_kit import Check, Lesson, pre_ops


def _entry(b: Bundle) -> dict:
    m = b.module("hlo_after")
    return {i.name: i for i in m.entry.instructions} if m is not None else {}


def _pv(b: Bundle, seq: int, head_dim: int):
    """dot_product_attention's P·V matmul as XLA compiled it: the kernel (a dot without the
    softmax's exponential) whose result is [.., head_dim, seq] or [.., seq, head_dim] and which
    reads a [.., seq, seq] array made by a kernel of the API's half (``fused_api``). Returns
    (its entry instruction, the instruction making P), or (None, None)."""
    entry = _entry(b)
    for k in b.kernels:
        if "dot" not in k.fused_opcodes and k.opcode != "dot" or "exponential" in k.fused_opcodes:
            continue
        inst = entry.get(k.name)
        if inst is None or sorted(inst.shape.dimensions[-2:]) != sorted((seq, head_dim)):
            continue
        for o in inst.operands:
            p, pk = entry.get(o), b.kernel(o)
            if p is not None and list(p.shape.dimensions[-2:]) == [seq, seq] and pk is not None \
                    and any("/fused_api/" in n for n in pk.op_names):
                return inst, p
    return None, None


def _traced_pv(b: Bundle) -> str | None:
    """The P·V dot of the API's half as jax traced it (before XLA optimized): its shape, the one
    dot of that half in bf16 (the scores' dot asks for an f32 result)."""
    pre = b.module("hlo_before")
    if pre is None:
        return None
    shapes = {i.name: i.shape for i in pre.instructions()}
    bf16 = [shapes[n] for n in pre_ops(b, opcode="dot", scope="fused_api") if shapes[n].element_type == "bf16"]
    return bf16[0].dims_text() if len(bf16) == 1 else None


def _row(d: dict, metric: str) -> dict:
    return next((r for r in d["rows"] if r["metric"] == metric), {"a": None, "b": None})


def _attention(a: Bundle, b: Bundle) -> Lesson | None:
    inputs = a.source.get("inputs") or []
    if not inputs or len(inputs[0].get("shape") or []) != 4:
        return None
    _, seq, _, head_dim = inputs[0]["shape"]
    d = versions_diff(a, b)
    sides = {"A": a, "B": b}
    naive = {s: [k for k in x.kernels if any("/naive/" in n for n in k.op_names)] for s, x in sides.items()}
    jax = {s: (x.environment or {}).get("jax", "?") for s, x in sides.items()}
    pv = {s: _pv(x, seq, head_dim) for s, x in sides.items()}
    traced = {s: _traced_pv(x) for s, x in sides.items()}
    found = all(inst is not None for inst, _ in pv.values())
    dtype = {s: inst.shape.element_type if inst is not None else "?" for s, (inst, _) in pv.items()}
    widened = [s for s in sides if dtype[s] == "f32"]
    kept = [s for s in sides if dtype[s] == "bf16"]

    def said(s: str) -> str:
        inst, p = pv[s]
        if inst is None:
            return f"in jax {jax[s]} ({s}) no P·V matmul of the API's half was found"
        how = "widens it to f32" if dtype[s] == "f32" else f"keeps it in {dtype[s]}"
        return (f"jax {jax[s]}'s XLA ({s}) {how}: the probabilities P it reads are `{p.name}`, "
                f"{p.shape.dims_text()} ({human_bytes(p.shape.byte_size)}), and `{inst.name}` writes "
                f"{inst.shape.dims_text()} ({human_bytes(inst.shape.byte_size)})")

    moved, peak = _row(d, "bytes moved by kernels (per device)"), _row(d, "memory peak")
    same_program = traced["A"] is not None and traced["A"] == traced["B"]
    text = (f"The same program compiled by two XLA releases: jax {jax['A']} (A) and jax {jax['B']} (B). "
            f"`dot_product_attention`'s half runs in bf16, and jax traces its P·V matmul as "
            f"{traced['A'] or '?'} in both" + ("" if same_program else f" (B: {traced['B'] or '?'})")
            + ": what differs below is XLA's doing, not the program's.\n\n"
            + "".join(f"- {said(s)}.\n" for s in sides) + "\n"
            f"All the kernels move {human_bytes(moved['a'])} in A and {human_bytes(moved['b'])} in B; the memory "
            f"peak is {human_bytes(peak['a'])} in A and {human_bytes(peak['b'])} in B. The naive half, f32 "
            "throughout, has nothing to widen" + ("" if len(naive["A"]) == len(naive["B"]) else
                                               f" (its ops make {len(naive['A'])} kernels in A, {len(naive['B'])} "
                                               "in B: the releases group them differently)") + ".\n\nA bf16 array is half the bytes of the same array in f32: an XLA "
            "that widens a bf16 matmul reads and writes twice the bytes for it, and which of the two a release "
            "does can change from one release to the next with no change in your code. Look for it in the "
            "kernels that changed: the same names, other dtypes.")
    checks = [
        Check(f"jax traced the same P·V matmul for both releases ({traced['A'] or '?'})", same_program),
        Check("one release computes the P·V matmul in f32, the other keeps it in bf16"
              + (f" (f32 in {widened[0]}, bf16 in {kept[0]})" if len(widened) == len(kept) == 1 else ""),
              found and len(widened) == len(kept) == 1),
    ]
    if len(widened) == len(kept) == 1:
        w, k = widened[0].lower(), kept[0].lower()
        checks += [
            Check(f"the kernels move fewer bytes where bf16 is kept ({human_bytes(moved[k])} against "
                  f"{human_bytes(moved[w])})", None not in (moved[k], moved[w]) and moved[k] < moved[w]),
            Check(f"the memory peak is lower where bf16 is kept ({human_bytes(peak[k])} against "
                  f"{human_bytes(peak[w])})", None not in (peak[k], peak[w]) and peak[k] < peak[w]),
        ]
    # not "the same kernels": jax 0.12.1's XLA:CPU regrouped the naive half into bigger YNNPACK calls
    # (7 kernels in 0.12.0, fewer in 0.12.1), f32 all the same
    checks.append(Check(f"the naive half's kernels write f32 only in both releases ({len(naive['A'])} kernels "
                        f"in A, {len(naive['B'])} in B): nothing to widen",
                        all(naive.values()) and all("bf16" not in k.shape for ks in naive.values() for k in ks)))
    return Lesson("attention: one matmul, two releases", text, checks)


LESSONS = {"attention": _attention}
# the two releases each lesson was written from (the ones its test compiles): a link opens them
SHOWN_BY = {"attention": ("0.10.2", "0.12.0.1")}


def versions_lesson(a: Bundle, b: Bundle) -> Lesson | None:
    """The lesson on what changed between the releases of two compiles of one gallery model
    (``a`` and ``b`` compiled by two jax releases), from their own numbers; None where the
    gallery has no such lesson for the model, or the two are not one model in two releases."""
    name = a.source.get("name", "")
    if a.source.get("kind") != "gallery" or b.source.get("kind") != "gallery" or b.source.get("name") != name:
        return None
    if (a.environment or {}).get("jax") == (b.environment or {}).get("jax"):
        return None
    fn = LESSONS.get(name)
    if fn is None or a.module("hlo_after") is None or b.module("hlo_after") is None:
        return None
    return fn(a, b)
