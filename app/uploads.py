"""The Explorer's uploads: an HLO text, a bundle or a zipped XLA dump, and the user's own
profiler trace of it (or the trace alone, with the HLO it carries), opened as the page's bundle (``st.session_state.bundle``). Everything
uploaded is untrusted: sizes are checked first (``app.guard``), a bundle is re-derived from its
HLO texts, and any error is one line in ``st.session_state.error``; the page's bundle is kept."""

from __future__ import annotations

import os

import streamlit as st

from analysis.bundle import Bundle, bundle_from_hlo, reanalyze
from analysis.errors import ExplorerError, from_parse_error
from analysis.hlo import HloParseError
from app import guard
from app.page_helpers import unexpected

ss = st.session_state


def with_trace(found: list[Bundle], trace_upload) -> list[Bundle] | None:
    """The uploaded compiles with the uploaded trace's timings on the one it ran (first in the
    list), or None after saying why not."""
    from analysis.trace_import import apply_trace, load_trace

    too_big = guard.upload_error(trace_upload)
    if too_big:
        ss.error = too_big
        return None
    try:
        tr = load_trace(data=trace_upload.getvalue(), name=trace_upload.name)
        ran = [b for b in found if (m := b.module("hlo_after")) is not None and m.name in tr.modules()]
        apply_trace(ran[0] if ran else found[0], trace=tr)  # none ran: its error names what did
    except ExplorerError as e:
        ss.error = ExplorerError(e.phase, e.message, e.file or trace_upload.name, e.line, e.column).one_line()
        return None
    return ran + [b for b in found if b not in ran]


def load_upload(upload, trace=None) -> None:
    """An uploaded HLO text, bundle or dump zip (and the user's trace of it, when given) opened as
    the page's bundle; a trace alone (in either uploader) opens the modules it ran from the HLO
    it carries. Any error is one line (``ss.error``), the page's bundle kept."""
    if upload is not None and trace is None and _holds_a_trace(upload):
        upload, trace = None, upload
    try:
        if upload is None:
            _load_trace_alone(trace)
        else:
            _load_upload(upload, trace)
    except Exception as e:  # noqa: BLE001 - one line, never a traceback on the page
        ss.error = unexpected(e, "load", (upload or trace).name)


def _holds_a_trace(upload) -> bool:
    """A ``.xplane.pb``, or a zip holding a trace rather than a dump's HLO texts."""
    import io

    from analysis.trace_import import is_trace

    if upload.name.lower().endswith((".xplane.pb", ".trace.json.gz")):
        return True
    data = upload.getvalue()
    if data[:4] != b"PK\x03\x04" or guard.upload_error(upload):
        return False
    return is_trace(io.BytesIO(data))


def _load_trace_alone(trace_upload) -> None:
    """The module a trace spent the most kernel time in, from the HLO it carries (XLA prints it
    in the sandboxed worker, a job through the queue), with the trace's timings; the trace kept
    (``ss.trace_open``) so another of its modules can be opened (``open_trace_program``)."""
    from analysis.trace_import import load_trace, pick_program

    too_big = guard.upload_error(trace_upload)
    if too_big:
        ss.error = too_big
        return
    try:
        tr = load_trace(data=trace_upload.getvalue(), name=trace_upload.name)
        p = pick_program(tr)
    except ExplorerError as e:
        ss.error = ExplorerError(e.phase, e.message, e.file or trace_upload.name, e.line, e.column).one_line()
        return
    if open_trace_program(tr, p):
        ss.dump_bundles, ss.trace_open = None, tr


def open_trace_program(tr, p) -> bool:
    """Program ``p`` of trace ``tr`` opened as the page's bundle; False after saying why not."""
    from analysis.service.job import trace_job
    from analysis.trace_import import bundle_from_trace
    from app import runner

    try:
        with st.spinner("XLA prints the module the trace carries…"):
            made = runner.compile_bundle(trace_job(p, tr), session=ss.session_id).bundle
        b = bundle_from_trace(tr, p, made)
    except ExplorerError as e:
        ss.error = ExplorerError(e.phase, e.message, e.file or tr.file, e.line, e.column).one_line()
        return False
    ss.bundle, ss.error, ss.sel, ss.recorded = b, None, {}, None
    return True


def _load_upload(upload, trace=None) -> None:
    too_big = guard.upload_error(upload)
    if too_big:
        ss.error = too_big
        return
    data = upload.getvalue()
    if upload.name.lower().endswith(".zip") or data[:4] == b"PK\x03\x04":
        import io

        from analysis.dump import bundles_from_dump_zip
        from analysis.trace_import import holds_trace

        try:
            found = bundles_from_dump_zip(data, upload.name, parsed_mb=guard.upload_limit_mb())
        except ExplorerError as e:
            ss.error = ExplorerError(e.phase, e.message, upload.name, e.line, e.column).one_line()
            return
        if trace is None and holds_trace(io.BytesIO(data)):
            trace = upload  # the dump and its trace zipped together: the trace is read from the same zip
        if trace is not None and (found := with_trace(found, trace)) is None:
            return
        ss.dump_bundles, ss.trace_open = found, None
        ss.bundle, ss.error, ss.sel, ss.recorded = found[0], None, {}, None
        return
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        ss.error = f"load error at {upload.name}: not a UTF-8 text file"
        return
    try:
        if text.lstrip().startswith("{"):
            b = Bundle.from_json(text)
            # what the viewer derives it derives itself: an uploaded file's kernels, provenance and
            # metrics are recomputed from its HLO texts (which are parsed, so checked)
            try:
                reanalyze(b)
            except HloParseError as e:
                raise from_parse_error(e, upload.name) from None
        else:
            b = bundle_from_hlo(text, os.path.splitext(upload.name)[0], upload.name)
    except ExplorerError as e:
        if not e.file:
            e.file = upload.name
        ss.error = ExplorerError(e.phase, e.message, upload.name, e.line, e.column).one_line()
        return
    if trace is not None and with_trace([b], trace) is None:
        return
    ss.dump_bundles, ss.trace_open = None, None
    ss.bundle, ss.error, ss.sel, ss.recorded = b, None, {}, None
