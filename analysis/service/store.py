"""The store: bundles by content hash, pasted code by short id, and per-machine facts, in SQLite.

One file (``analysis.service.settings.store_path()``: ``$XLA_EXPLORER_DATA/store.sqlite``, else
``<repo>/data/store.sqlite``) in WAL
mode, so it survives restarts and many readers plus concurrent writers (several app processes,
the CLI). Every way the file can be wrong — not SQLite, another program's database, a damaged
row — is an ``ExplorerError`` of phase ``store``; nothing here crashes on it, and one damaged
row never costs the others.

Tables: ``meta`` (key/value: our marker and schema, probe results), ``bundles`` (cache key ->
zlib-compressed Bundle JSON + a few columns to list them by), ``code`` (short id -> source).
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import os
import sqlite3
import threading
import time
import zlib
from typing import Callable, Iterator

from analysis.bundle.core import Bundle
from analysis.bundle.checks import drop_object_files
from analysis.errors import ExplorerError
from analysis.service.settings import Limits, store_path

APP_MARKER = "xla-explorer-store"
STORE_SCHEMA = 1

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS bundles (
    key TEXT PRIMARY KEY, created REAL NOT NULL, name TEXT, backend TEXT, device_kind TEXT,
    jax TEXT, size INTEGER NOT NULL, data BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS code (id TEXT PRIMARY KEY, created REAL NOT NULL, source TEXT NOT NULL);
"""


class StoreBusy(ExplorerError):
    """The store stayed locked by another process for longer than ``Store.busy_s``."""


_SQLITE_WAIT_S = 0.2  # SQLite's own busy wait per attempt (``Store._retry`` repeats it)


def _is_busy(e: Exception) -> bool:
    m = str(e).lower()
    return "locked" in m or "busy" in m


def default_path() -> str:
    return store_path()


