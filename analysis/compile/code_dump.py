"""The code XLA generated for a compile, read from its private dump folder (``xla_dump_to``)
into ``bundle.code`` (``analysis.codegen.kernel_code``; docs/code.md). Called from ``stages.read_dump``.

XLA:CPU's files are read by ``analysis.codegen.cpu_read`` (the reader a user's zipped dump uses too);
a GPU compile's (LLVM IR, PTX, SASS, Triton IR) by ``analysis.compile.code_gpu``.
Set ``XLA_EXPLORER_CODE=0`` to compile without reading it (``benchmarks/code_cost.py`` measures
what reading it costs the first graph: docs/performance.md).
"""

from __future__ import annotations

import os

from analysis.codegen.cpu_read import code_from_files
from analysis.compile.code_gpu import gpu_code
from analysis.errors import ExplorerError


def enabled() -> bool:
    return os.environ.get("XLA_EXPLORER_CODE", "1").strip().lower() not in ("0", "false", "no", "off")


def folder_files(dump_dir: str):
    """``(names, read)`` of a dump folder for the code readers (``read(name, limit) -> bytes``,
    refusing a file past ``limit`` bytes), or None where the folder cannot be listed."""
    try:
        names = sorted(os.listdir(dump_dir))
    except OSError:
        return None

    def read(name: str, limit: int) -> bytes:
        with open(os.path.join(dump_dir, name), "rb") as f:
            data = f.read(limit + 1)
        if len(data) > limit:
            raise ExplorerError("code", f"more than {limit:,} bytes", name)
        return data

    return names, read


def read_gpu_code(dump_dir: str, bundle) -> dict | None:
    """The ``code`` field (``analysis.codegen.kernel_code``'s contract) of an XLA:GPU compile from its dump
    folder; ``None`` when it holds no generated code and no library call."""
    files = folder_files(dump_dir)
    return gpu_code(*files, bundle) if files is not None else None


def read_code(dump_dir: str, bundle) -> dict | None:
    """The ``code`` field of ``bundle`` from the dump folder ``dump_dir``, or None."""
    if not enabled():
        return None
    if bundle.platform == "gpu":
        return read_gpu_code(dump_dir, bundle)  # LLVM IR, PTX, Triton IR, ptxas, SASS (same shape)
    files = folder_files(dump_dir)
    return code_from_files(*files, bundle) if files is not None else None
