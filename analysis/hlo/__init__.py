"""HLO text -> Module / Computation / Instruction, and shapes. Pure Python: imports nothing
of ours outside this package, and no JAX."""

from analysis.hlo.ir import (CALL_ATTRS, NATIVE_ASYNC, Computation, Instruction, Metadata, Module,
                             SourceLocation, async_sugar)
from analysis.hlo.parser import HloParseError, parse_module
from analysis.hlo.shape import Shape, ShapeParseError, parse_shape

__all__ = ["CALL_ATTRS", "NATIVE_ASYNC", "Computation", "HloParseError", "Instruction", "Metadata", "Module",
           "SourceLocation", "Shape", "ShapeParseError", "async_sugar", "parse_module", "parse_shape"]
