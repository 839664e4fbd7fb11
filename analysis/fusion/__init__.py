"""Why XLA fused two ops, or did not: its fusion passes' own words, mapped onto the program.

- ``log``: the lines XLA's fusion passes write about what they decide;
- ``gpu_dump``: XLA:GPU's priority-fusion dump;
- ``decisions``: the decisions mapped onto the program's ops and kernels;
- ``codec``: their records in a bundle's JSON, both ways; ``glossary``: each reason explained.
"""

from analysis import exports

__getattr__ = exports(__name__, {
    "parse_log": "log", "parse_fusion_dump": "gpu_dump", "from_texts": "decisions",
    "fusion_decisions_json": "codec", "read_records": "codec", "gloss": "glossary",
})
