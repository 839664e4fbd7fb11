"""``gc_paused()``: no cyclic garbage collection while a big structure is built.

Python's collector runs a full pass over every tracked object each time enough new ones have
been made; while a 12,000-op program's modules, kernels, decisions and graphs are built (hundreds
of thousands of objects, none of them garbage yet) those passes took a fifth of the time from
compile to first graph (benchmarks/scaling.py, N=96: 10.4-11.5 s with them, 8.2-8.9 s without).
Reference counting still frees everything as usual; only reference cycles wait, until the pause
ends. The collector is process-wide, so the pause is counted: threads that pause it at once
turn it back on when the last one is done.
"""

from __future__ import annotations

import gc
import threading
from contextlib import contextmanager

_lock = threading.Lock()
_paused = 0
_was_enabled = True


@contextmanager
def gc_paused():
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
                gc.enable()