def content_key(*parts) -> str:
    """A stable hash of JSON-able parts (sorted keys), hex."""
    text = json.dumps(parts, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


class Store:
    """A handle on one store file. Thread-safe: one SQLite connection per thread."""

    def __init__(self, path: str | None = None, busy_s: float | None = None):
        self.path = os.path.abspath(path or default_path())
        self._local = threading.local()
        self._init_lock = threading.Lock()
        self._ready = False
        if busy_s is None:
            try:
                busy_s = Limits.from_env().store_busy_s
            except ExplorerError:
                busy_s = Limits.store_busy_s
        self.busy_s = float(busy_s)  # how long a call waits for another process's write
        # until when a call does not wait again once one has waited busy_s in vain: a page makes
        # several store calls, and each waiting its own busy_s left it blank for most of a minute
        self._busy_until = 0.0

    # -- waiting for a busy store -------------------------------------------------------------

    @contextlib.contextmanager
    def waiting(self, on_wait: Callable[[], None] | None):
        """Within the block, ``on_wait()`` is called (once per call, in this thread) when the store
        is busy and the call starts waiting for it: a UI can say so."""
        old = getattr(self._local, "on_wait", None)
        self._local.on_wait = on_wait
        try:
            yield
        finally:
            self._local.on_wait = old

    def _busy_error(self, what: str) -> ExplorerError:
        return StoreBusy("store", f"store busy: another process kept the store locked for more than "
                                      f"{self.busy_s:g} s ({what}); try again", self.path)

    def _retry(self, what: str, fn):
        """``fn()``, retried while SQLite says the file is locked, for up to ``busy_s``; then a
        "store busy" error (never "damaged")."""
        deadline = None
        while True:
            try:
                return fn()
            except sqlite3.OperationalError as e:
                if not _is_busy(e):
                    raise
                now = time.monotonic()
                if deadline is None:
                    # (a call found busy within the last busy_s: one try, no wait)
                    deadline = now + (0.0 if now < self._busy_until else self.busy_s)
                    cb = getattr(self._local, "on_wait", None)
                    if cb is not None:
                        try:
                            cb()
                        except Exception:  # noqa: BLE001 - a UI callback must not break the store
                            pass
                if now >= deadline:
                    self._busy_until = now + self.busy_s  # (each call found busy extends it)
                    raise self._busy_error(what) from None
                time.sleep(0.05)

    # -- connection -------------------------------------------------------------------------

    def _error(self, what: str, e: Exception | str) -> ExplorerError:
        return ExplorerError("store", f"{what}: {e}", self.path)

    def _conn(self) -> sqlite3.Connection:
        c = getattr(self._local, "conn", None)
        if c is not None:
            return c
        try:
            os.makedirs(os.path.dirname(self.path), exist_ok=True)
            # SQLite waits briefly itself; the rest of the wait is ours (``_retry``), so that a
            # caller can be told, and a lock that stays is "busy", never "damaged".
            c = sqlite3.connect(self.path, timeout=_SQLITE_WAIT_S, isolation_level=None, check_same_thread=False)
            c.execute(f"PRAGMA busy_timeout={int(_SQLITE_WAIT_S * 1000)}")
        except (sqlite3.Error, OSError) as e:
            raise self._error("cannot open the store", e) from None
        try:
            with self._init_lock:
                if not self._ready:
                    self._check_and_init(c)
                    self._ready = True
        except BaseException:
            c.close()
            raise
        self._local.conn = c
        return c

    def _check_and_init(self, c: sqlite3.Connection) -> None:
        # Check and create in one write transaction, so two processes opening a new file at
        # once cannot see each other's half-made schema.
        try:
            self._retry("opening it", lambda: c.execute("BEGIN IMMEDIATE"))
        except sqlite3.DatabaseError as e:
            raise self._error("the store file is damaged or not an SQLite database", e) from None
        try:
            self._check_schema(c)
            for stmt in _SCHEMA.strip().split(";"):
                if stmt.strip():
                    c.execute(stmt)
            c.execute("INSERT OR IGNORE INTO meta VALUES ('app', ?)", (APP_MARKER,))
            c.execute("INSERT OR IGNORE INTO meta VALUES ('schema', ?)", (str(STORE_SCHEMA),))
            c.execute("COMMIT")
        except sqlite3.DatabaseError as e:
            if c.in_transaction:
                c.execute("ROLLBACK")
            raise self._error("cannot set up the store", e) from None
        except BaseException:
            if c.in_transaction:
                c.execute("ROLLBACK")
            raise
        # WAL is a property of the file: once one handle has switched it, the others find it so.
        # Switching needs a moment with no other reader, and SQLite answers "database is locked"
        # at once rather than waiting (the busy timeout does not cover it), so retry briefly.
        last: Exception | None = None
        tries = max(100, int(self.busy_s / 0.04)) if time.monotonic() >= self._busy_until else 1
        for attempt in range(tries):
            try:
                mode = c.execute("PRAGMA journal_mode").fetchone()[0]
                if str(mode).lower() != "wal":
                    mode = c.execute("PRAGMA journal_mode=WAL").fetchone()[0]
                self.journal_mode = mode
                return
            except sqlite3.OperationalError as e:
                last = e
                time.sleep(0.02 + 0.01 * (attempt % 5))
            except sqlite3.DatabaseError as e:
                raise self._error("cannot switch the store to WAL mode", e) from None
        if last is not None and _is_busy(last):
            self._busy_until = time.monotonic() + self.busy_s
            raise self._busy_error("switching it to WAL mode")
        raise self._error("cannot switch the store to WAL mode", last)

    def _check_schema(self, c: sqlite3.Connection) -> None:
        try:
            tables = {r[0] for r in c.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        except sqlite3.DatabaseError as e:
            raise self._error("the store file is damaged or not an SQLite database", e) from None
        if not tables:
            return
        if "meta" not in tables:
            raise self._error("not an XLA Explorer store", f"it holds other tables ({', '.join(sorted(tables)[:5])})")
        try:
            marker = dict(c.execute("SELECT key, value FROM meta WHERE key IN ('app', 'schema')"))
        except sqlite3.DatabaseError as e:
            raise self._error("the store file is damaged", e) from None
        if marker.get("app") != APP_MARKER:
            raise self._error("not an XLA Explorer store", "its meta table has no XLA Explorer marker")
        if int(marker.get("schema", 0)) > STORE_SCHEMA:
            raise self._error("the store was written by a newer XLA Explorer", f"schema {marker.get('schema')}")

    def _run(self, what: str, sql: str, args=()) -> list:
        c = self._conn()
        try:
            return self._retry(what, lambda: c.execute(sql, args).fetchall())
        except sqlite3.DatabaseError as e:
            raise self._error(what, e) from None

    def close(self) -> None:
        c = getattr(self._local, "conn", None)
        if c is not None:
            c.close()
            self._local.conn = None

    def check(self) -> tuple[bool, str]:
        """``(ok, message)`` for a status line: opens the store and runs SQLite's quick check."""
        try:
            r = self._run("integrity check failed", "PRAGMA quick_check")
        except ExplorerError as e:
            return False, e.one_line()
        ok = bool(r) and r[0][0] == "ok"
        return ok, "store ok" if ok else f"store damaged: {r[0][0] if r else '?'}"

    # -- bundles ----------------------------------------------------------------------------

    def put_bundle(self, key: str, bundle: Bundle) -> None:
        data = zlib.compress(bundle.to_json().encode(), 6)
        env = bundle.environment or {}
        self._run("cannot store the bundle",
                  "INSERT OR REPLACE INTO bundles VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                  (key, time.time(), bundle.title, (bundle.options or {}).get("backend"), env.get("device_kind"),
                   env.get("jax"), len(data), data))

    def get_bundle(self, key: str) -> Bundle | None:
        """The bundle stored under ``key``, None if there is none; a damaged row is a ``store`` error."""
        rows = self._run("cannot read the bundle", "SELECT data FROM bundles WHERE key = ?", (key,))
        if not rows:
            return None
        try:
            text = zlib.decompress(rows[0][0])
        except (zlib.error, TypeError) as e:
            raise self._error(f"the stored bundle {key[:12]} is damaged", e) from None
        try:
            d = json.loads(text)
        except (ValueError, UnicodeDecodeError, RecursionError) as e:
            raise self._error(f"the stored bundle {key[:12]} is damaged", str(e)) from None
        drop_object_files(d)  # (a store written before workers disassembled them held some)
        try:
            return Bundle.from_dict(d)
        except ExplorerError as e:
            raise self._error(f"the stored bundle {key[:12]} is damaged", e.message) from None

    def bundle_keys(self) -> list[str]:
        return [r[0] for r in self._run("cannot list bundles", "SELECT key FROM bundles ORDER BY created")]

    def recent(self, n: int = 20) -> list[dict]:
        rows = self._run("cannot list bundles", "SELECT key, created, name, backend, device_kind, jax, size "
                         "FROM bundles ORDER BY created DESC LIMIT ?", (n,))
        cols = ("key", "created", "name", "backend", "device_kind", "jax", "size")
        return [dict(zip(cols, r)) for r in rows]

    # -- code by short id -------------------------------------------------------------------

    def put_code(self, source: str) -> str:
        """Store ``source``; returns its short id (the same id for the same text)."""
        if not isinstance(source, str):
            raise ExplorerError("store", "code must be text")
        digest = base64.b32encode(hashlib.sha256(source.encode()).digest()).decode().lower().rstrip("=")
        for n in range(8, len(digest) + 1):
            cid = digest[:n]
            rows = self._run("cannot read code", "SELECT source FROM code WHERE id = ?", (cid,))
            if rows and rows[0][0] == source:
                return cid
            if not rows:
                try:
                    self._run("cannot store code", "INSERT INTO code VALUES (?, ?, ?)", (cid, time.time(), source))
                    return cid
                except StoreBusy:
                    raise
                except ExplorerError:
                    rows = self._run("cannot read code", "SELECT source FROM code WHERE id = ?", (cid,))
                    if rows and rows[0][0] == source:  # another writer stored it first
                        return cid
        raise ExplorerError("store", "cannot find a free id for this code", self.path)

    def get_code(self, cid: str) -> str | None:
        rows = self._run("cannot read code", "SELECT source FROM code WHERE id = ?", (str(cid).strip().lower(),))
        return rows[0][0] if rows else None

    # -- meta -------------------------------------------------------------------------------

    def get_meta(self, key: str):
        rows = self._run("cannot read meta", "SELECT value FROM meta WHERE key = ?", (key,))
        if not rows:
            return None
        try:
            return json.loads(rows[0][0])
        except ValueError:
            return None

    def put_meta(self, key: str, value) -> None:
        if key in ("app", "schema"):
            raise ExplorerError("store", f"meta key {key!r} is reserved")
        self._run("cannot write meta", "INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, json.dumps(value)))

    def __iter__(self) -> Iterator[str]:
        return iter(self.bundle_keys())


_default: Store | None = None
_default_lock = threading.Lock()


def default_store() -> Store:
    """The process-wide store at ``default_path()`` (created on first use)."""
    global _default
    with _default_lock:
        if _default is None or _default.path != os.path.abspath(default_path()):
            _default = Store()
        return _default
