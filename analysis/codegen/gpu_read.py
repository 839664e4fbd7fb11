"""The code XLA:GPU generated for a compile, read from the files of its dump into the bundle's
``code`` field (issue #36; docs/code.md, "On the GPU"; the facts' definitions: ``analysis.codegen.ptx``).
Pure Python: the same reader for our compile's private dump folder
(``analysis.compile.code_gpu``, which also runs ptxas and nvdisasm) and for a user's zipped dump
(``analysis.inputs.dump``), which give it their file names and a way to read one.

What XLA:GPU writes with ``xla_dump_to`` (checked on jax 0.10.2 compiling for a described H200,
no GPU): the module's kernels split into LLVM modules for compiling in parallel, each as
``module_N.NAME.K.ir-no-opt.ll`` (before LLVM's optimization), ``...K+1.ir-with-opt.ll`` and
``...K+1.ptx``, each kernel a ``define ptx_kernel`` / ``.entry`` named after its HLO
instruction; ``...thunk_sequence.txt`` (each launch: its thunk id, the kernel's name, grid, block
and dynamic shared memory) and ``...thunk_metadata.txt`` (each thunk id's HLO instruction, its
``profile_annotation``). A kernel is matched to its HLO instruction through the thunk id (so an
identical fusion that reuses another's kernel gets that kernel's code), else by XLA's name for
it (the instruction's name with ``.`` and ``-`` as ``_``). With ``xla_dump_emitter_re`` matching
``triton-fusion`` each Triton fusion also writes ``...FUSION.ttir.txt``; with ``triton-to-llvm``
too, ``NAME.ENTRY.triton-to-llvm.txt`` logs the IR before every Triton pass (megabytes a fusion,
so not asked for by default), from which the TritonGPU IR (``ttgir``, as it is handed to the
LLVM conversion) is taken.
"""

from __future__ import annotations

from analysis.codegen import kernel_code
from analysis import linear_re
from analysis.codegen.ptx import ptx_facts, ptxas_facts, split_ptx
from analysis.codegen.cpu_read import MAX_IR_BYTES
from analysis.errors import ExplorerError

MAX_LOG_BYTES = 64 * 1024 * 1024  # a Triton fusion's pass log (a few megabytes each)

# File names and texts come from a user's zipped dump as well as from our compiles: RE2 patterns
# (``analysis.linear_re``), those matched per line behind a cheap test of the line.
_MODULE_FILE = linear_re.compile(r"^module_(\d+)\.(.+?)\.(\d+)\.(ir-no-opt\.ll|ir-with-opt\.ll|ptx)$")
_TTIR_FILE = linear_re.compile(r"^module_(\d+)\.(.+?)\.([^/]+)\.ttir\.txt$")
_TTGIR_LOG = linear_re.compile(r"^(.+?)\.([\w$]+)\.triton-to-llvm\.txt$")
_THUNK_LINE = linear_re.compile(r"^\s*(\d+):\s+(\w+)\s+\[[^\]]*\]\s+(\S+)"
                               r"(?:.*?shared_memory:\s*(\d+)\s*bytes)?")
_THUNK_INFO = linear_re.compile(r"thunk_info\s*\{([^{}]*)\}")
_THUNK_ANNOTATION = linear_re.compile(r'profile_annotation:\s*"([^"]*)"')
_THUNK_ID = linear_re.compile(r"thunk_id:\s*(\d+)")
_LL_DEFINE = linear_re.compile(r"^define\b[^@]*@\"?([\w$.-]+)\"?\s*\(")
_LL_KERNEL = linear_re.compile(r"^define\s+(?:[\w()]+\s+)*ptx_kernel\b|^define\b.*\"nvvm\.kernel\"")
_LL_NOT_KERNEL = linear_re.compile(r"^define\s+(?:internal|private|linkonce\w*|weak\w*|available_externally)\b")
_PTX_ENTRY = linear_re.compile(r"^\s*(?:\.visible\s+|\.weak\s+)*\.entry\b")
_NOT_IN_NAME = linear_re.compile(r"[^A-Za-z0-9_]")
_TTGIR_HEADER = "IR Dump Before ConvertTritonGPUToLLVM"
_GPU_FILE = linear_re.compile(r"^module_\d+\..+\.(?:\d+\.(?:ir-no-opt\.ll|ir-with-opt\.ll|ptx)|ttir\.txt|"
                              r"thunk_sequence\.txt|thunk_metadata\.txt)$|\.triton-to-llvm\.txt$")


def is_gpu_code_file(base: str) -> bool:
    """Whether a dump file's base name is one this reader reads (for a zip's importer)."""
    return bool(_GPU_FILE.search(base))


