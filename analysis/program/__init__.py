"""What XLA made of a program, read from its HLO before and after optimization: the kernels and
the route each takes (the legend every view shares), which kernel each op ended up in, the
links between them, the model's layers, the numbers per compile and the memory it allocates.

- ``kernels``: an optimized module's kernels and their routes;
- ``provenance``, ``links``: op -> kernel(s), the one definition every view uses;
- ``layers``: the layer tree from the ops' names, with each layer's kernels and time;
- ``metrics``: ops before, kernels after, fusion coverage, bytes unfused against fused;
- ``memory``: XLA's buffer assignment, live ranges and the peak.
"""

from analysis import exports

__getattr__ = exports(__name__, {
    "Kernel": "kernels", "kernels": "kernels", "classify": "kernels", "ROUTES": "kernels",
    "Provenance": "provenance", "map_provenance": "provenance", "walk_compute": "provenance",
    "link_maps": "links", "op_count": "links",
    "Layer": "layers", "layer_tree": "layers", "layers_of_bundle": "layers",
    "compute_metrics": "metrics", "bundle_memory": "memory",
})
