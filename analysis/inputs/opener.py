"""One sniffer and one reader per kind of upload: the file (and its trace) -> a Bundle.

An ``Upload`` is what a user handed over: a file's name and bytes, maybe the profiler trace of
its run, maybe the module (of a dump) or program (of a trace) to open, by name. ``kind_of``
tells the file's kind from its name and first bytes; ``open_upload`` runs the adapter of that
kind (``ADAPTERS``) and, for a dump or a trace, records on the bundle what else the file holds
(``bundle.source["upload"]``, checked on arrival by ``analysis.bundle.checks.check_upload``)::

    {"kind": "dump", "file": NAME, "trace_file": NAME | None, "picked": CHOICE NAME,
     "choices": [{"name": "0012", "label": "jit_f", "kernels": 14, "passes": false,
                  "kernel_s": 0.0012 | None}, ...]}

A choice's ``name`` is what ``Upload.module`` takes to open it (a dump's module id, a trace's
``module(program_id)``).

Every error a reader can raise on bad bytes is one ``ExplorerError`` line naming the file; this
runs in the sandboxed worker (``analysis.inputs``), whose limits stop whatever a reader's bounds
do not.
"""

from __future__ import annotations

import io
import os
from dataclasses import dataclass
from typing import Callable

from analysis.bundle.core import Bundle, bundle_from_hlo, reanalyze
from analysis.bundle.checks import MAX_UPLOAD_CHOICES, UPLOAD_KINDS
from analysis.inputs.dump import bundles_from_dump_zip
from analysis.errors import ExplorerError, from_parse_error
from analysis.hlo import HloParseError
from analysis.inputs.traces import (apply_trace, bundle_from_trace, busy_programs, holds_trace, is_trace,
                                   load_trace, pick_program, program_label)

_ZIP_MAGIC = (b"PK\x03\x04", b"PK\x05\x06")


@dataclass(frozen=True)
class Upload:
    """What a user handed over. ``name``: the file's name as given (shown and matched, never
    used as a path); ``trace``: the bytes of the profiler trace of its run, if given;
    ``module``: the module of a dump or program of a trace to open (a choice's ``name``, or a
    module's name); ``prefer="passes"``: a dump's first module with per-pass snapshots."""

    name: str
    data: bytes
    trace_name: str | None = None
    trace: bytes | None = None
    module: str | None = None
    prefer: str | None = None


def kind_of(name: str, data: bytes) -> str:
    """The kind of an uploaded file (``UPLOAD_KINDS``): a zip is a dump, or a trace when it holds
    a profiler trace and no dump; ``.xplane.pb``, ``.trace.json(.gz)`` and gzip are traces; a
    text is a bundle's JSON when it starts with ``{`` (a JSON trace says ``traceEvents`` early),
    else HLO."""
    low = name.lower()
    if data[:4] in _ZIP_MAGIC or low.endswith(".zip"):
        return "trace" if is_trace(io.BytesIO(data)) else "dump"
    if low.endswith((".xplane.pb", ".pb", ".trace.json.gz", ".trace.json", ".gz")) or data[:2] == b"\x1f\x8b":
        return "trace"
    head = data[:4096].lstrip()
    if head[:1] == b"{":
        return "trace" if b'"traceEvents"' in head else "bundle"
    return "hlo"


def _text(u: Upload) -> str:
    try:
        return u.data.decode("utf-8")
    except UnicodeDecodeError:
        raise ExplorerError("load", "not a UTF-8 text file", u.name) from None


def _in_file(e: ExplorerError, name: str) -> ExplorerError:
    """``e`` naming the upload where it names no file of its own."""
    return e if e.file else ExplorerError(e.phase, e.message, name, e.line, e.column, e.excerpt, e.detail)


def _choice(b: Bundle) -> dict:
    return {"name": str(b.source.get("module_id") or b.title)[:200], "label": b.title[:200],
            "kernels": len(b.kernels), "passes": bool(b.pass_log), "kernel_s": None}


def _pick_module(found: list[Bundle], want: str | None, prefer: str | None, name: str) -> Bundle:
    if want:
        w = want.strip()
        for b in found:
            mid = b.source.get("module_id") or ""
            if w in (b.title, mid, mid.lstrip("0")):
                return b
        raise ExplorerError("load", f"no module {w[:80]!r} in the dump (it has: "
                                    + ", ".join(f"{b.source.get('module_id')} {b.title}" for b in found[:20]) + ")", name)
    if prefer == "passes":
        with_passes = [b for b in found if b.pass_log]
        if not with_passes:
            raise ExplorerError("load", "no module in this dump has per-pass snapshots (dump with "
                                        "xla_dump_hlo_pass_re=.*)", name)
        return with_passes[0]
    return found[0]


