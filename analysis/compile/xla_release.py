"""What differs between the XLA releases of the jax versions the project supports, in one place.

Every other module asks here instead of comparing versions itself, so that a release that
changes what XLA prints or dumps is one edit. What changed, checked by compiling the gallery
with each release (docs/xla-findings.md, "Releases"):

- jaxlib 0.11 added the dump option ``xla_dump_compact_gte`` and turned it on: a dumped module
  leaves its get-tuple-element instructions out and writes ``%t#1`` for element 1 of ``t``.
  The parser reads both forms (``analysis.hlo.parser``); a compile of ours dumps the long form,
  so that the module XLA dumps is, byte for byte, the one ``compiled.as_text()`` prints (the
  analysis made beside the compile from the dump then stands, ``analysis.pipeline``).
- jaxlib 0.11 (at the latest 0.12) dumps a kernel's LLVM IR and PTX only for the emitters that
  ``xla_dump_emitter_re`` names (0.10 dumped them always): ``llvm`` names the LLVM IR (XLA:CPU's
  kernels, XLA:GPU's modules), ``ptx`` XLA:GPU's PTX, ``triton-fusion`` its Triton fusions' Triton
  IR. Both releases take the pattern.
- XLA's own version (``xla_version``), which a bundle records beside jax's and jaxlib's: jaxlib
  pins one XLA commit, named by jaxlib's build (its git hash) and by the version of XLA's Python
  extension API, which every jaxlib of the range exposes as ``jax._src.lib.jaxlib_extension_version``.
"""

from __future__ import annotations

import re

import jaxlib


def _release(text: str) -> tuple[int, int]:
    m = re.match(r"(\d+)\.(\d+)", text)
    return (int(m.group(1)), int(m.group(2))) if m else (0, 0)


JAXLIB = _release(jaxlib.__version__)

# The dump options every compile of ours adds (docs/code.md): each kernel's code, and the
# module in the form ``compiled.as_text()`` prints
DUMP_OPTIONS: dict = {"xla_dump_emitter_re": "triton-fusion|llvm|ptx",
                      **({"xla_dump_compact_gte": False} if JAXLIB >= (0, 11) else {})}


def xla_version() -> str:
    """XLA's version, as the jaxlib that carries it says: the extension API's version and
    jaxlib's commit (``"extension 467, jaxlib 990e6a0b8413"``); what of it this jaxlib has."""
    parts = []
    try:
        from jax._src.lib import jaxlib_extension_version

        parts.append(f"extension {int(jaxlib_extension_version)}")
    except (ImportError, AttributeError, TypeError, ValueError):
        pass
    try:
        from jaxlib import version as _v

        commit = str(getattr(_v, "_git_hash", "") or "")[:12]
        if commit:
            parts.append(f"jaxlib {commit}")
    except ImportError:
        pass
    return ", ".join(parts) or "unknown"
