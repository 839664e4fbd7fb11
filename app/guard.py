"""What the app checks of a visitor before it does work for them.

- ``browser_session_id()``: the id the job queue counts jobs by (``Limits.session_jobs``). It is
  bound to the browser, not to the tab: derived from the token of Streamlit's XSRF cookie, which
  a browser keeps for the site across tabs and reloads, so opening a new tab does not reset the
  limit. Without the cookie (a test harness, XSRF protection turned off) it falls back to a
  random id per Streamlit session. Clearing cookies makes a new session, so the id also names
  the client (address and user agent), which the queue bounds on its own (``client_jobs``).
- ``upload_error(upload)``: the one-line error for an upload larger than the ``upload_mb``
  setting (default 32 MB), before any of it is parsed.
- ``start_memory_janitor()``: gives a closed tab's memory back to the machine. Every
  ``JANITOR_S`` seconds a daemon thread
  1. shuts down the sessions whose reconnect time (``server.disconnectedSessionTTL``, 60 s in
     ``.streamlit/config.toml``) is over. Streamlit keeps a disconnected session in a TTL cache
     and, when the entry expires, drops it *without* shutting it down, so its uploaded files and
     download callables (and through them the whole script run: upload, bundle, graphs) stayed
     in the server for good (benchmarks/upload_memory.py; docs/performance.md).
     Shutting it down is Streamlit's own ``AppSession.shutdown``; reaching the expired entries
     needs the session manager's private store, so every step is guarded and the reaping simply
     stops if a Streamlit release changes it. A shut-down session is still not freed: the
     runtime's message loop keeps the last session it flushed in a loop variable until another
     session connects, and ``shutdown`` leaves the session's state, its unsent messages and its
     fragments (with the arguments they were called with) in place, so the janitor empties them
     once the session's script run has ended (an upload's bundle was still alive long
     after its tab closed, held that way: docs/performance.md);
  2. collects cycles (only after it emptied a session: a full collection walks every live
     object) and asks glibc to return free pages (``analysis.tuning.return_free_memory``).
  Before its first round it sets glibc's allocator (``analysis.tuning.tune_allocator``).
"""

from __future__ import annotations

import binascii
import hashlib
import os
import threading
import weakref

from analysis import tuning
from analysis.errors import ExplorerError
from analysis.service.settings import Limits

XSRF_COOKIE = "_streamlit_xsrf"


def xsrf_token(cookie: str) -> bytes | None:
    """The unmasked token of a Tornado-style XSRF cookie, None if not one. Version 2 (what
    Tornado and Streamlit's servers set) is ``2|mask|masked|time``: a 4-byte mask in hex, the
    token (16 random bytes) XORed with the mask repeated (``websocket_mask``), in hex; a new mask
    each time the cookie is set, the token the same for the browser. Version 1 is the token in hex."""
    parts = cookie.split("|")
    if len(parts) == 4 and parts[0] == "2":
        try:
            mask, masked = binascii.a2b_hex(parts[1]), binascii.a2b_hex(parts[2])
        except (binascii.Error, ValueError):
            return None
        if len(mask) == 4 and masked:
            return bytes(b ^ mask[i % 4] for i, b in enumerate(masked))
        return None
    return cookie.encode() if cookie else None


def _client_key(headers, ip) -> str:
    """The browser's address and user agent, hashed: what a fresh cookie jar does not change."""
    ua = ""
    try:
        ua = str((headers or {}).get("User-Agent") or "")[:512]
    except Exception:  # noqa: BLE001 - headers of an unknown kind: no user agent
        pass
    return "c-" + hashlib.sha256(f"xla-explorer-client:{ip or ''}|{ua}".encode()).hexdigest()[:12]


def browser_session_id(cookies=None, headers=None, ip=None) -> str:
    """A short id for this browser (see the module docstring): ``CLIENT/BROWSER``, the job
    queue's per-client bound counted by the part before the ``/`` (its address and user agent),
    its per-session budget by the whole. ``cookies``, ``headers`` and ``ip`` default to the
    request's (``st.context``)."""
    if cookies is None:
        try:
            import streamlit as st
            cookies = dict(st.context.cookies)
            headers, ip = dict(st.context.headers), st.context.ip_address
        except Exception:  # noqa: BLE001 - no request context (a script run outside a server)
            cookies = {}
    token = xsrf_token(str(cookies.get(XSRF_COOKIE) or ""))
    browser = ("b-" + hashlib.sha256(b"xla-explorer-session:" + token).hexdigest()[:16]) if token \
        else "t-" + os.urandom(6).hex()
    return f"{_client_key(headers, ip)}/{browser}"


