"""What every lesson is made of: a lesson (a text and the claims it makes) and a claim checked
on the compile at hand (``Check``), and the readings of a bundle the lessons share (the ops
before optimization, the kernels they ended in, the compile's numbers in one sentence). Read by
``sample_models.lessons`` and ``sample_models.lessons_devices``. Pure Python: reads a Bundle,
never imports JAX."""

from __future__ import annotations

from dataclasses import dataclass, field

from analysis.bundle.core import Bundle
from analysis.program.layers import layers_of_bundle
from analysis.program.provenance import walk_compute
from analysis.render.format import human_bytes


@dataclass
class Check:
    claim: str
    holds: bool


@dataclass
class Lesson:
    title: str
    text: str
    checks: list[Check] = field(default_factory=list)

    def markdown(self) -> str:
        lines = [self.text, ""]
        for c in self.checks:
            lines.append(f"- {'✔' if c.holds else '✘ not on this compile:'} {c.claim}")
        return "\n".join(lines)


# ----------------------------------------------------------------------------- helpers


def pre_ops(b: Bundle, opcode: str | None = None, scope: str | None = None, op_name_has: str | None = None):
    pre = b.module("hlo_before")
    if pre is None:
        return []
    out = []
    for inst, key in walk_compute(pre):
        name = key[0] if key else ""
        if opcode and inst.opcode != opcode:
            continue
        if scope and f"/{scope}/" not in name + "/":
            continue
        if op_name_has and op_name_has not in name:
            continue
        out.append(inst.name)
    return out


def kernels_of(b: Bundle, ops) -> set[str]:
    prov = b.provenance
    if prov is None:
        return set()
    return {k for op in ops for k in prov.pre_to_kernels.get(op, [])}


def basics(b: Bundle) -> str:
    m = b.metrics
    unfused, fused = m.get("unfused_bytes"), m.get("fused_bytes")
    rose = unfused is not None and fused is not None and fused > unfused
    devices = b.devices
    if devices > 1:  # before: whole arrays; after: one device's part
        return (f"This compile turned **{m.get('compute_ops_before', '?')} ops** into **{m.get('kernels_after', '?')} "
                f"kernels** per device, on {devices} devices; {m.get('fusion_coverage', 0):.0%} of the ops ended "
                "in a kernel that does several of them (a fusion, or a library call's epilogue).")
    traffic = (f"the estimated memory traffic rose from {human_bytes(unfused)} to {human_bytes(fused)} — some "
               "kernels here move more than the ops they replace (a matmul split into partial sums, say)"
               if rose else
               f"the estimated memory traffic fell from {human_bytes(unfused)} to {human_bytes(fused)}")
    return (f"This compile turned **{m.get('compute_ops_before', '?')} ops** into **{m.get('kernels_after', '?')} "
            f"kernels**; {m.get('fusion_coverage', 0):.0%} of the ops ended in a kernel that does "
            "several of them (a fusion, or a library call's epilogue), and "
            f"{traffic}.")


def layer_counts(b: Bundle, *path: str) -> tuple[int, int]:
    """(ops directly in the layer, kernels they ended in), from the layer tree."""
    root = layers_of_bundle(b)
    layer = root.find(tuple(path)) if root is not None else None
    if layer is None:
        return 0, 0
    return len(layer.ops), len(kernels_of(b, layer.ops))


def program_parameters(b: Bundle) -> int:
    pre = b.module("hlo_before")
    return sum(1 for i in pre.entry.instructions if i.opcode == "parameter") if pre is not None else 0


def params_check(b: Bundle, n_inputs: int) -> Check:
    n = b.source.get("parameters", 0)
    return Check(f"the {n} parameter arrays are inputs of the program, not constants "
                 f"({program_parameters(b)} parameters = {n} weights + {n_inputs} input)",
                 n > 0 and program_parameters(b) == n + n_inputs)
