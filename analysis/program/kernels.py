"""Kernels of an optimized module and their route (the legend every view shares).

Each kernel-launching instruction of the optimized module gets one route:

- ``library``: an opaque call-out to a hand-tuned kernel (cuBLAS, cuDNN, YNNPACK, Eigen, ...)
- ``triton``: code generated through Triton
- ``emitter``: XLA's own generated kernels (loop/input/output fusions, unfused ops)
- ``layout``: pure data movement (copy, transpose, fusions of nothing but those)
- ``collective``: communication
- ``control``: control flow that runs other kernels (while, conditional, call, async wrappers)

Instructions that launch nothing (parameter, constant, bitcast, tuple, get-tuple-element, ...)
are skipped, and so are the instructions inside a fusion: they are part of its kernel.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from analysis.hlo import Computation, Instruction, Module, async_sugar
from analysis.errors import ExplorerError

ROUTES = ("library", "triton", "emitter", "layout", "collective", "control")
ROUTE_LABELS = {
    "library": "Library call", "triton": "Triton", "emitter": "XLA emitter",
    "layout": "Layout / copy", "collective": "Collective", "control": "Control flow",
}
# One colour per route, shared by the graph, the charts and the report (colour-blind safe).
ROUTE_COLORS = {
    "library": "#4477AA", "triton": "#AA3377", "emitter": "#228833",
    "layout": "#CCBB44", "collective": "#EE6677", "control": "#BBBBBB",
}

NO_KERNEL = frozenset({
    "parameter", "constant", "bitcast", "get-tuple-element", "tuple", "after-all",
    "add-dependency", "opt-barrier", "partition-id", "replica-id", "domain",
    "async-done", "async-update", "copy-done", "all-reduce-done", "all-gather-done",
    "collective-permute-done", "send-done", "recv-done", "get-dimension-size", "set-dimension-size",
})
COLLECTIVES = frozenset({
    "all-reduce", "all-gather", "reduce-scatter", "all-to-all", "ragged-all-to-all",
    "collective-permute", "collective-broadcast", "all-reduce-start", "all-gather-start",
    "collective-permute-start", "send", "recv",
})
CONTROL = frozenset({"while", "conditional", "call", "async-start"})
LAYOUT_OPS = frozenset({"copy", "transpose", "copy-start"})
# Ops that move or re-index data without arithmetic; a fusion of only these is a layout kernel.
DATA_MOVEMENT = frozenset({"copy", "transpose", "bitcast", "reshape", "parameter", "tuple",
                           "get-tuple-element", "slice", "concatenate", "pad", "reverse"})
ELEMENTWISE_FREE = frozenset({"parameter", "constant", "bitcast", "get-tuple-element", "tuple",
                              "reshape", "broadcast", "transpose", "copy", "slice", "concatenate",
                              "pad", "iota", "dynamic-slice", "dynamic-update-slice", "gather",
                              "reverse", "after-all"})

# custom-call target prefix -> library name
CUSTOM_CALL_LIBRARIES = (
    ("__cublas$", "cuBLAS"), ("__cudnn$", "cuDNN"), ("__cub$", "CUB"), ("cusolver", "cuSOLVER"),
    ("__cusolver", "cuSOLVER"), ("cu_threefry", "XLA GPU"), ("__gpu$", "XLA GPU"), ("lapack_", "LAPACK"),
    ("__onednn$", "oneDNN"), ("__xnn", "XNNPACK"), ("__ynn", "YNNPACK"), ("ducc_", "DUCC"),
    ("xla_python", "Python callback"), ("xla_ffi_python", "Python callback"), ("Sharding", "SPMD"),
    ("tpu_custom_call", "Mosaic"), ("mosaic_gpu", "Mosaic GPU"), ("__triton", "Triton"),
)
FUSION_LIBRARIES = {
    "__ynn_fusion": "YNNPACK", "__xnn_fusion": "XNNPACK", "__cudnn$fusion": "cuDNN",
    "__onednn_fusion": "oneDNN",
}
# ``__custom_fusion`` is XLA GPU's hook for hand-written kernels; which one is named in
# ``custom_fusion_config.name``. "dynamic_slice_fusion" is not a library kernel: it wraps a slice
# copy or a library call whose operand addresses follow a loop counter (no copy of the slice).
DYNAMIC_SLICE_FUSIONS = ("dynamic_slice_fusion", "address_computation", "dynamic_address_computation")
_SLICING = frozenset({"dynamic-slice", "dynamic-update-slice", "constant"})
TRITON_KINDS = ("__triton_gemm", "__triton", "__triton_nested_gemm_fusion", "__triton_fusion",
                "__triton_scaled_dot_fusion", "__triton_collective_fusion")


@dataclass(frozen=True)
class Kernel:
    """One kernel-launching instruction of the optimized module."""

    name: str
    opcode: str
    route: str
    computation: str
    shape: str
    library: str | None = None
    fusion_kind: str | None = None
    custom_call_target: str | None = None
    triton_config: dict | None = None
    bytes: int = 0
    flops: int = 0
    op_names: tuple[str, ...] = ()
    fused_ops: tuple[str, ...] = ()  # names of the instructions inside (fusions), in order
    fused_opcodes: tuple[str, ...] = ()
    source_lines: tuple[tuple[str, int], ...] = ()  # (file, line) of what it contains
    context: str = ""  # "" for the entry; else e.g. "while.3 body" for work inside control flow
    operands: tuple[str, ...] = ()
    # what a library call does after its main op, in words (("bias", "ReLU")): the ops XLA handed
    # to it with the matmul or convolution (``library_epilogue``); () for everything else
    epilogue: tuple[str, ...] = ()

    @property
    def is_multi_op_fusion(self) -> bool:
        return sum(1 for o in self.fused_opcodes if o not in ("parameter",)) >= 2

    @property
    def fuses_ops(self) -> bool:
        """A kernel that does several ops of the program in one launch: a fusion of two or more
        instructions, or a library call with an epilogue (cuBLASLt's bias + ReLU, cuDNN's bias
        + activation, oneDNN's post-ops): what fusion coverage counts (docs/numbers.md)."""
        return self.is_multi_op_fusion or bool(self.epilogue)

    def to_dict(self) -> dict:
        # by hand, not dataclasses.asdict: asdict deep-copies every tuple and was most of
        # Bundle.to_json's time for a few thousand kernels
        d = dict(self.__dict__)
        for k in ("op_names", "fused_ops", "fused_opcodes", "operands", "epilogue"):
            d[k] = list(d[k])
        d["source_lines"] = [list(x) for x in d["source_lines"]]
        if d["triton_config"] is not None:
            d["triton_config"] = dict(d["triton_config"])
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "Kernel":
        d = dict(d)
        for k in ("op_names", "fused_ops", "fused_opcodes", "operands", "epilogue"):
            d[k] = tuple(d.get(k, ()))
        d["source_lines"] = tuple((str(f), int(n)) for f, n in d.get("source_lines", ()))
        return cls(**{k: v for k, v in d.items() if k in cls.__dataclass_fields__})


# ----------------------------------------------------------------------------- FLOPs and bytes


def _prod(xs) -> int:
    n = 1
    for x in xs:
        n *= x
    return n


def _ints(text: str | None) -> list[int]:
    if not text:
        return []
    return [int(t) for t in text.strip("{} ").split(",") if t.strip().lstrip("-").isdigit()]


def dot_flops(inst: Instruction, lhs: Instruction | None) -> int:
    out = inst.shape.leaves()[0]
    contracting = _ints(inst.attributes.get("lhs_contracting_dims"))
    k = _prod(lhs.shape.dimensions[d] for d in contracting) if lhs is not None and contracting else 1
    return 2 * out.num_elements * k


def conv_flops(inst: Instruction, rhs: Instruction | None) -> int:
    out = inst.shape.leaves()[0]
    if rhs is None:
        return 2 * out.num_elements
    # Every output element is a dot over (kernel spatial x input features per group).
    labels = inst.attributes.get("dim_labels", "")
    kernel_dims = rhs.shape.dimensions
    k = _prod(kernel_dims)
    if "_" in labels and "->" in labels:
        kspec = labels.split("_")[1].split("->")[0]
        if "o" in kspec and len(kspec) == len(kernel_dims):
            k //= max(kernel_dims[kspec.index("o")], 1)
    return 2 * out.num_elements * k


def instruction_flops(inst: Instruction, comp: Computation) -> int:
    """FLOPs from shapes: dot/convolution formulas, one per output element for arithmetic,
    one per input element for reductions; data movement counts zero."""
    op = inst.opcode
    ops = [comp.by_name.get(o) for o in inst.operands]
    if op == "dot":
        return dot_flops(inst, ops[0] if ops else None)
    if op == "convolution":
        return conv_flops(inst, ops[1] if len(ops) > 1 else None)
    if op in ("reduce", "reduce-window"):
        return sum(o.shape.num_elements for o in ops[: max(1, len(ops) // 2)] if o is not None)
    if op in ELEMENTWISE_FREE or op in NO_KERNEL or op in CONTROL or op in COLLECTIVES:
        return 0
    if op in ("fusion", "custom-call"):
        return 0  # handled by the caller with the fused computation / backend config
    return sum(s.num_elements for s in inst.shape.leaves())


def _custom_call_flops(inst: Instruction, comp: Computation) -> int:
    target = inst.custom_call_target or ""
    ops = [comp.by_name.get(o) for o in inst.operands]
    out = inst.shape.leaves()[0]
    bc = inst.backend_config if isinstance(inst.backend_config, dict) else {}
    if "gemm" in target.lower() or "matmul" in target.lower():
        gemm = bc.get("gemm_backend_config", bc)
        dims = gemm.get("dot_dimension_numbers", {}) if isinstance(gemm, dict) else {}
        contracting = [int(x) for x in dims.get("lhs_contracting_dimensions", [])]
        lhs = ops[0] if ops else None
        k = _prod(lhs.shape.dimensions[d] for d in contracting) if lhs is not None and contracting else 1
        return 2 * out.num_elements * k
    if target.startswith("__cudnn$fmha") and "Backward" not in target:
        return _fmha_flops(inst, ops, bc.get("cudnn_fmha_backend_config") or {})
    if "conv" in target.lower():
        return conv_flops(inst, ops[1] if len(ops) > 1 else None)
    return 0


def _fmha_flops(inst: Instruction, ops: list, cfg: dict) -> int:
    """Fused attention forward: the two matmuls, Q.K^T (contracting the head dim) and P.V
    (contracting the key sequence); the softmax between them is not counted."""
    if len(ops) < 2 or ops[0] is None or ops[1] is None or not isinstance(cfg, dict):
        return 0
    qd, kd = ops[0].shape.dimensions, ops[1].shape.dimensions
    dn = cfg.get("bmm1_dot_dimension_numbers") or {}
    q_batch = [int(x) for x in dn.get("lhs_batch_dimensions", range(len(qd) - 2))]
    q_contr = [int(x) for x in dn.get("lhs_contracting_dimensions", [len(qd) - 1])]
    k_batch = [int(x) for x in dn.get("rhs_batch_dimensions", range(len(kd) - 2))]
    k_contr = [int(x) for x in dn.get("rhs_contracting_dimensions", [len(kd) - 1])]
    batch = _prod(qd[d] for d in q_batch)
    q_free = _prod(n for d, n in enumerate(qd) if d not in q_batch and d not in q_contr)
    k_free = _prod(n for d, n in enumerate(kd) if d not in k_batch and d not in k_contr)
    head = _prod(qd[d] for d in q_contr)
    out = inst.shape.leaves()[0]
    return 2 * batch * q_free * k_free * head + 2 * out.num_elements * k_free


def scratch_bytes(inst: Instruction) -> int:
    """Size of the scratch workspace a cuBLAS/cuDNN custom call returns as the last element of
    its result tuple (``(f32[..], s8[4194304])``): memory the library may use, not data it
    must read or write."""
    if inst.opcode != "custom-call":
        return 0
    if not (inst.custom_call_target or "").startswith(("__cublas", "__cudnn")):
        return 0
    shape = inst.shape
    if not shape.is_tuple or len(shape.tuple_shapes) < 2:
        return 0
    last = shape.tuple_shapes[-1]
    if last.is_tuple or last.element_type not in ("s8", "u8") or last.rank != 1:
        return 0
    return last.byte_size


def kernel_bytes(inst: Instruction, comp: Computation) -> int:
    """Bytes the kernel must move: each distinct operand read once plus the outputs written
    (a library call's scratch workspace is not counted)."""
    total = 0
    seen = set()
    for o in inst.operands:
        if o in seen:
            continue
        seen.add(o)
        src = comp.by_name.get(o)
        if src is not None:
            total += src.shape.byte_size
    return total + inst.shape.byte_size - scratch_bytes(inst)


# ----------------------------------------------------------------------------- classification


def detect_platform(module: Module) -> str:
    """'gpu' if the optimized module shows XLA:GPU's vocabulary, else 'cpu'."""
    for inst in module.instructions():
        if inst.opcode == "custom-call":
            t = inst.custom_call_target or ""
            if t.startswith(("__cublas", "__cudnn", "__cub$", "__gpu$", "cusolver")):
                return "gpu"
        elif inst.opcode == "fusion":
            fk = inst.fusion_kind or ""
            if fk.startswith("__triton") or fk == "__cudnn$fusion" or fk == "kInput":
                return "gpu"
            bc = inst.backend_config
            if isinstance(bc, dict) and "fusion_backend_config" in bc:
                return "gpu"
    return "cpu"


def custom_call_library(target: str) -> str:
    for prefix, lib in CUSTOM_CALL_LIBRARIES:
        if target.startswith(prefix):
            return lib
    return target or "custom call"


def triton_config(inst: Instruction) -> dict | None:
    bc = inst.backend_config
    if not isinstance(bc, dict):
        return None
    fbc = bc.get("fusion_backend_config")
    if not isinstance(fbc, dict):
        return None
    cfg = {}
    if isinstance(fbc.get("triton_gemm_config"), dict):
        cfg.update({k: _maybe_int(v) for k, v in fbc["triton_gemm_config"].items()})
    blfc = fbc.get("block_level_fusion_config")
    if isinstance(blfc, dict):
        for k, v in blfc.items():
            cfg[k] = _maybe_int(v)
    return cfg or None


def tile_text(cfg: dict | None, full: bool = False) -> str:
    """A Triton configuration in words: ``tile 1×16×8 · 2 warps`` (the output tile of a generic
    Triton fusion, ``output_tiles``) or ``tile 64×128×32 (m×n×k) · split-K 4 · 4 warps`` (a GEMM
    config, ``block_m/n/k``). ``full`` adds stages and CTAs."""
    if not cfg:
        return ""
    parts = []
    if any(t in cfg for t in ("block_m", "block_n", "block_k")):
        parts.append("tile " + "×".join(str(cfg.get(t, "?")) for t in ("block_m", "block_n", "block_k")) + " (m×n×k)")
        if (cfg.get("split_k") or 1) != 1:
            parts.append(f"split-K {cfg['split_k']}")
    tiles = cfg.get("output_tiles")
    if isinstance(tiles, list) and tiles:
        sizes = ["×".join(str(s) for s in t.get("sizes", [])) for t in tiles if isinstance(t, dict)]
        sizes = [s for s in sizes if s]
        if sizes:
            parts.append(("tile " if len(sizes) == 1 else "tiles ") + ", ".join(sizes))
    if cfg.get("num_warps"):
        parts.append(f"{cfg['num_warps']} warp" + ("s" if cfg["num_warps"] != 1 else ""))
    if full:
        if cfg.get("num_stages"):
            parts.append(f"{cfg['num_stages']} stage" + ("s" if cfg["num_stages"] != 1 else ""))
        if (cfg.get("num_ctas") or 1) != 1:
            parts.append(f"{cfg['num_ctas']} CTAs")
    return " · ".join(parts)


def _maybe_int(v):
    """int64 fields of a backend config print as strings ("64"); read them as ints, also
    inside lists and objects (``output_tiles: [{"sizes": ["1", "128"]}]``)."""
    if isinstance(v, str) and v.lstrip("-").isdigit():
        return int(v)
    if isinstance(v, list):
        return [_maybe_int(x) for x in v]
    if isinstance(v, dict):
        return {k: _maybe_int(x) for k, x in v.items()}
    return v


# What a library call does after its matmul or convolution, from its backend config: cuBLAS(Lt)'s
# ``gemm_backend_config.epilogue``, cuDNN's ``cudnn_conv_backend_config.activation_mode``,
# oneDNN's ``fusions.ops`` (its post-ops). Each value in words, in the order the call applies them.
GEMM_EPILOGUES = {
    "DEFAULT": (), "BIAS": ("bias",), "RELU": ("ReLU",), "BIAS_RELU": ("bias", "ReLU"),
    "GELU": ("GELU",), "GELU_AUX": ("GELU",), "BIAS_GELU": ("bias", "GELU"), "BIAS_GELU_AUX": ("bias", "GELU"),
    "SILU": ("SiLU",), "BIAS_SILU": ("bias", "SiLU"),
}
CUDNN_ACTIVATIONS = {
    "kNone": None, "kRelu": "ReLU", "kRelu6": "ReLU6", "kReluX": "clipped ReLU", "kSigmoid": "sigmoid",
    "kTanh": "tanh", "kElu": "ELU", "kLeakyRelu": "leaky ReLU", "kGeluExact": "GELU", "kBandPass": "band-pass",
}
ONEDNN_POST_OPS = {
    "BIAS": "bias", "RELU": "ReLU", "TANH": "tanh", "GELU_ERF": "GELU", "GELU_TANH": "GELU (tanh)",
    "BINARY_ADD": "add", "LINEAR": "scale", "ELU": "ELU", "RELU6": "ReLU6", "SIGMOID": "sigmoid",
    "SWISH": "SiLU", "SUM": "residual add",
}


def _number(v, default: float) -> float:
    try:
        return float(v)
    except (TypeError, ValueError):
        return default


def library_epilogue(inst: Instruction) -> tuple[str, ...]:
    """The ops a library custom call applies to its matmul's or convolution's result, in words
    and in order: a cuBLAS(Lt) gemm's ``alpha`` other than 1 (``scale``), its ``epilogue``
    (``BIAS_RELU`` -> bias, ReLU) and a ``beta`` other than 0 (it adds its last operand: a
    residual add); a cuDNN convolution's result scale, bias (``convBiasActivationForward``), side
    input (residual add) and activation; a oneDNN call's post-ops. () where it applies none."""
    if inst.opcode != "custom-call":
        return ()
    target = inst.custom_call_target or ""
    bc = inst.backend_config if isinstance(inst.backend_config, dict) else {}
    out: list[str] = []
    if target.startswith("__cublas$") and ("gemm" in target or "matmul" in target):
        g = bc.get("gemm_backend_config")
        if not isinstance(g, dict):
            return ()
        if _number(g.get("alpha_real", 1), 1.0) not in (0.0, 1.0):
            out.append("scale")
        out.extend(GEMM_EPILOGUES.get(str(g.get("epilogue", "DEFAULT")), (str(g.get("epilogue")).lower(),)))
        if _number(g.get("beta", 0), 0.0) != 0.0:
            out.append("residual add")
    elif target.startswith("__cudnn$conv"):
        c = bc.get("cudnn_conv_backend_config")
        c = c if isinstance(c, dict) else {}
        if _number(c.get("conv_result_scale", 1), 1.0) != 1.0:
            out.append("scale")
        if "BiasActivation" in target:
            out.append("bias")
        if _number(c.get("side_input_scale", 0), 0.0) != 0.0:
            out.append("residual add")
        act = c.get("activation_mode")
        if act is not None:
            word = CUDNN_ACTIVATIONS.get(str(act), str(act))
            if word:
                out.append(word)
    elif target.startswith("__onednn$"):
        for key, cfg in bc.items():
            fusions = cfg.get("fusions") if isinstance(cfg, dict) and key.startswith("onednn") else None
            ops = fusions.get("ops") if isinstance(fusions, dict) else None
            if isinstance(ops, list):
                out.extend(ONEDNN_POST_OPS.get(str(o), str(o).lower()) for o in ops)
    return tuple(out)


def fusion_epilogue(fused: list[Instruction]) -> tuple[str, ...]:
    """A library fusion's epilogue (YNNPACK's, oneDNN's, cuDNN's): the arithmetic it holds
    besides its matmul or convolution, by opcode in order (``add``, ``maximum``); () for a
    fusion with no matmul or convolution, or nothing else."""
    if not any(i.opcode in ("dot", "convolution") for i in fused):
        return ()
    rest = (i.opcode for i in fused if i.opcode not in ("dot", "convolution")
            and i.opcode not in ELEMENTWISE_FREE and i.opcode not in NO_KERNEL)
    return tuple(dict.fromkeys(rest))


LIBRARY_OPS = {"__cublas$lt$matmul$f8": "cuBLASLt fp8 matmul", "__cublas$lt$matmul": "cuBLASLt matmul",
               "__cublas$gemm": "cuBLAS gemm", "__cudnn$conv": "cuDNN convolution",
               "__onednn$matmul": "oneDNN matmul", "__onednn$conv": "oneDNN convolution"}


def epilogue_text(k: Kernel) -> str:
    """A library call's epilogue in words: ``cuBLASLt matmul + bias + ReLU epilogue``; for a
    library's fusion (YNNPACK, oneDNN), which holds whatever XLA handed it rather than a fixed
    epilogue, what it fused: ``YNNPACK matmul fused with add + maximum``; "" for neither."""
    if not k.epilogue:
        return ""
    target = k.custom_call_target or ""
    what = next((w for prefix, w in LIBRARY_OPS.items() if target.startswith(prefix)), None)
    if what is None and k.opcode == "fusion":  # a library fusion: what it was made around
        what = f"{k.library or 'library'} " + ("convolution" if "convolution" in k.fused_opcodes else "matmul")
        return f"{what} fused with {' + '.join(k.epilogue)}"
    what = what or f"{k.library or target} call"
    return f"{what} + {' + '.join(k.epilogue)} epilogue"


def launches_nothing(inst: Instruction) -> bool:
    """True for instructions that launch no kernel: parameters, tuples, ..., and the second half
    of an async pair (``X-done`` / ``X-update``: the pair is one kernel, counted at its start)."""
    if inst.opcode in NO_KERNEL:
        return True
    sugar = async_sugar(inst.opcode)
    return sugar is not None and sugar[1] != "start"


def _async_view(inst: Instruction) -> Instruction:
    """``X-start`` sugar seen as the ``X`` it runs (same operands and attributes: the custom-call
    target, the fusion's kind and computation, ...); any other instruction as itself."""
    sugar = async_sugar(inst.opcode)
    if sugar is None or sugar[1] != "start":
        return inst
    return replace(inst, opcode=sugar[0])


def classify(inst: Instruction, platform: str, module: Module) -> tuple[str, str | None]:
    """(route, library) for one kernel-launching instruction. An ``X-start`` (async sugar for
    any ``X``: ``reduce-scatter-start``, ``custom-call-start``, ``fusion-start``, ...) gets the
    route of the ``X`` it runs."""
    inst = _async_view(inst)
    op = inst.opcode
    if op == "fusion":
        kind = inst.fusion_kind or ""
        if kind in FUSION_LIBRARIES:
            return "library", FUSION_LIBRARIES[kind]
        if kind == "__custom_fusion":
            return _custom_fusion_route(inst, module)
        if kind.startswith("__triton"):
            return "triton", "Triton"
        if kind == "__dynamic_memcpy":
            return "layout", None
        if kind.startswith("__onednn"):
            return "library", "oneDNN"
        fused = _fused_opcodes(inst, module)
        if fused and all(o in DATA_MOVEMENT for o in fused) and any(o in ("copy", "transpose") for o in fused):
            return "layout", None
        return "emitter", None
    if op == "custom-call":
        target = inst.custom_call_target or ""
        if target.startswith("__triton"):
            return "triton", "Triton"
        return "library", custom_call_library(target)
    if op in COLLECTIVES:
        return "collective", None
    if op in CONTROL:
        return "control", None
    if op in LAYOUT_OPS:
        return "layout", None
    if op in ("dot", "convolution"):
        return ("library", "Eigen") if platform == "cpu" else ("emitter", None)
    if op == "fft":
        return "library", ("cuFFT" if platform == "gpu" else "DUCC")
    return "emitter", None


def _custom_fusion_route(inst: Instruction, module: Module) -> tuple[str, str | None]:
    fbc = (inst.backend_config or {}).get("fusion_backend_config") or {}
    name = str((fbc.get("custom_fusion_config") or {}).get("name") or "")
    if name in DYNAMIC_SLICE_FUSIONS:
        inner = _fused_instructions(inst, module)
        calls = [i for i in inner if i.opcode == "custom-call"]
        if calls:  # e.g. a cuBLAS gemm reading a loop-indexed slice in place
            return "library", custom_call_library(calls[0].custom_call_target or "")
        ops = [i.opcode for i in inner if i.opcode != "parameter"]
        if ops and all(o in DATA_MOVEMENT or o in _SLICING for o in ops):
            return "layout", None
        return "emitter", None
    if name.startswith("cutlass") or not name:
        return "library", "CUTLASS"
    return "library", name


def call_cycle(module: Module, cname: str):
    """The one-line error for a computation that calls itself (directly or through others):
    HLO has no recursion, and following the calls would never end."""
    return ExplorerError("parse", f"computation {cname} calls itself (directly or through other computations); "
                                  "HLO has no recursion")


def _fused_instructions(inst: Instruction, module: Module) -> list[Instruction]:
    """Instructions inside a fusion, nested fusions expanded (they are part of this kernel).
    Iterative, with the nesting bounded by the number of computations (deeper = a cycle)."""
    out: list[Instruction] = []
    most = len(module.computations) + 1
    # A stack of iterators over instructions, so nested fusions come out in the same order as
    # when each nested fusion is expanded in place.
    stack = [iter([c for c in inst.called_computations])]
    kinds = ["names"]
    while stack:
        nxt = next(stack[-1], None)
        if nxt is None:
            stack.pop()
            kinds.pop()
            continue
        if kinds[-1] == "names":
            comp = module.by_name.get(nxt)
            if comp is None:
                continue
            if len(stack) > 2 * most:
                raise call_cycle(module, nxt)
            stack.append(iter(comp.instructions))
            kinds.append("insts")
        elif nxt.opcode == "fusion":
            stack.append(iter(list(nxt.called_computations)))
            kinds.append("names")
        else:
            out.append(nxt)
    return out


def _fused_opcodes(inst: Instruction, module: Module) -> list[str]:
    return [i.opcode for i in _fused_instructions(inst, module) if i.opcode != "parameter"]


def _fusion_flops(inst: Instruction, module: Module) -> int:
    total = 0
    for sub in _fused_instructions(inst, module):
        if sub.opcode == "custom-call":
            total += _custom_call_flops(sub, sub.computation)
        else:
            total += instruction_flops(sub, sub.computation)
    return total


def _estimate(fn, *args) -> int:
    """FLOPs from shapes, or 0 where the text is inconsistent (a hand-edited or damaged HLO can
    name a contracting dimension the operand does not have; XLA's own output never does)."""
    try:
        return fn(*args)
    except (IndexError, KeyError, ValueError, TypeError, AttributeError):
        return 0


def _source_lines(insts) -> tuple[tuple[str, int], ...]:
    seen: dict[tuple[str, int], None] = {}
    for i in insts:
        src = i.metadata.source
        if src is not None and src.line is not None:
            seen[(src.file or "", src.line)] = None
    return tuple(seen)


def kernels(module: Module, platform: str | None = None) -> list[Kernel]:
    """Every kernel-launching instruction, in execution order, entry first and the work of
    control flow (while bodies, branches, async computations) after its launcher."""
    platform = platform or detect_platform(module)
    out: list[Kernel] = []
    visited: set[str] = set()

    def walk(comp: Computation, context: str) -> None:
        # Iterative (a module's text decides the depth): each control-flow op's computations
        # are walked right after it, as a recursive walk would, from an explicit stack.
        todo = [(None, comp, context)]  # (None, comp, ctx): not entered yet
        while todo:
            it, comp, context = todo[-1]
            if it is None:
                todo.pop()
                if comp.name not in visited:
                    visited.add(comp.name)
                    todo.append((iter(comp.instructions), comp, context))
                continue
            inst = next(it, None)
            if inst is None:
                todo.pop()
                continue
            subs = one(inst, comp, context)
            for sub, ctx in reversed(subs):
                todo.append((None, sub, ctx))

    def one(orig: Instruction, comp: Computation, context: str) -> list:
        if launches_nothing(orig):
            return []
        inst = _async_view(orig)  # an X-start is one kernel: the X it runs, with X's route
        route, library = classify(inst, platform, module)
        fused: list[Instruction] = []
        flops = 0
        if inst.opcode == "fusion":
            fused = _fused_instructions(inst, module)
            flops = _estimate(_fusion_flops, inst, module)
        elif inst.opcode == "custom-call":
            flops = _estimate(_custom_call_flops, inst, comp)
        else:
            flops = _estimate(instruction_flops, inst, comp)
        contained = [inst] + fused
        op_names = tuple(dict.fromkeys(i.metadata.op_name for i in contained if i.metadata.op_name))
        out.append(Kernel(
            name=inst.name, opcode=orig.opcode, route=route, computation=comp.name,
            shape=inst.shape_text, library=library, fusion_kind=inst.fusion_kind,
            custom_call_target=inst.custom_call_target,
            triton_config=triton_config(inst) if route == "triton" else None,
            bytes=kernel_bytes(inst, comp) if route != "control" else 0, flops=flops,
            op_names=op_names,
            fused_ops=tuple(i.name for i in fused if i.opcode != "parameter"),
            fused_opcodes=tuple(i.opcode for i in fused if i.opcode != "parameter"),
            source_lines=_source_lines(contained), context=context,
            operands=tuple(inst.operands),
            epilogue=(() if route != "library" else fusion_epilogue(fused) if inst.opcode == "fusion"
                      else library_epilogue(inst)),
        ))
        subs = []
        if route == "control":
            roles = _call_roles(inst)
            for cname, role in roles:
                sub = module.by_name.get(cname)
                if sub is not None:
                    subs.append((sub, f"{inst.name} {role}"))
        return subs

    walk(module.entry, "")
    return out


def launching(kernels: list[Kernel]) -> list[Kernel]:
    """The kernels that launch work of their own: all but control flow (a ``while`` or
    ``conditional`` runs other kernels; its own time includes theirs). Every count of
    "kernels" in the product is this list's length."""
    return [k for k in kernels if k.route != "control"]


def _call_roles(inst: Instruction) -> list[tuple[str, str]]:
    out = []
    for key in ("condition", "body", "calls", "to_apply", "true_computation", "false_computation"):
        v = inst.attributes.get(key)
        if v:
            out.append((v.strip().lstrip("%"), {"calls": "calls", "to_apply": "calls"}.get(key, key)))
    bc = inst.attributes.get("branch_computations")
    if bc:
        for n, c in enumerate(p.strip().lstrip("%") for p in bc.strip("{}").split(",") if p.strip()):
            out.append((c, f"branch {n}"))
    return out


def kernel_instruction_map(module: Module) -> dict[str, list[str]]:
    """Kernel name -> names of every instruction it contains (itself and fused ones)."""
    out: dict[str, list[str]] = {}
    for k in kernels(module):
        out[k.name] = [k.name, *k.fused_ops]
    return out
