"""The layer tree (``analysis.program.layers``) as text: the CLI's ``xla-explorer layers``."""

from __future__ import annotations

from analysis.program.layers import Layer
from analysis.render.format import human_bytes, human_seconds


def layer_name(layer: Layer) -> str:
    """A layer's name as every view shows it: a loop's layer with its repeat count."""
    if layer.repeats is None:
        return layer.name
    return f"{layer.name} ×{layer.repeats}" if layer.repeats else f"{layer.name} (in a loop)"


def added_kernels(layer: Layer) -> list[str]:
    """The kernels of a layer's subtree that do no op of the program: copies and layout changes
    XLA added (``Layer.added``), why a layer can have more kernels than ops."""
    return list(dict.fromkeys(k for sub in layer.walk() for k in sub.added))


def added_note(layer: Layer) -> str:
    """What every view says of a layer's ``added_kernels`` (empty where none): the row's "why"
    when a layer has more kernels than ops."""
    n = len(added_kernels(layer))
    if not n:
        return ""
    return f"{n} added by XLA, doing no op of the program (copies, layout changes)"


def layer_lines(root: Layer, max_depth: int = 6) -> list[str]:
    """The tree as indented text lines (the CLI's view): ops, kernels, bytes, time per layer.
    At every level the lines add up: a layer's ops and kernels are its sub-layers' plus the
    line that says what lies outside them (the root's total is the whole program's)."""
    out = []

    def visit(layer: Layer, depth: int):
        n_ops = len(layer.all_ops())
        n_k = len({kn for sub in layer.walk() for kn in sub.kernels})
        time = f", {human_seconds(layer.time_s)}" if layer.time_s is not None else ""
        loop = f" (a loop: its ops run {layer.repeats} times, counted once)" if layer.repeats else ""
        name = layer_name(layer) if layer.path else "(program)"
        shared = (f" (+{len(layer.shared)} shared with other layers)" if layer.shared and layer.path else "")
        added = f"; {added_note(layer)}" if layer.path and added_note(layer) else ""
        out.append(f"{'  ' * depth}{name}: {n_ops} ops -> {n_k} kernels{shared}, {human_bytes(layer.bytes)}"
                   f"{time}{loop}{added}")
        if depth < max_depth and layer.children:
            for c in layer.children.values():
                visit(c, depth + 1)
            # what none of its sub-layers holds: ops directly in it, and kernels holding ops of
            # several of them (a fusion across their border) or of it
            ops, ks = len(layer.ops), len(layer.kernels)
            if ops or ks:
                where = "outside every layer" if not layer.path else f"in {layer.name}, outside its sub-layers"
                out.append(f"{'  ' * (depth + 1)}({where}): {ops} ops -> {ks} kernels")

    visit(root, 0)
    return out


def layer_dict(root: Layer) -> dict:
    """The tree as plain data (``xla-explorer layers --json``): per layer its name, path, ops,
    kernels (and how many of them XLA added: ``added_kernels``), bytes, time, repeat count, what
    lies outside its sub-layers, and its sub-layers.
    Walked without recursion (the tree is as deep as the program's scopes)."""
    def node(layer: Layer) -> dict:
        return {"name": layer.name if layer.path else None, "path": "/".join(layer.path),
                "ops": len(layer.all_ops()), "kernels": len({k for sub in layer.walk() for k in sub.kernels}),
                "bytes": layer.bytes, "time_s": layer.time_s, "repeats": layer.repeats,
                "outside_sublayers": {"ops": len(layer.ops), "kernels": len(layer.kernels)},
                "shared": len(layer.shared), "added_kernels": len(added_kernels(layer)), "children": []}

    top = node(root)
    todo = [(root, top)]
    while todo:
        layer, d = todo.pop()
        for c in layer.children.values():
            cd = node(c)
            d["children"].append(cd)
            todo.append((c, cd))
    return top