def gpu_code_from_files(names: list[str], read, bundle, run_tools=None, no_tools_note: str | None = None) -> dict | None:
    """The ``code`` field of ``bundle`` (an XLA:GPU compile) from a dump's file ``names`` (base
    names) and ``read(name, limit)`` (a file's bytes, at most ``limit``, raising ``ExplorerError``
    or ``OSError`` when it cannot: a folder's, or an imported zip's, as for ``analysis.codegen.cpu_read``).
    A file that cannot be read leaves its part out and the note names it. ``run_tools(modules)``
    (``analysis.compile.code_gpu``: ptxas and nvdisasm), given the PTX modules as (name, text),
    returns ({entry: ptxas report}, {entry: SASS}, note or None); without it the note is
    ``no_tools_note``. ``None`` without the optimized HLO."""
    module = bundle.module("hlo_after")
    if module is None:
        return None
    problems: list[str] = []

    def text(name: str, limit: int = MAX_IR_BYTES) -> str | None:
        try:
            return read(name, limit).decode("utf-8", errors="replace")
        except ExplorerError as e:
            problems.append(e.one_line())
        except OSError as e:
            problems.append(f"{name}: {e.strerror or e}")
        return None

    files = _module_files(names, module.name)
    stages = kernel_stages(files, text)
    ttir = {m.group(3): t for n in files["ttir"] if (m := _TTIR_FILE.match(n))
            and not m.group(3).endswith(".before_validation") and (t := text(n)) is not None}
    launches = _launches(names, text, files["prefix"])
    tool_note = None
    if stages["ptx"] and run_tools is not None:
        ptxas, sass, tool_note = run_tools(stages["ptx_files"])
        stages["ptxas"].update(ptxas)
        stages["sass"].update(sass)
    elif stages["ptx"]:
        tool_note = no_tools_note
    kernels, library = {}, {}
    entries = set(stages["ptx"])
    for k in bundle.kernels:
        if k.route == "library":
            library[k.name] = library_call(k, module)
            continue
        names_of = launches["entries"].get(k.name) or (
            [_xla_name(k.name)] if _xla_name(k.name) in entries else [])
        names_of = [e for e in dict.fromkeys(names_of) if e in entries]
        if not names_of:
            continue
        texts = {}
        for stage in ("llvm-ir", "llvm-ir-opt", "ptx", "sass", "ptxas", "triton-ttgir"):
            parts = [stages[stage][e] for e in names_of if e in stages[stage]]
            if parts:
                texts[stage] = "\n".join(parts)
        if k.name in ttir:
            texts["triton-ttir"] = ttir[k.name]
        kernels[k.name] = {"stages": texts, "ops": {},
                           "facts": kernel_facts(texts, [launches["shared"].get(e) for e in names_of])}
    notes = [n for n in (f"{len(problems)} code file(s) not read: {problems[0]}" if problems else None,
                         tool_note) if n]
    return kernel_code.make_code(kernels, library, "; ".join(notes) or None)


def kernel_facts(texts: dict, launch_shared: list) -> dict:
    """One kernel's facts (``analysis.codegen.ptx``'s definitions): loads, stores, vector width and
    instructions from its PTX; registers and spills from ptxas's report where there is one;
    shared memory = the PTX's static arrays + the launch's dynamic shared memory."""
    facts = ptx_facts(texts["ptx"])
    facts.pop("declared_registers", None)
    if texts.get("ptxas"):
        p = ptxas_facts(texts["ptxas"])
        facts.update(registers=p["registers"], spills=p["spills"])
    dynamic = [s for s in launch_shared if s is not None]
    if dynamic:
        facts["shared_bytes"] = (facts["shared_bytes"] or 0) + max(dynamic)
    return facts


def library_call(kernel, module) -> dict:
    """What a library kernel calls: its custom-call target (or library fusion kind), the library
    and its backend config as XLA printed it."""
    inst = None
    if module is not None:
        comp = module.by_name.get(kernel.computation)
        inst = comp.by_name.get(kernel.name) if comp is not None else None
    config = (inst.attributes.get("backend_config") or "") if inst is not None else ""
    return {"target": kernel.custom_call_target or kernel.fusion_kind or kernel.opcode,
            "library": kernel.library or "", "config": config}


def _xla_name(hlo_name: str) -> str:
    """XLA's name for an instruction's kernel (``fusion.10`` -> ``fusion_10``)."""
    return _NOT_IN_NAME.sub("_", hlo_name)


def _module_files(names: list[str], module_name: str | None) -> dict:
    """The dump files of the module compiled (the bundle's module; the last one in the folder
    when several are): {"prefix", "ll", "ll-opt", "ptx", "ttir", "ttgir"} -> file names."""
    found: dict[tuple, dict] = {}
    for n in names:
        m = _MODULE_FILE.match(n)
        if m:
            key = (int(m.group(1)), m.group(2))
            kind = {"ir-no-opt.ll": "ll", "ir-with-opt.ll": "ll-opt", "ptx": "ptx"}[m.group(4)]
            found.setdefault(key, {"ll": [], "ll-opt": [], "ptx": []})[kind].append(n)
    keys = sorted(found)
    mine = [k for k in keys if module_name is not None and k[1] == module_name]
    key = (mine or keys or [None])[-1]
    out = {"prefix": None, "ll": [], "ll-opt": [], "ptx": [], "ttir": [], "ttgir": []}
    if key is None:
        return out
    out.update(found[key])
    out["prefix"] = f"module_{key[0]:04d}.{key[1]}."
    out["ttir"] = [n for n in names if n.startswith(out["prefix"]) and n.endswith(".ttir.txt")]
    out["ttgir"] = [n for n in names if (m := _TTGIR_LOG.match(n)) and m.group(1) == key[1]]
    return out


