"""The app's uploads, opened through the gate: an HLO text, a bundle, a zipped XLA dump or a
profiler trace (and the trace of a compile's run) go to a sandboxed worker as they are, as one
``open`` job through the queue (``analysis.service.job.upload_job``; ``analysis.inputs`` reads
them there). This process reads none of their bytes: it checks their size (``app.guard``) and
receives the bundle the worker made, checked on arrival like any worker's. The bundle says what
else the file holds (``source.upload``: a dump's other modules, a trace's other programs); another
of them is another job of the same bytes (``open_choice``). Every error is one line in the
Explorer's state (``app.explorer_state``: ``error``); the page's bundle is kept."""

from __future__ import annotations

from dataclasses import replace

import streamlit as st

from analysis.bundle.core import Bundle
from analysis.errors import ExplorerError
from analysis.render.format import human_seconds
from analysis.service.job import Job, Opened, upload_job
from app import guard, runner
from app.explorer_state import explorer_state
from app.page_helpers import WaitBox, unexpected

ss = st.session_state


def open_files(upload, trace=None, module: str | None = None,
               prefer: str | None = None) -> tuple[Bundle | None, Job | None, str | None]:
    """The bundle of an upload (and the trace of its run), opened in the sandbox, and the job
    that opened it (to open another of its modules); else the one line that says why not. A
    trace alone may come in either box."""
    if upload is None and trace is None:
        return None, None, None
    main, extra = (upload, trace) if upload is not None else (trace, None)
    for f in (main, extra):
        too_big = guard.upload_error(f) if f is not None else None
        if too_big:
            return None, None, too_big
    job = upload_job(main.name, main.getvalue(), extra.name if extra is not None else None,
                     extra.getvalue() if extra is not None else None, module, prefer)
    b, error = open_job(job)
    return b, (job if b is not None else None), error


def open_job(job: Job) -> tuple[Bundle | None, str | None]:
    """The bundle an ``open`` job makes, else the one line that says why not."""
    holder = st.empty()
    WaitBox(holder, f"Opening {job.filename[-80:]} in the sandbox…")
    try:
        return runner.compile_bundle(job, session=ss.session_id).bundle, None
    except ExplorerError as e:
        return None, (e if e.file else ExplorerError(e.phase, e.message, job.filename, e.line, e.column)).one_line()
    except Exception as e:  # noqa: BLE001 - one line, never a traceback on the page
        return None, unexpected(e, "load", job.filename)
    finally:
        holder.empty()


def load_upload(upload, trace=None) -> None:
    """The Explorer's upload (and trace) opened as the page's bundle; the job kept
    (``upload_job``) so another module of the same file can be opened (``open_choice``)."""
    b, job, error = open_files(upload, trace)
    if b is not None:
        explorer_state().show_upload(b, job)
    elif error:
        explorer_state().error = error


def open_choice(name: str) -> bool:
    """Another module (of a dump) or program (of a trace) of the file opened last, by its
    choice's name; False after saying why not (the Explorer's ``error``)."""
    state = explorer_state()
    job = state.upload_job
    if job is None:
        return False
    job = replace(job, upload=replace(job.upload or Opened(), module=name))
    b, error = open_job(job)
    if b is None:
        state.error = error
        return False
    state.show_upload(b, job)
    return True


def choice_label(c: dict) -> str:
    """A module or program to choose, in words: its name, its dump's module id where that
    differs, and its kernels, kernel time or pass snapshots where known."""
    bits = [f"{c['kernels']} kernels"] if c.get("kernels") is not None else []
    if c.get("kernel_s") is not None:
        bits.append(f"{human_seconds(c['kernel_s'])} of kernels")
    if c.get("passes"):
        bits.append("per-pass snapshots")
    head = c["label"] + (f" · module {c['name']}" if c["name"] != c["label"] else "")
    return head + (f" ({', '.join(bits)})" if bits else "")


def upload_choices(b: Bundle | None) -> tuple[list[dict], str | None, str]:
    """What else the bundle's upload holds, to choose from (its ``source.upload.choices``), the
    one shown, and what a choice is called (a dump's module, a trace's program)."""
    up = (b.source or {}).get("upload") if b is not None and isinstance(b.source, dict) else None
    if not isinstance(up, dict):
        return [], None, ""
    return up.get("choices") or [], up.get("picked"), ("Module in the trace (most kernel time first)"
                                                       if up.get("kind") == "trace" else "Module")
