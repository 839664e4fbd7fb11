"""HLO text -> Module / Computation / Instruction, and shapes. Pure Python: imports nothing
of ours outside this package, and no JAX."""

from analysis.hlo.parser import (CALL_ATTRS, Computation, HloParseError, Instruction, Metadata, Module,
                                 SourceLocation, parse_module)
from analysis.hlo.shape import Shape, ShapeParseError, parse_shape

__all__ = ["CALL_ATTRS", "Computation", "HloParseError", "Instruction", "Metadata", "Module", "SourceLocation",
           "Shape", "ShapeParseError", "parse_module", "parse_shape"]
