"""Lessons for the gallery, written from the numbers of the compile at hand.

``lesson(bundle)`` returns the lesson for a gallery model's Bundle: markdown text that quotes
this compile's kernels, bytes and names, and the claims it makes as checks (claim, holds).
Nothing here is fixed text about what XLA "usually" does: every sentence that states a fact
about the compile is computed from it, and a claim that does not hold on this compile is
said so. Tests check that every claim holds on the CPU; the GPU check does the same on a GPU.
Pure Python: reads a Bundle, never imports JAX.
"""

from __future__ import annotations

from analysis.codegen.finish import code_of
from analysis.codegen import kernel_code as generated
from analysis.bundle.core import Bundle
from analysis.program.kernels import Kernel, epilogue_text
from analysis.render.format import human_bytes, library_calls
from sample_models.lesson_kit import Check, Lesson, basics, kernels_of, layer_counts as _layer_counts, \
    params_check as _params_check, pre_ops
from sample_models.lessons_devices import LESSONS as DEVICE_LESSONS
from sample_models.lessons_torch import LESSONS as TORCH_LESSONS
from analysis.program.memory import biggest_temporaries


def _kernels(b: Bundle, route: str | None = None) -> list[Kernel]:
    return [k for k in b.kernels if k.route != "control" and (route is None or k.route == route)]


def _contains(k: Kernel, opcode: str) -> bool:
    return k.opcode == opcode or opcode in k.fused_opcodes


def _names(ks) -> str:
    ks = sorted(ks)
    return ", ".join(f"`{k}`" for k in ks[:4]) + (f" and {len(ks) - 4} more" if len(ks) > 4 else "")


def _libraries(b: Bundle) -> str:
    # Triton kernels are generated code, counted apart from library calls
    libs = library_calls(b.metrics)
    triton = b.metrics.get("kernels_by_route", {}).get("triton", 0)
    text = ("Library calls: " + ", ".join(f"{n} × {lib}" for lib, n in libs.items()) + "."
            if libs else "No kernel was handed to a library.")
    if triton:
        text += f" {triton} kernel(s) were generated through Triton."
    return text


def _split_k_note(b: Bundle, k_dot: set[str]) -> str:
    """Kernels holding a matmul's ops without a dot: the sum of a matmul split along K."""
    adders = [k for k in b.kernels if k.name in k_dot and not _contains(k, "dot") and _contains(k, "reduce")]
    if not adders:
        return ""
    return (f" A matmul was split along its contraction (split-K): its partial sums are added up by "
            f"{_names(k.name for k in adders)}.")


