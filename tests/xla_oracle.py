"""XLA's own word on a gallery model's CPU compile, read by the test itself (not by the code under
test): jax compiles the model here and the ENTRY computation of ``Compiled.as_text()`` is read for
its kernels. Tests that name kernels take them from here, so they hold on every XLA that the
supported jax range brings (XLA:CPU's YNNPACK fusions grew between jax 0.12.0 and 0.12.1: the
whole of ``softmax`` became one library call)."""

from __future__ import annotations

import functools
import importlib
import re
from dataclasses import dataclass

_LINE = re.compile(r"^\s*(?:ROOT )?%(?P<name>[\w.\-]+) = (?P<shape>.+?) fusion\((?P<ops>[^)]*)\), kind=(?P<kind>k\w+)")
_CUSTOM = re.compile(r'"fusion_config":\{"kind":"(?P<k>[\w]+)"')


@dataclass(frozen=True)
class Fusion:
    name: str
    kind: str          # kLoop, kInput, kOutput, kCustom
    library: str       # the custom fusion's kind ("__ynn_fusion"), "" for XLA's own emitters
    operands: int


@functools.lru_cache(maxsize=None)
def entry_fusions(model: str) -> tuple[Fusion, ...]:
    """The fusions of the ENTRY computation of ``sample_models/<model>.py`` jitted on this jax's
    CPU, in program order."""
    import jax

    m = importlib.import_module(f"sample_models.{model}")
    text = jax.jit(m.model).lower(*m.example_inputs()).compile().as_text()
    entry = text[text.index("\nENTRY"):]
    out = []
    for line in entry.splitlines():
        hit = _LINE.match(line)
        if hit:
            lib = _CUSTOM.search(line)
            ops = [o for o in hit["ops"].split(",") if o.strip()]
            out.append(Fusion(hit["name"], hit["kind"], lib["k"] if lib else "", len(ops)))
    return tuple(out)


def generated(model: str) -> list[Fusion]:
    """The fusions XLA emits code for itself (not a library's)."""
    return [f for f in entry_fusions(model) if not f.library]


def library(model: str) -> list[Fusion]:
    return [f for f in entry_fusions(model) if f.library]