def kernel_stages(files: dict, text) -> dict:
    """{stage: {kernel (entry) name: text}} from the module's files (``text(name[, limit])``: a
    file's text, or None when it cannot be read): each LLVM module and PTX module split into its
    kernels (a module with one kernel whole: its declarations and device functions with it)."""
    stages = {s: {} for s in ("llvm-ir", "llvm-ir-opt", "ptx", "sass", "ptxas", "triton-ttgir")}
    stages["ptx_files"] = []  # (name, text) of the PTX modules with a kernel (XLA writes an empty one for constants)
    for stage, kind in (("llvm-ir", "ll"), ("llvm-ir-opt", "ll-opt")):
        for n in files[kind]:
            t = text(n)
            if t is not None:
                stages[stage].update(split_llvm(t))
    for n in files["ptx"]:
        t = text(n)
        if t is None:
            continue
        header, funcs = split_ptx(t)
        entries = [f for f, body in funcs.items() if _is_entry(body)]
        if entries:
            stages["ptx_files"].append((n, t))
        for e in entries:
            stages["ptx"][e] = t if len(entries) == 1 else header + "\n" + funcs[e]
    for n in files["ttgir"]:
        m = _TTGIR_LOG.match(n)
        log = text(n, MAX_LOG_BYTES)
        ttgir = ttgir_of(log) if log is not None else None
        if m and ttgir:
            stages["triton-ttgir"][m.group(2)] = ttgir
    return stages


def _is_entry(body: str) -> bool:
    return any(_PTX_ENTRY.match(line) for line in body.splitlines()[:40] if ".entry" in line)


def split_llvm(text: str) -> dict[str, str]:
    """An LLVM module -> {kernel name: text}: the whole module when it defines one kernel, else
    each kernel's ``define`` with the module's first lines (its id, triple and data layout). A
    kernel is a ``define ptx_kernel``; in a module with none (older XLA marked kernels in
    ``nvvm.annotations``), every function defined that is not internal."""
    lines = text.splitlines()
    found: list[tuple[str, bool, str]] = []  # (name, marked a kernel, text)
    i = 0
    while i < len(lines):
        m = _LL_DEFINE.match(lines[i]) if lines[i].startswith("define") else None
        if m:
            j = i
            while j < len(lines) and not lines[j].startswith("}"):
                j += 1
            if not _LL_NOT_KERNEL.match(lines[i]):
                found.append((m.group(1), bool(_LL_KERNEL.match(lines[i])), "\n".join(lines[i:j + 1]) + "\n"))
            i = j
        i += 1
    kernels = {n: t for n, marked, t in found if marked} or {n: t for n, _, t in found}
    if len(kernels) == 1:
        return {next(iter(kernels)): text}
    head = "\n".join(line for line in lines[:8] if line.startswith(("; ModuleID", "source_filename", "target ")))
    return {k: head + "\n\n" + v for k, v in kernels.items()}


def ttgir_of(log: str) -> str | None:
    """The TritonGPU IR from a ``triton-to-llvm`` pass log: the module as it was handed to the
    conversion to LLVM (the section before ``ConvertTritonGPUToLLVM``)."""
    at = log.find(_TTGIR_HEADER)
    if at < 0:
        return None
    start = log.find("\n", at) + 1
    end = log.find("// -----//", start)
    return log[start:end if end >= 0 else len(log)].strip("\n") + "\n"


def _launches(names: list[str], text, prefix: str | None) -> dict:
    """From the thunk sequence and metadata: {"entries": {HLO instruction: [kernel names, in
    launch order]}, "shared": {kernel name: dynamic shared bytes of its launch}}."""
    out = {"entries": {}, "shared": {}}
    if prefix is None:
        return out
    seq, meta = prefix + "thunk_sequence.txt", prefix + "thunk_metadata.txt"
    if seq not in names or meta not in names:
        return out
    kernel_of, shared = {}, {}
    seq_text, meta_text = text(seq), text(meta)
    for line in (seq_text or "").splitlines():
        m = _THUNK_LINE.match(line) if ":" in line else None
        if m and "Kernel" in m.group(2):
            kernel_of[int(m.group(1))] = m.group(3)
            if m.group(4) is not None:
                shared[m.group(3)] = max(shared.get(m.group(3), 0), int(m.group(4)))
    for block in _THUNK_INFO.findall(meta_text or ""):
        a = _THUNK_ANNOTATION.search(block)
        t = _THUNK_ID.search(block)
        if a and t and int(t.group(1)) in kernel_of:
            out["entries"].setdefault(a.group(1), []).append(kernel_of[int(t.group(1))])
    out["shared"] = shared
    return out
