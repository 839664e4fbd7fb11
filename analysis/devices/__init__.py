"""Devices and what a program spreads over them.

- ``catalog``: devices as the product knows them without asking JAX (platforms, GPU targets,
  data-sheet peaks);
- ``sharding``: the shardings XLA prints on an instruction, read and said in words;
- ``collectives``: which devices a collective involves and the traffic it causes;
- ``layout``: what each device holds of a sharded program's inputs and outputs.
"""

from analysis import exports

__getattr__ = exports(__name__, {
    "GPU_TARGETS": "catalog", "platform_of": "catalog", "table_peaks": "catalog",
    "parse_sharding": "sharding", "collectives": "collectives", "device_layout": "layout",
})
