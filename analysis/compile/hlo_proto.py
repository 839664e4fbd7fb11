"""An ``HloModuleProto`` (what a profiler trace carries of each module it ran) -> HLO text, by
XLA's own deserializer and printer (jaxlib's ``HloModule``), printed as a compile's dump prints
it: metadata (op names, source lines), backend configs, layouts, large constants elided.
(``XlaComputation.as_hlo_text`` prints no metadata, so no provenance to the program's ops.)

It runs in the sandboxed worker, in the job that opens the trace (``analysis.inputs``: the
gate hands it this printer): the bytes come from a user's trace, and XLA's C++ deserializer is
not to be handed untrusted bytes in the app's server. The parent derives the bundle again from
the text, with the project's own parser, like any worker's bundle."""

from __future__ import annotations

from analysis.errors import ExplorerError


def hlo_text(proto: bytes, name: str = "module") -> str:
    """The HLO text of one serialized ``HloModuleProto``; an ExplorerError naming ``name`` when
    XLA cannot read it."""
    try:
        from jaxlib import _hlo
    except ImportError:  # a jaxlib without the HLO bindings
        raise ExplorerError("trace", "this jaxlib cannot read the HLO a trace carries: give the trace "
                                     "with its XLA dump (XLA_FLAGS=--xla_dump_to=DIR)", name) from None
    try:
        module = _hlo.HloModule.from_serialized_hlo_module_proto(proto)
    except Exception as e:  # noqa: BLE001 - XLA's status as a RuntimeError/ValueError
        raise ExplorerError("trace", f"XLA cannot read the module the trace carries: {str(e)[:200]}", name) from None
    opts = _hlo.HloPrintOptions()
    opts.print_metadata = True
    opts.print_backend_config = True
    opts.print_large_constants = False
    return module.to_string(opts)

