"""The code XLA:GPU generated for a compile, from its private dump folder, with what ptxas and
nvdisasm make of its PTX (issue #36; docs/code.md, "On the GPU"). The files are read by
``analysis.codegen.gpu_read`` (the reader a user's zipped dump uses too); here: the compile options
that make XLA dump them, the folder, and the tools.

ptxas (pip ``nvidia-cuda-nvcc-cu12``) and nvdisasm (pip ``nvidia-cuda-nvdisasm``), or cuobjdump,
are run on the PTX where they are installed (the ``gpu-tools`` extra) and asked for
(``XLA_EXPLORER_GPU_TOOLS=1``: they cost several times the compile): ptxas's ``-v`` report and
the SASS become stages; where they are not, the code's note says why and nothing fails. They are
never run on an imported dump's PTX (a user's file: the server runs no tool on it).
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

from analysis.codegen.gpu_read import gpu_code_from_files
from analysis.codegen.ptx import split_ptxas, split_sass

TOOL_SECONDS = 120  # ptxas and nvdisasm for a whole compile, all files together
TOOL_FILE_SECONDS = 60
MAX_TOOL_FILES = 2000
_TARGET = re.compile(r"^\s*\.target\s+(sm_\w+)", re.M)

# They are not run unless asked for: on two cores ptxas alone took a third of the compile's time
# and nvdisasm several times it (benchmarks/code_gpu_cost.py), past the tenth of the first graph
# the code may cost; the recorder of the H200 compiles asks (scripts/record_gpu_target.py)
TOOLS_ENV = "XLA_EXPLORER_GPU_TOOLS"
NOTE_TOOLS_OFF = (f"SASS and the ptxas report not made: they cost several times the compile, so they are "
                  f"made only with {TOOLS_ENV}=1 in the compiling process's environment")
NOTE_NO_TOOLS = ("SASS and the ptxas report not made: ptxas and nvdisasm are not installed "
                 "(pip install 'xla-explorer[gpu-tools]')")


def tools_wanted() -> bool:
    """Whether this process was asked to run ptxas and nvdisasm on its compiles' PTX."""
    return os.environ.get(TOOLS_ENV, "").strip() == "1"


def gpu_code(names: list[str], read, bundle, tools: dict | None = None) -> dict | None:
    """``analysis.codegen.gpu_read.gpu_code_from_files`` with ptxas and nvdisasm run on the PTX:
    ``tools`` {"ptxas": path, "nvdisasm": path, "cuobjdump": path} (default: ``find_tools()``
    when ``tools_wanted()``, else none; {} runs none)."""
    note = NOTE_NO_TOOLS
    if tools is None:
        tools = find_tools() if tools_wanted() else {}
        note = NOTE_NO_TOOLS if tools_wanted() else NOTE_TOOLS_OFF
    run = (lambda modules: run_tools(modules, tools)) if tools.get("ptxas") else None
    return gpu_code_from_files(names, read, bundle, run_tools=run, no_tools_note=note)


# -- ptxas and nvdisasm ------------------------------------------------------------------------

_TOOL_PACKAGES = {"ptxas": ("nvidia.cuda_nvcc", "nvidia.cu13", "nvidia.cu12"),
                  "nvdisasm": ("nvidia.cuda_nvdisasm", "nvidia.cu13", "nvidia.cu12"),
                  "cuobjdump": ("nvidia.cuda_cuobjdump", "nvidia.cu13", "nvidia.cu12")}


def find_tools() -> dict:
    """Where ptxas, nvdisasm and cuobjdump are: on PATH, or in NVIDIA's pip packages' ``bin``."""
    out = {}
    for tool, packages in _TOOL_PACKAGES.items():
        path = shutil.which(tool)
        for pkg in packages if path is None else ():
            try:
                spec = importlib.util.find_spec(pkg)
            except (ImportError, ValueError):
                continue
            for d in (spec.submodule_search_locations or []) if spec else []:
                p = os.path.join(d, "bin", tool)
                if os.access(p, os.X_OK):
                    path = p
                    break
            if path:
                break
        if path:
            out[tool] = path
    return out


def run_tools(ptx_files: list[tuple[str, str]], tools: dict) -> tuple[dict, dict, str | None]:
    """ptxas -v (and nvdisasm or cuobjdump) on each PTX module ((name, text)): ({entry: its
    ptxas report}, {entry: its SASS}, the note to give: what could not be made, or None)."""
    deadline = time.monotonic() + TOOL_SECONDS
    problems: list[str] = []
    reports: dict[str, str] = {}
    disassembled: dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix="xla-ptxas-") as tmp:
        def one(item):
            i, (name, text) = item
            if time.monotonic() > deadline:
                return name, None, None, "time"
            arch = (_TARGET.search(text) or [None, "sm_90a"])[1]
            src, cubin = os.path.join(tmp, f"{i}.ptx"), os.path.join(tmp, f"{i}.cubin")
            with open(src, "w", encoding="utf-8") as f:
                f.write(text)
            try:
                r = subprocess.run([tools["ptxas"], f"-arch={arch}", "-v", "-o", cubin, src], capture_output=True,
                                   text=True, timeout=max(1.0, min(TOOL_FILE_SECONDS, deadline - time.monotonic())))
            except (OSError, subprocess.TimeoutExpired) as e:
                return name, None, None, type(e).__name__
            if r.returncode != 0:
                first = next((ln for ln in (r.stderr or "").splitlines() if ln.strip()), f"exit {r.returncode}")
                return name, None, None, first
            report = "\n".join(x for x in (r.stdout, r.stderr) if x)
            sass = None
            # nvdisasm without its dataflow analysis: a third faster, the same text
            dis = ([tools["nvdisasm"], "-c", "-ndf", cubin] if tools.get("nvdisasm")
                   else [tools["cuobjdump"], "-sass", cubin] if tools.get("cuobjdump") else None)
            if dis:
                try:
                    d = subprocess.run(dis, capture_output=True, text=True,
                                       timeout=max(1.0, min(TOOL_FILE_SECONDS, deadline - time.monotonic())))
                    sass = d.stdout if d.returncode == 0 else None
                except (OSError, subprocess.TimeoutExpired):
                    sass = None
            return name, report, sass, None

        work = list(enumerate(ptx_files[:MAX_TOOL_FILES]))
        with ThreadPoolExecutor(max_workers=max(1, min(8, os.cpu_count() or 1))) as pool:
            for name, report, sass, problem in pool.map(one, work):
                if problem:
                    problems.append(problem)
                    continue
                reports.update(split_ptxas(report))
                if sass:
                    disassembled.update(split_sass(sass))
    notes = []
    if len(ptx_files) > MAX_TOOL_FILES:
        notes.append(f"ptxas run on the first {MAX_TOOL_FILES:,} of {len(ptx_files):,} PTX modules")
    if problems:
        timed = problems.count("time")
        notes.append(f"ptxas gave no report for {len(problems)} of {len(ptx_files)} PTX modules"
                     + (f" ({timed} past its {TOOL_SECONDS} s)" if timed else f": {problems[0][:120]}"))
    if not (tools.get("nvdisasm") or tools.get("cuobjdump")):
        notes.append("SASS not made: nvdisasm is not installed (pip install 'xla-explorer[gpu-tools]')")
    return reports, disassembled, "; ".join(notes) or None