def _open_dump(u: Upload, tr, print_proto) -> tuple[Bundle, list[dict]]:
    found = bundles_from_dump_zip(u.data, u.name)
    if tr is None and holds_trace(io.BytesIO(u.data)):  # the dump and its trace zipped together
        tr = load_trace(data=u.data, name=u.name)
    if tr is not None:  # the modules the trace ran first (the one it ran is the one to show)
        ran = [b for b in found if (m := b.module("hlo_after")) is not None and m.name in tr.modules()]
        found = ran + [b for b in found if b not in ran]
    b = _pick_module(found, u.module, u.prefer, u.name)
    if tr is not None:
        apply_trace(b, trace=tr)  # none ran: its error names what did
    return b, [_choice(x) for x in found]


def _open_trace(u: Upload, tr, print_proto) -> tuple[Bundle, list[dict]]:
    """A trace alone: the program it spent the most kernel time in (or ``u.module``), from the
    optimized HLO its ``.xplane.pb`` carries, printed by XLA (``print_proto``)."""
    tr = load_trace(data=u.data, name=u.name, need_hlo=True)
    p = pick_program(tr, u.module)
    if print_proto is None:
        raise ExplorerError("trace", "the HLO a trace carries is printed by XLA, which this process does not "
                                     "run", u.name)
    label = program_label(p)
    made = bundle_from_hlo(print_proto(p.proto, label), p.module, tr.file)
    b = bundle_from_trace(tr, p, made)
    choices = [{"name": program_label(q)[:200], "label": program_label(q)[:200], "kernels": None, "passes": False,
                "kernel_s": t * 1e-9} for q, t in busy_programs(tr)]
    return b, choices


def _open_bundle(u: Upload, tr, print_proto) -> tuple[Bundle, list[dict]]:
    b = Bundle.from_json(_text(u))
    # what the viewer derives it derives itself: the file's kernels, provenance and metrics are
    # made again from its HLO texts (which are parsed, so checked)
    try:
        reanalyze(b)
    except HloParseError as e:
        raise from_parse_error(e, u.name) from None
    if tr is not None:
        apply_trace(b, trace=tr)
    return b, []


def _open_hlo(u: Upload, tr, print_proto) -> tuple[Bundle, list[dict]]:
    b = bundle_from_hlo(_text(u), os.path.splitext(os.path.basename(u.name))[0] or "hlo", u.name)
    if tr is not None:
        apply_trace(b, trace=tr)
    return b, []


ADAPTERS: dict[str, Callable] = {"hlo": _open_hlo, "bundle": _open_bundle, "dump": _open_dump, "trace": _open_trace}


def open_upload(u: Upload, print_proto: Callable[[bytes, str], str] | None = None) -> Bundle:
    """The bundle of an upload (see the module docstring), or one ``ExplorerError`` line naming
    the file. ``print_proto(proto_bytes, label)``: XLA's printing of an ``HloModuleProto`` (a
    trace alone needs it)."""
    kind = kind_of(u.name, u.data)
    try:
        tr = load_trace(data=u.trace, name=u.trace_name or "trace") if u.trace is not None else None
    except ExplorerError as e:
        raise _in_file(e, u.trace_name or "trace") from None
    try:
        b, choices = ADAPTERS[kind](u, tr, print_proto)
    except ExplorerError as e:
        raise _in_file(e, u.name) from None
    except HloParseError as e:
        raise from_parse_error(e, u.name) from None
    except (RecursionError, OverflowError, MemoryError, UnicodeDecodeError, ValueError) as e:
        # a reader's bounds missed these bytes: still one line naming the file
        raise ExplorerError("load", f"cannot read this {kind} file: {type(e).__name__}: {str(e)[:200]}",
                            u.name) from None
    if kind in ("dump", "trace"):  # files that hold modules to choose from
        b.source = {**(b.source or {}), "upload": {
            "kind": kind, "file": u.name[-200:], "trace_file": (u.trace_name or "")[-200:] or None,
            "picked": _picked(kind, b, choices), "choices": choices[:MAX_UPLOAD_CHOICES]}}
    return b


def _picked(kind: str, b: Bundle, choices: list[dict]) -> str | None:
    if kind == "dump":
        return str(b.source.get("module_id") or b.title)[:200]
    if kind == "trace":
        t = b.timings or {}
        return next((c["name"] for c in choices if c["name"] in (f"{b.title}({t.get('program_id')})", b.title)), None)
    return None
