"""Lessons of the gallery's sharded models (many devices), from the numbers of the compile at
hand, as ``sample_models.lessons`` writes the others: every claim is checked on the compile and
said not to hold where it does not. The collectives, their devices and bytes are
``analysis.devices.collectives``'; the sizes the claims compare them with come from the model's own
inputs as the bundle describes them. Pure Python: reads a Bundle, never imports JAX.
"""

from __future__ import annotations

from analysis.bundle.core import Bundle
from analysis.devices.collectives import Collective, collectives
from analysis.render.format import human_bytes
from sample_models.lesson_kit import Check, Lesson, basics, kernels_of, pre_ops

_ITEM = {"float32": 4, "bfloat16": 2, "float16": 2, "int32": 4, "float64": 8}


def _inputs(b: Bundle, prefix: str = "") -> list[dict]:
    return [d for d in b.source.get("inputs") or [] if str(d.get("path", "")).startswith(prefix)]


def _nbytes(d: dict) -> int:
    n = _ITEM.get(str(d.get("dtype")), 4)
    for s in d.get("shape") or []:
        n *= int(s)
    return n


def _of(b: Bundle, kind: str) -> list[Collective]:
    return [c for c in collectives(b.module("hlo_after")) if c.kind == kind]


def _devices(b: Bundle) -> int:
    return int(b.options.get("devices") or b.environment.get("device_count") or 1)


def _entry_shapes(b: Bundle) -> list[str]:
    """The optimized entry's parameter shapes (each device's blocks), as dims text ``[32,64]``."""
    m = b.module("hlo_after")
    if m is None:
        return []
    return ["[" + i.shape.dims_text().partition("[")[2] for i in m.entry.instructions if i.opcode == "parameter"]


def _head(b: Bundle, what: str) -> str:

    return basics(b) + f" It runs on **{_devices(b)} devices**; {what}"


def _names(cs) -> str:
    names = [f"`{c.name}`" for c in cs]
    return ", ".join(names[:4]) + (f" and {len(names) - 4} more" if len(names) > 4 else "")


def _moves(cs) -> str:
    sent = sum(c.sent_bytes for c in cs)
    return (f"Each device sends and receives about {human_bytes(sent)} for them (an estimate under the "
            "ring algorithms)")


def _dp_train_step(b: Bundle):

    reduces = _of(b, "all-reduce")
    grads = sum(_nbytes(d) for d in _inputs(b, "[0]"))
    payload = sum(c.buffer_bytes for c in reduces)
    x = next(iter(_inputs(b, "[1]")), {"shape": [0, 0]})
    rows = x["shape"][0] // max(1, _devices(b))
    others = [c for c in collectives(b.module("hlo_after")) if c.kind != "all-reduce"]
    text = _head(b, f"the batch's {x['shape'][0]} rows are split, {rows} per device, and the gradients meet in "
                    f"{_names(reduces) or 'no all-reduce'} ({reduces[0].words() if reduces else '-'}), "
                    f"{human_bytes(payload)} per device: the parameters' {human_bytes(grads)} (and the loss), "
                    f"not the batch. " + _moves(reduces) + ".")
    return Lesson("dp_train_step", text, [
        Check(f"the gradients are summed by all-reduce ({len(reduces)} kernel(s)), with no other collective",
              bool(reduces) and not others),
        Check(f"the all-reduce carries the parameters' size ({human_bytes(payload)} for {human_bytes(grads)} of "
              "parameters, the loss beside them)", grads <= payload <= grads + 16),
        Check(f"each device holds {rows} of the batch's rows", f"[{rows},{x['shape'][1]}]" in _entry_shapes(b)),
    ])


def _tp_mlp(b: Bundle):

    cs = collectives(b.module("hlo_after"))
    kinds = sorted(c.kind for c in cs)
    x = next(iter(_inputs(b, "[0]")), {"shape": [0, 0]})
    out = _nbytes(x)  # the block's output has the input's shape: [batch, d]
    w1 = next(iter(_inputs(b, "[1]")), {"shape": [0, 0]})  # (x, w1, b1, w2, b2)
    slice_cols = w1["shape"][1] // max(1, _devices(b))
    text = _head(b, f"the first weight is split by columns ({slice_cols} of {w1['shape'][1]} per device), the "
                    f"second by rows, and the partial outputs are summed once: "
                    f"{_names(cs) or 'no collective'} ({cs[0].words() if cs else '-'}), "
                    f"{human_bytes(sum(c.buffer_bytes for c in cs))}, the block's output. " + _moves(cs) + ".")
    return Lesson("tp_mlp", text, [
        Check("one all-reduce per block (or a reduce-scatter + all-gather pair)",
              kinds in (["all-reduce"], ["all-gather", "reduce-scatter"])),
        Check(f"it carries the block's output ({human_bytes(out)})", bool(cs) and cs[0].buffer_bytes == out),
        Check(f"each device multiplies by its {slice_cols} columns of the first weight",
              f"[{w1['shape'][0]},{slice_cols}]" in _entry_shapes(b)),
    ])