def _n(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


def _code_lesson(b: Bundle) -> tuple[str, list[Check]]:
    """What the generated code shows of fusion: each emitted kernel's loads and stores through
    its buffers (``analysis.codegen.kernel_code``) against its inputs and results in the HLO, and with fusion
    off (where that compile's code was read too) a store per kernel."""
    names = [k.name for k in b.kernels if generated.loads_stores(b, k.name) is not None]
    if not names:
        return "", []
    post = b.module("hlo_after")
    by_name = {i.name: i for i in post.instructions()} if post is not None else {}
    t = generated.totals(b)
    once, example = [], None
    for n in names:  # the loads and stores only: the page's first run finishes no kernel's code
        loads, stores = generated.loads_stores(b, n)
        f = {"global_loads": loads, "global_stores": stores}
        inst = by_name.get(n)
        inputs = len(set(inst.operands)) if inst is not None else None
        outputs = len(inst.shape.tuple_shapes) if inst is not None and inst.shape.tuple_shapes else 1
        if f["global_loads"] == inputs and f["global_stores"] == outputs:
            once.append(n)
        if inputs is not None and (example is None or inputs > example[1]):
            example = (n, inputs, f)
    text = (f" Its generated code (`xla-explorer code`) shows the fusion at work: the {t['kernels']} kernels XLA "
            f"emitted hold {_n(t['global_loads'], 'load')} and {_n(t['global_stores'], 'store')} through their "
            "buffers")
    if example:
        n, inputs, f = example
        text += (f"; `{n}` reads its {_n(inputs, 'input')} with {_n(f['global_loads'], 'load')} and writes its result "
                 f"with {_n(f['global_stores'], 'store')}")
    text += "."
    if b.platform == "gpu":
        # PTX instructions, each moving a vector for every thread of a block: a tile takes several,
        # so the count is not one per input (tests/compile/test_code_gpu.py checks the tile's elements)
        widths = sorted({f["vector_width"] for n in names if (f := code_of(b, n).facts)["vector_width"]})
        text += (" On the GPU these are PTX instructions, each moving "
                 + (f"up to {widths[-1]} bits " if widths else "one element ")
                 + "for every thread of a block, so a block's tile takes several (docs/code.md, On the GPU).")
        checks = [Check(f"each emitted kernel's code loads and stores global memory ({len(names)} kernels)",
                        all(code_of(b, n).facts["global_loads"] >= 1
                            and code_of(b, n).facts["global_stores"] >= 1 for n in names))]
    else:
        checks = [Check(f"each emitted kernel's code loads each of its inputs once and stores its result once "
                        f"({len(once)} of {len(names)} kernels)", len(once) == len(names))]
    fc = b.fusion_comparison if isinstance(b.fusion_comparison, dict) else {}
    uc, dc = (fc.get("unfused") or {}).get("code"), (fc.get("default") or {}).get("code")
    if uc and dc:
        text += (f" With fusion off the code holds {_n(uc['global_stores'], 'store')} in {_n(uc['kernels'], 'kernel')}, "
                 f"against {dc['global_stores']} fused: every op stores its result, and the next loads it back.")
        checks.append(Check(f"fusion off stores more in its code ({uc['global_stores']} stores) than fusion on "
                            f"({dc['global_stores']})", uc["global_stores"] > dc["global_stores"]))
    return text, checks


def _library_code(b: Bundle, k_dot: set[str]) -> tuple[str, list[Check]]:
    """A matmul that is a library call has no generated code: its code is the library's."""
    lib = [n for n in sorted(k_dot) if generated.library_call(b, n) is not None]
    if not generated.has_code(b) or not lib:
        return "", []
    calls = [generated.library_call(b, n) for n in lib]
    libraries = sorted({c["library"] or "a library" for c in calls})
    t = generated.totals(b)
    text = (f" XLA generated no code for the matmuls: {_names(lib)} call {', '.join(libraries)}, whose code is the "
            f"library's; the {_n(t['kernels'], 'kernel')} XLA did generate hold {_n(t['global_loads'], 'load')} and "
            f"{_n(t['global_stores'], 'store')} through their buffers.")
    return text, [Check(f"the matmuls' {len(lib)} library call(s) have no generated code ({', '.join(libraries)})",
                        all(generated.loads_stores(b, n) is None for n in lib))]


# ----------------------------------------------------------------------------- per model


def _mlp(b: Bundle) -> Lesson:
    adds = pre_ops(b, "add", scope="dense1")
    maxes = pre_ops(b, "maximum", scope="dense1")
    k_add, k_max = kernels_of(b, adds), kernels_of(b, maxes)
    shared = k_add & k_max
    dots = pre_ops(b, "dot")
    k_dot = kernels_of(b, dots)
    by_name = {k.name: k for k in b.kernels}
    next_dot = kernels_of(b, pre_ops(b, "dot", scope="dense2"))
    prologue = [n for n in shared if n in next_dot and _contains(by_name[n], "dot")]
    where = (f"both ended in {_names(shared)}" if shared else
             f"the bias add ended in {_names(k_add) or 'no kernel'} and the ReLU in {_names(k_max) or 'no kernel'}")
    if prologue:
        where += (", the second layer's matmul kernel: it applies them as it loads its input, so the first "
                  "layer's activations are never written to memory")
    lib_text, lib_checks = _library_code(b, k_dot)
    text = (basics(b) + f" The first layer's bias add and ReLU: {where}." + _split_k_note(b, k_dot) + " "
            + _libraries(b) + lib_text + _why_not(b, ("dot",)))
    return Lesson("mlp", text, [
        Check("dense1's bias add and ReLU run in the same kernel" + (f" ({_names(shared)})" if shared else ""), bool(shared)),
        Check(f"fewer kernels than ops ({b.metrics.get('kernels_after')} < {b.metrics.get('compute_ops_before')})",
              b.metrics.get("kernels_after", 0) < b.metrics.get("compute_ops_before", 0)),
        Check(f"the {len(dots)} matmuls landed in {len(k_dot)} kernel(s): {_names(k_dot)}", len(k_dot) >= 1),
    ] + lib_checks)


def _dense_relu(b: Bundle) -> Lesson:
    """Where the matmul's bias add and ReLU went: into the matmul's own kernel (a Triton GEMM
    fusion, a library call's epilogue) or a kernel after it, from this compile's provenance."""
    k_dot = kernels_of(b, pre_ops(b, "dot", scope="dense"))
    k_add = kernels_of(b, pre_ops(b, "add", scope="dense"))
    k_max = kernels_of(b, pre_ops(b, "maximum", scope="dense"))
    by_name = {k.name: k for k in b.kernels}
    one = k_dot == k_add == k_max and len(k_dot) == 1
    if one:
        k = by_name[next(iter(k_dot))]
        how = (f"the library call's {epilogue_text(k)}" if k.epilogue else
               "a Triton GEMM fusion that applies them as it writes the matmul's tiles" if k.route == "triton" else
               f"a {k.library or k.route} kernel that holds all three")
        where = (f"the matmul, its bias add and its ReLU are **one kernel**, {_names(k_dot)}: {how}, so the "
                 "matmul's result is never written to memory before the ReLU")
    else:
        where = (f"the matmul ended in {_names(k_dot) or 'no kernel'}, the bias add in {_names(k_add) or 'no kernel'} "
                 f"and the ReLU in {_names(k_max) or 'no kernel'}")
        epis = [by_name[n] for n in k_dot if n in by_name and by_name[n].epilogue]
        if epis:
            where += f" ({'; '.join(epilogue_text(k) for k in epis)})"
    text = basics(b) + f" Here {where}. " + _libraries(b) + _why_not(b, ("dot",))
    checks = [Check("the bias add and the ReLU run in one kernel" + (f" ({_names(k_add)})" if k_add else ""),
                    bool(k_add) and k_add == k_max)]
    if b.platform == "gpu":  # XLA:GPU hands the matmul its epilogue: one kernel for the layer
        checks.append(Check(f"the matmul runs in that kernel too ({_names(k_dot)})", one))
    return Lesson("dense_relu", text, checks)


def _transformer_block(b: Bundle) -> Lesson:
    dots = pre_ops(b, "dot")
    k_dot = kernels_of(b, dots)
    # generated kernels without a matmul: XLA's emitters, and Triton for normalizations on a GPU
    em = [k for k in b.kernels if k.route in ("emitter", "triton") and not _contains(k, "dot")]
    multi = [k for k in em if k.is_multi_op_fusion]
    n_triton = sum(1 for k in em if k.route == "triton")
    text = (basics(b) + f" The {len(dots)} matmuls (projections, QK^T, PV, MLP) are in {len(k_dot)} kernel(s); "
            f"the norms, softmax, GELU and residual adds became {len(em)} generated kernel(s)"
            + (f" ({n_triton} through Triton)" if n_triton else "") + f", {len(multi)} of them "
            f"fusing several ops." + _split_k_note(b, k_dot) + " " + _libraries(b))
    return Lesson("transformer_block", text, [
        Check(f"every matmul ended in a kernel ({len(k_dot)} kernels hold the {len(dots)} dots)", bool(dots) and bool(k_dot)),
        Check(f"most generated kernels fuse several ops ({len(multi)} of {len(em)})", len(multi) * 2 >= len(em) > 0),
        Check(f"fusion coverage above one half ({b.metrics.get('fusion_coverage', 0):.0%})",
              b.metrics.get("fusion_coverage", 0) > 0.5),
    ])


def _attention(b: Bundle) -> Lesson:
    naive = kernels_of(b, pre_ops(b, scope="naive"))
    api = kernels_of(b, pre_ops(b, scope="fused_api"))
    fmha = [k for k in b.kernels if (k.custom_call_target or "").startswith("__cudnn$fmha")
            or (k.fusion_kind or "") == "__cudnn$fusion"]
    score_bytes = 0
    for k in b.kernels:
        if k.name in naive and "exponential" in k.fused_opcodes:
            score_bytes = max(score_bytes, k.bytes)
    text = (basics(b) + f" The naive attention needs {len(naive)} kernel(s); `jax.nn.dot_product_attention` "
            f"needs {len(api)}." + (f" On this device the API became {len(fmha)} fused-attention library call(s)."
                                    if fmha else " No fused-attention library call here (that needs cuDNN on a GPU).")
            + (f" The kernel computing the softmax of the [heads, seq, seq] scores moves {human_bytes(score_bytes)}."
               if score_bytes else ""))
    checks = [Check(f"both versions compile to kernels (naive {len(naive)}, API {len(api)})", bool(naive) and bool(api))]
    if b.platform == "gpu":
        checks.append(Check("dot_product_attention became a cuDNN fused-attention call", bool(fmha)))
    mem_text, mem_checks = _attention_memory(b, naive, api)
    return Lesson("attention", text + mem_text, checks + mem_checks)


def _dims(shape: str) -> list[int]:
    inside = shape.partition("[")[2].partition("]")[0]
    return [int(d.lstrip("<=")) for d in inside.split(",") if d.strip().lstrip("<=").isdigit()]


def _attention_memory(b: Bundle, naive: set[str], api: set[str]) -> tuple[str, list[Check]]:
    """The score matrix S = QK^T ([heads, seq, seq]) in the buffer assignment: the naive
    version's biggest temporary; in the API's version absent (fused attention) or smaller; and
    the S-sized arrays only the fusion-off compile writes."""
    mem = b.memory
    inputs = b.source.get("inputs") or []
    if not mem or mem.get("error") or not mem.get("values") or not inputs or len(inputs[0].get("shape", [])) != 4:
        return "", []
    batch, seq, heads, _ = inputs[0]["shape"]

    def is_s(shape: str) -> bool:
        d = _dims(shape)
        n = 1
        for x in d:
            n *= x
        return d[-2:] == [seq, seq] and n == batch * heads * seq * seq

    naive_t = biggest_temporaries(mem, 10 ** 6, where=lambda v: v["kernel"] in naive)
    api_t = biggest_temporaries(mem, 10 ** 6, where=lambda v: v["kernel"] in api and v["kernel"] not in naive)
    if not naive_t:
        return "", []
    # of the biggest, the matmul's own output (a broadcast constant can be as big)
    ties = [v for v in naive_t if v["size"] == naive_t[0]["size"]]
    top = next((v for v in ties if b.kernel(v["kernel"]) and _contains(b.kernel(v["kernel"]), "dot")), ties[0])
    s_naive = [v for v in naive_t if is_s(v["shape"])]
    s_api = [v for v in api_t if is_s(v["shape"])]
    shape = top["shape"].split("{")[0]
    text = (f" In memory (XLA's buffer assignment), the naive version's biggest temporary is `{top['name']}`, "
            f"{shape}, {human_bytes(top['size'])}"
            + (f": the [heads, seq, seq] score matrix S; its kernels write {len(s_naive)} S-sized arrays "
               f"({human_bytes(sum(v['size'] for v in s_naive))})." if is_s(top["shape"]) else "."))
    biggest_api = max((v["size"] for v in s_api), default=0)
    if not s_api:
        text += " In `dot_product_attention`'s version no S-sized array is written at all."
    else:
        v = s_api[0]
        text += (f" In `dot_product_attention`'s version S is {'smaller' if biggest_api < top['size'] else 'as big'}: "
                 f"`{v['name']}`, {v['shape'].split('{')[0]}, {human_bytes(v['size'])}"
                 + (" (the XLA formulation runs here, and this XLA computes its bf16 matmuls in f32)."
                    if biggest_api >= top["size"] and v["shape"].startswith("f32") else "."))
    checks = [Check(f"the naive version's biggest temporary is the score matrix S ({shape}, "
                    f"{human_bytes(top['size'])})", is_s(top["shape"]))]
    if b.platform == "gpu":
        checks.append(Check("S is absent or smaller in dot_product_attention's version", biggest_api < top["size"]))
    cmp = (b.fusion_comparison or {}).get("memory")
    if cmp:
        only = [v for v in cmp.get("only_unfused") or [] if is_s(v["shape"]) and "/naive/" in (v.get("op_name") or "")]
        ops = sorted({(v.get("op_name") or "").rsplit("/", 1)[-1] for v in only})
        text += (f" With fusion off the naive version writes {len(only)} more S-sized arrays "
                 f"({human_bytes(sum(v['size'] for v in only))}: {', '.join(ops)}) that are never written with "
                 f"fusion on; peak memory {human_bytes(cmp['unfused'].get('peak_bytes'))} with fusion off, "
                 f"{human_bytes(cmp['default'].get('peak_bytes'))} on.")
        checks.append(Check(f"fusion keeps {len(only)} S-sized intermediates of the naive version out of memory",
                            bool(only)))
    return text, checks


def _why_not(b: Bundle, opcodes: tuple[str, ...]) -> str:
    """XLA's own reason, from this compile's fusion decisions, for keeping an op of one of
    ``opcodes`` out of a consumer's kernel: one sentence, or nothing when XLA logged none."""
    fd = b.fusion_decisions or {}
    pre = b.module("hlo_before")
    opcode = {i.name: i.opcode for i in pre.instructions()} if pre is not None else {}
    # the fusion passes' own refusals first, then the library rewriter's
    records = sorted(fd.get("records", []), key=lambda r: r.get("pass_name") == "dot-library-rewriter")
    for r in records:
        ops = {opcode.get(n) for n in (*r.get("producer_pre", []), *r.get("consumer_pre", []))}
        if r.get("decision") == "not fused" and r.get("reason") and r.get("matched") and ops & set(opcodes):
            gloss = f" ({r['gloss']})" if r.get("gloss") else ""
            return (f" Why an edge stays a kernel boundary, in XLA's words ({r.get('pass_name')}): "
                    f"`{r.get('producer')}` was not fused into `{r.get('consumer')}` because "
                    f"“{r['reason']}”{gloss}.")
    return ""


def _reduction_lesson(name: str, b: Bundle, what: str) -> Lesson:
    reduces = pre_ops(b, "reduce")
    k_red = kernels_of(b, reduces)
    ew_before = len(pre_ops(b)) - len(reduces)
    lone = [k for k in _kernels(b) if k.opcode == "fusion" and len(k.fused_opcodes) == 1
            and k.fused_opcodes[0] in ("exponential", "subtract", "divide", "multiply", "add")]
    code_text, code_checks = _code_lesson(b) if name == "softmax_layernorm" else ("", [])
    text = (basics(b) + f" The {len(reduces)} reductions ({what}) are in {len(k_red)} kernel(s): {_names(k_red)}; "
            f"the {ew_before} other ops were fused around them." + code_text
            + _why_not(b, ("rsqrt", "reduce", "exponential")))
    return Lesson(name, text, [
        Check(f"far fewer kernels than ops ({b.metrics.get('kernels_after')} vs {b.metrics.get('compute_ops_before')})",
              b.metrics.get("kernels_after", 0) * 2 <= b.metrics.get("compute_ops_before", 0)),
        Check("no elementwise op runs as a kernel of its own" + (f" (found {_names(k.name for k in lone)})" if lone else ""),
              not lone),
        Check(f"every reduction is inside a kernel ({len(k_red)} kernels)", bool(k_red) and bool(reduces)),
    ] + code_checks)


def _conv_bn_relu(b: Bundle) -> Lesson:
    conv = kernels_of(b, pre_ops(b, "convolution"))
    relu = kernels_of(b, pre_ops(b, "maximum", scope="relu"))
    bn = kernels_of(b, pre_ops(b, scope="batchnorm"))
    conv_routes = {b.kernel(k).route for k in conv if b.kernel(k)}
    conv_libs = {b.kernel(k).library for k in conv if b.kernel(k) and b.kernel(k).library}
    text = (basics(b) + f" The convolution ran as {_names(conv)} ({', '.join(sorted(conv_libs)) or 'generated code'}); "
            f"batch norm spread over {len(bn)} kernel(s) and the ReLU ended in {_names(relu)}.")
    return Lesson("conv_bn_relu", text, [
        Check("the convolution is a library call" + (f" ({', '.join(sorted(conv_libs))})" if conv_libs else ""),
              conv_routes == {"library"}),
        Check("the ReLU shares a kernel with the batch-norm scale and shift", bool(relu & bn)),
    ])


def _rnn_scan(b: Bundle) -> Lesson:
    loops = [k for k in b.kernels if k.opcode == "while"]
    inside = [k for k in b.kernels if k.context.endswith("body") and k.route != "control"]
    t = (b.timings or {}).get("kernels", {}) if b.timings else {}
    calls = max((t.get(k.name, {}).get("calls", 0) for k in inside), default=0)
    text = (basics(b) + f" `lax.scan` stayed a loop: {len(loops)} `while` op(s) whose body runs "
            f"{len(inside)} kernel(s) per step" + (f", measured {calls} times per call." if calls else "."))
    return Lesson("rnn_scan", text, [
        Check("the scan is a while loop in the optimized module", bool(loops)),
        Check(f"the cell's kernels live in the loop body ({len(inside)})", bool(inside)),
    ])


def _bf16_mixed(b: Bundle) -> Lesson:
    converts = pre_ops(b, "convert")
    k_conv = kernels_of(b, converts)
    alone = [k for k in _kernels(b) if k.opcode == "convert" or
             (k.opcode == "fusion" and set(k.fused_opcodes) <= {"convert", "bitcast", "reshape", "broadcast", "copy"})]
    dot_k = [b.kernel(k) for k in kernels_of(b, pre_ops(b, "dot")) if b.kernel(k)]
    bf16_dots = [k for k in dot_k if k.shape.startswith("bf16")]
    norm_k = [b.kernel(k) for k in kernels_of(b, pre_ops(b, scope="residual_norm")) if b.kernel(k)]
    text = (basics(b) + f" The {len(converts)} casts (`convert`) ended in {len(k_conv)} kernel(s), "
            f"{len(alone)} of which do nothing but cast. ")
    if dot_k and len(bf16_dots) == len(dot_k):
        text += (f"The {len(dot_k)} matmul kernels compute in bf16 natively: their results are half the bytes "
                 "of f32.")
    elif dot_k and not bf16_dots:
        text += (f"The {len(dot_k)} matmul kernels produce f32: this XLA normalizes the bf16 arithmetic to f32 on "
                 f"{b.platform.upper()}, so here the casts cost work instead of saving bytes.")
    else:
        text += f"{len(bf16_dots)} of the {len(dot_k)} matmul kernels produce bf16."
    checks = [
        Check(f"every cast is inside some kernel ({len(k_conv)} kernels hold the {len(converts)} casts)",
              bool(converts) and all(b.provenance and b.provenance.pre_to_kernels.get(c) for c in converts)),
        Check("the residual and normalization run in f32" + (f" ({_names(k.name for k in norm_k)})" if norm_k else ""),
              bool(norm_k) and all(k.shape.startswith("f32") for k in norm_k if k.route != "layout")),
    ]
    return Lesson("bf16_mixed", text, checks)


def _layout_transpose(b: Bundle) -> Lesson:
    absorbed = pre_ops(b, "transpose", scope="absorbed")
    k_abs = kernels_of(b, absorbed)
    dot_k = kernels_of(b, pre_ops(b, "dot"))
    mat = pre_ops(b, "transpose", scope="materialized")
    k_mat = kernels_of(b, mat)
    layout_k = _kernels(b, "layout")
    text = (basics(b) + f" The transpose feeding the matmul ended in {_names(k_abs)} — "
            + ("the matmul's own kernel: it reads the operand in the other order for free." if k_abs <= dot_k else
               "a kernel of its own.")
            + f" The returned transpose ended in {_names(k_mat)}; {len(layout_k)} kernel(s) are pure layout changes.")
    return Lesson("layout_transpose", text, [
        Check("the transpose before the dot launches no kernel of its own (absorbed into the dot)", bool(k_abs) and k_abs <= dot_k),
        Check("the materialized transpose is computed by some kernel", bool(k_mat)),
    ])


def _shape_sweep(b: Bundle) -> Lesson:
    shapes = ", ".join(f"{i['path']}: {i['dtype']}{i['shape']}" for i in b.source.get("inputs", []))
    text = (basics(b) + f" This executable is specialized to exactly these inputs: {shapes}. Another sequence "
            "length is another compile — the Shape sweep page measures how many and how long.")
    return Lesson("shape_sweep", text, [Check("compiled for one concrete shape", bool(b.source.get("inputs")))])


def _train_step(b: Bundle) -> Lesson:
    dots = pre_ops(b, "dot")
    k_dot = kernels_of(b, dots)
    sgd = kernels_of(b, pre_ops(b, scope="sgd"))
    text = (basics(b) + f" The forward and backward passes hold {len(dots)} matmuls (the backward ones "
            f"transposed), in {len(k_dot)} kernel(s); the SGD update of the parameters runs in {len(sgd)} kernel(s).")
    return Lesson("train_step", text, [
        Check(f"the gradient adds matmuls: {len(dots)} dots for a 2-layer MLP", len(dots) > 2),
        Check(f"the update is fused: {len(sgd)} kernel(s) for {len(pre_ops(b, scope='sgd'))} ops",
              0 < len(sgd) < len(pre_ops(b, scope="sgd"))),
    ])


def _decoder_nnx(b: Bundle) -> Lesson:
    norm_ops, norm_k = _layer_counts(b, "attn_norm")
    attn_ops, attn_k = _layer_counts(b, "attn")
    glu_ops, glu_k = _layer_counts(b, "mlp")
    text = (basics(b) + f" The module's {b.source.get('parameters', 0)} parameter arrays (split out with "
            f"`nnx.split`) are the program's inputs. RMSNorm's {norm_ops} ops ran in {norm_k} kernel(s); the "
            f"attention's scaling, causal mask, softmax and head reshapes ({attn_ops} ops outside the four "
            f"projections) in {attn_k}; SwiGLU's `silu(gate) * up` ({glu_ops} ops) in {glu_k}. " + _libraries(b))
    return Lesson("decoder_nnx", text, [
        _params_check(b, 1),
        Check(f"RMSNorm is fused: {norm_ops} ops in {norm_k} kernel(s)", 0 < norm_k < norm_ops),
        Check(f"the mask and softmax are fused: {attn_ops} ops in {attn_k} kernel(s)", 0 < attn_k < attn_ops),
        Check(f"SwiGLU's elementwise ops share one kernel ({glu_ops} ops in {glu_k})", glu_k == 1 < glu_ops),
    ])


def _cnn_linen(b: Bundle) -> Lesson:
    convs = pre_ops(b, "convolution")
    k_conv = kernels_of(b, convs)
    pools = [k for k in b.kernels if _contains(k, "reduce-window")]
    m = b.metrics
    text = (basics(b) + f" The {len(convs)} convolutions ended in {_names(k_conv)}; the pooling runs as "
            f"reduce-window in {_names(k.name for k in pools) or 'no kernel'}. " + _libraries(b))
    return Lesson("cnn_linen", text, [
        Check(f"the whole network runs in few kernels ({m.get('kernels_after')} for {m.get('compute_ops_before')} ops, "
              "under a third)", 0 < m.get("kernels_after", 0) * 3 <= m.get("compute_ops_before", 0)),
        Check(f"every convolution ended in a kernel ({len(k_conv)} kernel(s) hold the {len(convs)})",
              len(convs) == 2 and bool(k_conv)),
        Check(f"the pooling is a reduce-window inside a kernel ({len(pools)} kernel(s))", bool(pools)),
    ])


def _train_equinox(b: Bundle) -> Lesson:
    dots = pre_ops(b, "dot")
    k_dot = kernels_of(b, dots)
    roots = pre_ops(b, "sqrt")  # Adam's sqrt(v) + eps: one per parameter array
    k_adam = kernels_of(b, roots)
    by_name = {k.name: k for k in b.kernels}
    fused = [n for n in k_adam if by_name[n].is_multi_op_fusion]
    text = (basics(b) + f" Forward and backward hold {len(dots)} matmuls (three layers forward, the gradients "
            f"backward) in {len(k_dot)} kernel(s). Adam updates {len(roots)} parameter arrays; each update's "
            f"moments, square root and step run in one kernel per array ({len(k_adam)} kernels).")
    return Lesson("train_equinox", text, [
        Check(f"the backward pass adds matmuls: {len(dots)} dots for a 3-layer MLP", len(dots) > 3),
        Check(f"each parameter's Adam update is one fused kernel ({len(fused)} of {len(k_adam)} for "
              f"{len(roots)} arrays)", len(k_adam) == len(roots) > 0 and len(fused) == len(k_adam)),
    ])


def _keras_mlp(b: Bundle) -> Lesson:
    hid_ops, hid_k = _layer_counts(b, "hidden")
    norm_ops, norm_k = _layer_counts(b, "norm")
    text = (basics(b) + f" Keras's {b.source.get('parameters', 0)} variables are passed in "
            f"(`stateless_call`), so they are inputs of the program. The `hidden` layer's matmul, bias and "
            f"GELU ({hid_ops} ops) ran in {hid_k} kernel(s); the layer norm's {norm_ops} ops in {norm_k}. "
            + _libraries(b))
    return Lesson("keras_mlp", text, [
        _params_check(b, 1),
        Check(f"the dense layer's bias add and GELU ride with its matmul ({hid_ops} ops in {hid_k} kernels)",
              0 < hid_k <= 2 < hid_ops),
        Check(f"the layer norm is fused ({norm_ops} ops in {norm_k} kernels)", 0 < norm_k < norm_ops),
    ])


LESSONS = {
    "mlp": _mlp, "dense_relu": _dense_relu, "transformer_block": _transformer_block, "attention": _attention,
    "layernorm": lambda b: _reduction_lesson("layernorm", b, "mean and variance"),
    "softmax": lambda b: _reduction_lesson("softmax", b, "max and sum"),
    "softmax_layernorm": lambda b: _reduction_lesson("softmax_layernorm", b, "max, sum, mean, variance"),
    "conv_bn_relu": _conv_bn_relu, "rnn_scan": _rnn_scan, "bf16_mixed": _bf16_mixed,
    "layout_transpose": _layout_transpose, "shape_sweep": _shape_sweep, "train_step": _train_step,
    "decoder_nnx": _decoder_nnx, "cnn_linen": _cnn_linen, "train_equinox": _train_equinox, "keras_mlp": _keras_mlp,
}
LESSONS.update(DEVICE_LESSONS)  # the sharded models' (sample_models/lessons_devices.py)
LESSONS.update(TORCH_LESSONS)  # the PyTorch models' (sample_models/lessons_torch.py)


def lesson(b: Bundle) -> Lesson | None:
    """The lesson for a gallery model's bundle, from its own numbers; None for other inputs."""
    fn = LESSONS.get(b.source.get("name", "")) if b.source.get("kind") == "gallery" else None
    if fn is None or b.module("hlo_after") is None:
        return None
    return fn(b)
