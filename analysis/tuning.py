"""How this process runs, tuned: Python's cyclic garbage collector and glibc's allocator. Every
such call of the project is in this module, and each is applied at a few named entry points;
``docs/performance.md`` has the measurement that earned each one its place.

- ``building()``: no cyclic collection while big structures are made (hundreds of thousands of
  objects, none garbage yet: a full pass walks them all, over and over). Entry points: a worker's
  job from compile to answer (``analysis.service.worker_main``), the parent's reading of a
  worker's messages (``analysis.service.worker``), a stage's parse for a bundle
  (``Bundle.module``), the app's graph payload (``app.graph_payload``) and the offline report
  (``analysis.render.report.html_report``).
- ``freeze()``: a worker that ends with its job puts the compile's objects into the collector's
  permanent generation once its answer's main part is made; they are freed when it exits.
- ``tune_allocator()`` / ``return_free_memory()``: the app server's glibc keeps big blocks
  mapped on their own and few arenas, and hands free pages back after a tab's memory is freed.

Reference counting frees everything as usual throughout; only reference cycles wait.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import threading
from contextlib import contextmanager

_lock = threading.Lock()
_paused = 0
_was_enabled = True


@contextmanager
def building():
    """No cyclic collection inside. The collector is process-wide, so the pause is counted:
    threads that pause it at once turn it back on when the last one is done, and a collector
    that was off stays off."""
    global _paused, _was_enabled
    with _lock:
        if _paused == 0:
            _was_enabled = gc.isenabled()
            gc.disable()
        _paused += 1
    try:
        yield
    finally:
        with _lock:
            _paused -= 1
            if _paused == 0 and _was_enabled:
                _to_oldest()
                gc.enable()


def _to_oldest() -> None:
    """What is alive as the last pause ends (what the pauses built: parses, a bundle, a page)
    goes to the collector's oldest generation without a pass over it. Turned back on with
    millions of new objects in its youngest generation, the collector would walk them all in
    its next young passes, and then in a full one (a 96-layer report: 0.26-0.41 s of passes
    right after the compile and after the page, docs/performance.md); in the oldest generation
    they wait for the next full collection, as everything long-lived does. (``gc.freeze`` and
    ``gc.unfreeze`` move whole generations, without visiting an object.) Nothing is done while
    something is frozen for good (``freeze``): unfreezing would undo that."""
    if gc.get_freeze_count() == 0:
        gc.freeze()
        gc.unfreeze()


def freeze() -> None:
    """Everything alive now goes into the collector's permanent generation (never walked again)."""
    gc.freeze()


def libc_call(name: str):
    """A function of glibc's allocator by name, or None where the C library has none (musl,
    macOS). No library does this for a Python process; ``ctypes`` reaches glibc's own call."""
    try:
        return getattr(ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6"), name)
    except (OSError, AttributeError):
        return None


# glibc's mallopt parameters (malloc.h)
M_MMAP_THRESHOLD, M_ARENA_MAX = -3, -8
MMAP_THRESHOLD = 1 << 20  # blocks this large come from (and go back to) the system one by one
ARENA_MAX = 2


def tune_allocator() -> bool:
    """Sets glibc's allocator for a server that holds big programs (True where it could):
    - blocks of ``MMAP_THRESHOLD`` and more are mapped on their own and unmapped when freed. By
      default the threshold follows the largest block freed (up to 32 MiB), so after the first
      big program the multi-megabyte texts of the next one are carved out of the heap and leave
      holes that ``malloc_trim`` cannot hand back;
    - at most ``ARENA_MAX`` arenas: each thread that allocates (the job queue's, the early
      parse, every script run) otherwise gets one of up to eight per core.
    The settings ``MALLOC_MMAP_THRESHOLD_`` / ``MALLOC_ARENA_MAX`` in the environment do the same,
    but only for a process started with them; this works however the app is started."""
    mallopt = libc_call("mallopt")
    if mallopt is None:
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(mallopt(M_ARENA_MAX, ARENA_MAX))


def return_free_memory(collect: bool = True) -> bool:
    """Collect cycles (unless ``collect`` is False: a full collection walks every live object)
    and ask glibc to hand free heap pages back to the system (``malloc_trim``); True when it
    trimmed."""
    if collect:
        gc.collect()
    trim = libc_call("malloc_trim")
    if trim is None:
        return False
    trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
    return bool(trim(0))