def _fsdp_train(b: Bundle):

    weights = _inputs(b, "[0]")
    gathers, scatters = _of(b, "all-gather"), _of(b, "reduce-scatter")
    total = sum(_nbytes(w) for w in weights)
    gathered, scattered = sum(c.buffer_bytes for c in gathers), sum(c.buffer_bytes for c in scatters)
    combined = (f" (XLA combined the {len(weights)} into {len(gathers)})" if 0 < len(gathers) < len(weights) else "")
    text = _head(b, f"each keeps an eighth of every weight. Before the weights are used, "
                    f"{len(gathers)} all-gather(s) ({_names(gathers)}){combined} bring them whole "
                    f"({human_bytes(gathered)} for {len(weights)} weights of {human_bytes(total)}), and the gradients "
                    f"go back as {len(scatters)} reduce-scatter(s) ({_names(scatters)}: "
                    f"{scatters[0].words() if scatters else '-'}), each device keeping its slice. "
                    + _moves(gathers + scatters) + ".")
    return Lesson("fsdp_train", text, [
        Check(f"the all-gathers bring every weight whole ({human_bytes(gathered)} = the weights' {human_bytes(total)})",
              bool(gathers) and gathered == total),
        Check(f"the gradients are reduce-scattered ({human_bytes(scattered)}, the weights' size)",
              bool(scatters) and scattered == total),
        Check("no all-reduce: each device sums only the slice it keeps", not _of(b, "all-reduce")),
    ])


def _ring_shard_map(b: Bundle):

    n = _devices(b)
    perms = _of(b, "collective-permute")
    x = next(iter(_inputs(b)), {"shape": [0], "dtype": "float32"})
    block = _nbytes(x) // max(1, n)
    ring = all(len(c.pairs) == n and all(t == (s + 1) % n for s, t in c.pairs) for c in perms)
    text = _head(b, f"{len(perms)} collective-permute(s) ({_names(perms)}) pass one block "
                    f"({human_bytes(block)}) at a time: {perms[0].words() if perms else '-'}. After {n - 1} steps "
                    f"every device has the sum, with no all-reduce. " + _moves(perms) + ".")
    return Lesson("ring_shard_map", text, [
        Check(f"{n - 1} collective-permutes, one per step", len(perms) == n - 1),
        Check("their pairs make a ring (device i sends to i + 1)", bool(perms) and ring),
        Check(f"each moves one block ({human_bytes(block)})", bool(perms) and all(c.buffer_bytes == block for c in perms)),
        Check("no all-reduce", not _of(b, "all-reduce")),
    ])


def _moe_all_to_all(b: Bundle):

    alls = _of(b, "all-to-all")
    expert = kernels_of(b, pre_ops(b, "dot", scope="expert"))
    text = _head(b, f"the tokens go to their expert and back in {len(alls)} all-to-all(s) ({_names(alls)}: "
                    f"{alls[0].words() if alls else '-'}), {human_bytes(alls[0].buffer_bytes if alls else 0)} each "
                    f"per device; the expert's matmuls ({len(expert)} kernel(s)) run between them. "
                    + _moves(alls) + ".")
    return Lesson("moe_all_to_all", text, [
        Check("two all-to-alls: dispatch and combine", len(alls) == 2),
        Check("both move the same bytes (what goes out comes back)", len(alls) == 2 and
              alls[0].buffer_bytes == alls[1].buffer_bytes),
        Check("the expert's matmuls are kernels of their own between them", bool(expert)),
    ])


LESSONS = {"dp_train_step": _dp_train_step, "tp_mlp": _tp_mlp, "fsdp_train": _fsdp_train,
           "ring_shard_map": _ring_shard_map, "moe_all_to_all": _moe_all_to_all}
