"""The layer tree (``analysis.layers``) as text: the CLI's ``xla-explorer layers``."""

from __future__ import annotations

from analysis.layers import Layer
from analysis.render.format import human_bytes, human_seconds


def layer_lines(root: Layer, max_depth: int = 6) -> list[str]:
    """The tree as indented text lines (the CLI's view): ops, kernels, bytes, time per layer."""
    out = []

    def visit(layer: Layer, depth: int):
        n_ops = len(layer.all_ops())
        n_k = len({kn for sub in layer.walk() for kn in sub.kernels})
        time = f", {human_seconds(layer.time_s)}" if layer.time_s is not None else ""
        shared = (f" (+{len(layer.shared)} shared with other layers)" if layer.shared and layer.path else "")
        out.append(f"{'  ' * depth}{layer.name}: {n_ops} ops -> {n_k} kernels{shared}, "
                   f"{human_bytes(layer.bytes)}{time}")
        if depth < max_depth:
            for c in layer.children.values():
                visit(c, depth + 1)

    visit(root, 0)
    return out