def upload_limit_mb() -> int:
    try:
        return Limits.from_env().upload_mb
    except ExplorerError:
        return Limits.upload_mb


def upload_error(upload) -> str | None:
    """The error line for an upload over the size limit, None when it may be read."""
    limit = upload_limit_mb()
    size = getattr(upload, "size", None)
    if size is None:
        size = len(upload.getvalue())
    if size > limit << 20:
        return (f"load error at {upload.name}: the file is {size / 2**20:.1f} MB, larger than the upload limit "
                f"({limit} MB; setting upload_mb / XLA_EXPLORER_UPLOAD_MB)")
    return None


JANITOR_S = 15.0
_janitor_lock = threading.Lock()
_janitor: threading.Thread | None = None


_closing: "weakref.WeakSet" = weakref.WeakSet()  # shut down, state not yet emptied


def _empty_session(session) -> bool:
    """Drop what a shut-down session holds (its state: upload, bundle, graphs; its fragments;
    its unsent messages; its download callables); False while its script run is still ending (it reads the state as it unwinds)."""
    if getattr(session, "_scriptrunner", None) is not None:
        return False
    # each replaced by an empty one of its kind: clearing in place misses parts (a widget's
    # metadata, which holds its functions and through them the page's globals, survives
    # SessionState.clear)
    for attr in ("_session_state",  # the upload, the bundle, the graphs, every widget
                 "_fragment_storage",  # fragments keep the arguments they were called with
                 "_browser_queue"):  # messages never sent to the closed tab
        try:
            setattr(session, attr, type(getattr(session, attr))())
        except Exception:  # noqa: BLE001 - another Streamlit's internals: leave them
            pass
    try:
        # a run stopped by the shutdown leaves the download callables it made (each holds what
        # it would write) until files are next swept, which only another run's end does
        from streamlit import runtime

        runtime.get_instance().media_file_mgr.remove_orphaned_files()
    except Exception:  # noqa: BLE001
        pass
    return True


def reap_expired_sessions() -> int:
    """Shut down the disconnected sessions whose reconnect time is over (see the module
    docstring); returns how many. 0 where the server is not a Streamlit one, or its session
    store is not the in-memory TTL cache this knows."""
    global _emptied
    try:
        from streamlit import runtime

        if not runtime.exists():
            return 0
        mgr = runtime.get_instance()._session_mgr
        cache = mgr._session_storage._cache
        lock = mgr._storage_lock
        expire = cache.expire
    except Exception:  # noqa: BLE001 - another Streamlit: leave its sessions to it
        return 0
    with lock:
        expired = expire()
    for _, info in expired:
        try:
            info.session.shutdown()
        except Exception:  # noqa: BLE001 - one session failing to shut down must not stop the others
            continue
        _closing.add(info.session)
    for session in list(_closing):
        if _empty_session(session):
            _closing.discard(session)
            _emptied += 1
    return len(expired)


_emptied = 0  # sessions emptied since the janitor last collected


def janitor_tick() -> None:
    """One round of the janitor: reap, then give memory back. The full collection runs only
    when a session was emptied (that is when a closed tab's cycles become garbage): it walks
    every live object with the GIL held (docs/performance.md), and every ``JANITOR_S`` that
    stalled every session's clicks and layouts."""
    global _emptied
    reap_expired_sessions()
    collect, _emptied = _emptied > 0, 0
    tuning.return_free_memory(collect)


def start_memory_janitor(interval_s: float = JANITOR_S) -> bool:
    """Start the process's one janitor thread (idempotent; without glibc it only reaps)."""
    global _janitor
    with _janitor_lock:
        if _janitor is not None and _janitor.is_alive():
            return True
        tuning.tune_allocator()

        def loop():
            ev = threading.Event()
            while not ev.wait(interval_s):
                janitor_tick()

        _janitor = threading.Thread(target=loop, name="xla-explorer-memory-janitor", daemon=True)
        _janitor.start()
        return True
