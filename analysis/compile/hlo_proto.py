"""An ``HloModuleProto`` (what a profiler trace carries of each module it ran) -> HLO text, by
XLA's own deserializer and printer (jaxlib's ``HloModule``), printed as a compile's dump prints
it: metadata (op names, source lines), backend configs, layouts, large constants elided.

It runs in the sandboxed worker (a ``kind="hlo_proto"`` job, ``analysis.service.worker``):
the bytes come from a user's trace, and XLA's C++ deserializer is not to be handed untrusted
bytes in the app's server. The text it returns is parsed by the project's own parser, like any
uploaded HLO text."""

from __future__ import annotations

import base64

from analysis.errors import ExplorerError


def hlo_text(proto: bytes, name: str = "module") -> str:
    """The HLO text of one serialized ``HloModuleProto``; an ExplorerError naming ``name`` when
    XLA cannot read it."""
    try:
        from jaxlib import _hlo
    except ImportError:  # a jaxlib without the HLO bindings (older than the project's floor)
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


def hlo_texts(encoded: dict) -> dict:
    """``{key: base64 of an HloModuleProto}`` -> ``{key: HLO text}`` (the worker's job)."""
    if not isinstance(encoded, dict):
        raise ExplorerError("protocol", "an hlo_proto job's source is a JSON object of base64 strings")
    out = {}
    for key, b64 in encoded.items():
        try:
            raw = base64.b64decode(b64, validate=True)
        except (ValueError, TypeError):
            raise ExplorerError("protocol", "an hlo_proto job's module is not base64", str(key)[:80]) from None
        out[str(key)] = hlo_text(raw, str(key)[:80])
    return out
