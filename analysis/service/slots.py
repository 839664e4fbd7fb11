"""Worker slots and a job's processes, machine-wide.

A slot is a worker uid (``UID_BASE + N``, used when the app runs as root). Slots are shared by
every process on the machine (the app, a CLI, a second app): slot N is held by holding an flock
on ``<slot dir>/slot-N.lock``, which the kernel releases when the holder dies, so a crashed
process never leaks a slot. A slot whose uid still has processes (left by a process that was
killed) is skipped.

A job's processes are found by its token, an environment variable (``JOB_TOKEN_ENV``) every
process the job starts inherits: that is how the parent kills all of them, wherever they run
and whichever uid they have, and how tests check that none is left."""

from __future__ import annotations

import errno
import fcntl
import os
import re
import stat
import tempfile
import threading
from dataclasses import dataclass

from analysis.errors import ExplorerError
from analysis.service.cgroup import kill_until_gone

JOB_TOKEN_ENV = "XLA_EXPLORER_JOB_TOKEN"
UID_BASE = 61000  # worker slot N runs as uid/gid UID_BASE + N when the app runs as root
MAX_SLOTS = 512
SLOT_DIR_ENV = "XLA_EXPLORER_SLOT_DIR"


@dataclass
class Slot:
    n: int
    fd: int | None  # the held lock file; None for the in-process fallback


_slot_lock = threading.Lock()
_slots_used: set[int] = set()  # fallback when the slot folder cannot be used


def slot_dir() -> str:
    d = os.environ.get(SLOT_DIR_ENV)
    if d:
        return d
    base = "/run" if os.geteuid() == 0 and os.path.isdir("/run") and os.access("/run", os.W_OK) else tempfile.gettempdir()
    return os.path.join(base, f"xla-explorer-slots-{os.geteuid()}")


def _safe_slot_dir() -> str | None:
    """The slot folder, made if needed; None if it exists but is not safely ours (another user's,
    a link, writable by others)."""
    d = slot_dir()
    try:
        os.makedirs(d, mode=0o700, exist_ok=True)
        st = os.lstat(d)
    except OSError:
        return None
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & 0o022:
        return None
    return d


def take_slot() -> Slot:
    """A free worker slot, held until ``give_slot``; free across every process on this machine."""
    root = os.geteuid() == 0
    d = _safe_slot_dir()
    if d is None:
        with _slot_lock:
            n = 0
            while n in _slots_used:
                n += 1
            _slots_used.add(n)
            return Slot(n, None)
    for n in range(MAX_SLOTS):
        try:
            fd = os.open(os.path.join(d, f"slot-{n}.lock"), os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            os.close(fd)
            if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
                continue
            continue
        if root and tasks_of_uid(UID_BASE + n) > 0:  # leftovers of a killed parent still run as it
            os.close(fd)
            continue
        return Slot(n, fd)
    raise ExplorerError("limit", f"all {MAX_SLOTS} worker slots are taken on this machine; try again later")


def give_slot(slot: Slot) -> None:
    """Free a slot taken with ``take_slot``."""
    if slot.fd is None:
        with _slot_lock:
            _slots_used.discard(slot.n)
    else:
        os.close(slot.fd)


def tasks_of_uid(uid: int) -> int:
    """How many tasks (threads) run as ``uid`` on this machine."""
    n = 0
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/status") as f:
                st = f.read()
        except OSError:
            continue
        m = re.search(r"^Uid:\s+(\d+)", st, re.M)
        t = re.search(r"^Threads:\s+(\d+)", st, re.M)
        if m and int(m.group(1)) == uid:
            n += int(t.group(1)) if t else 1
    return n


# ----------------------------------------------------------------------------- processes


def processes_with_token(token: str) -> list[int]:
    """Pids of live processes started for the job whose environment carries ``token``."""
    needle = f"{JOB_TOKEN_ENV}={token}".encode()
    out = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                env = f.read()
            with open(f"/proc/{pid}/stat", "rb") as f:
                state = f.read().rsplit(b")", 1)[-1].split()[0]
        except OSError:
            continue
        if state != b"Z" and needle in env.split(b"\0"):
            out.append(int(pid))
    return out


def kill_job_processes(token: str, tries: int = 20) -> list[int]:
    """SIGKILL every process of a job (found by its token); returns the ones that would not die."""
    return kill_until_gone(lambda: processes_with_token(token), tries)
