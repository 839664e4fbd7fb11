"""Several compiles read together.

- ``compare``: two compiles side by side, and which kernel of one is which kernel of the other;
- ``sweep``: one model compiled for many input lengths, then with bucketing (shape
  specialization);
- ``passes``: what each XLA pass did to the module, from its per-pass snapshots;
- ``inductor``: one PyTorch model's kernels from XLA and from Inductor, layer by layer.
"""

from analysis import exports

__getattr__ = exports(__name__, {
    "pair_kernels": "compare", "fusion_side": "compare", "summary": "sweep",
    "verdict": "sweep", "summarize": "passes", "pass_log_from_dir": "passes",
    "beside_inductor": "inductor",
})
