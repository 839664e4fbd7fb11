"""The code XLA generated for each kernel: its texts by stage (LLVM IR, assembly, Triton IR,
PTX, SASS), the facts read from them (loads and stores through memory, vector width, spills,
registers) and the lines linked to the HLO ops they come from.

- ``kernel_code``: a bundle's ``code`` field: stages, facts, totals, its JSON form and checks;
- ``cpu_read``, ``gpu_read``: a dump's code files (XLA:CPU's, XLA:GPU's) -> that field;
- ``llvm_ir``, ``ptx``, ``disassemble``: the readers of one stage each (linear time: the texts
  are a user's); ``links``: code lines -> HLO ops; ``finish``: a CPU kernel's machine code
  disassembled when first asked for.
"""

from analysis import exports

__getattr__ = exports(__name__, {
    "make_code": "kernel_code", "code_json": "kernel_code", "check_code": "kernel_code",
    "has_code": "kernel_code", "totals": "kernel_code",
    "code_files": "cpu_read", "code_from_files": "cpu_read", "gpu_code_from_files": "gpu_read",
    "disassemble": "disassemble", "disassemble_objects": "finish",
})
