"""A seccomp filter that forbids new user namespaces inside the sandbox.

A user namespace is extra kernel attack surface and a way around the worker's dropped
privileges; the worker needs none. Where bubblewrap makes the sandbox with a user namespace of
its own (``--unshare-user``, the app not running as root) ``bwrap --disable-userns`` forbids
more; when the app runs as root there is no such namespace, so this filter does it instead.
bubblewrap loads it (``--seccomp FD``) just before it starts the worker.

The filter is classic BPF, small enough to read whole:

- a system call of another architecture than the machine's (i386 or x32 calls on x86-64) fails
  with ``EPERM`` (otherwise they would bypass the checks by number);
- ``unshare`` and ``clone`` with ``CLONE_NEWUSER`` in their flags fail with ``EPERM``;
- ``clone3`` fails with ``ENOSYS`` (its flags are in memory, where a filter cannot look; the C
  library then falls back to ``clone``, which is checked);
- everything else is allowed.
"""

from __future__ import annotations

import errno
import os
import platform
import struct
import tempfile

CLONE_NEWUSER = 0x10000000

# architecture -> (AUDIT_ARCH value, {syscall name: number})
_ARCHES = {
    "x86_64": (0xC000003E, {"clone": 56, "unshare": 272, "clone3": 435}),
    "aarch64": (0xC00000B7, {"clone": 220, "unshare": 97, "clone3": 435}),
}

_LD_W_ABS, _JEQ, _JGE, _JSET, _RET = 0x20, 0x15, 0x35, 0x45, 0x06
_ALLOW = 0x7FFF0000
_ERRNO = 0x00050000


def supported() -> bool:
    return platform.machine() in _ARCHES


def program() -> bytes:
    """The filter as bytes of ``struct sock_filter`` (what ``bwrap --seccomp`` reads)."""
    arch, nr = _ARCHES[platform.machine()]
    eperm, enosys = _ERRNO | errno.EPERM, _ERRNO | errno.ENOSYS
    ins = [
        (_LD_W_ABS, 0, 0, 4),                 # 0: A = arch
        (_JEQ, 1, 0, arch),                   # 1: native arch -> 3
        (_RET, 0, 0, eperm),                  # 2: foreign arch: refuse
        (_LD_W_ABS, 0, 0, 0),                 # 3: A = syscall number
        (_JGE, 0, 1, 0x40000000),             # 4: x32 numbers ->
        (_RET, 0, 0, eperm),                  # 5:   refuse
        (_JEQ, 0, 1, nr["clone3"]),           # 6: clone3 ->
        (_RET, 0, 0, enosys),                 # 7:   ENOSYS (falls back to clone)
        (_JEQ, 2, 0, nr["unshare"]),          # 8: unshare -> 11
        (_JEQ, 1, 0, nr["clone"]),            # 9: clone -> 11
        (_RET, 0, 0, _ALLOW),                 # 10: anything else
        (_LD_W_ABS, 0, 0, 16),                # 11: A = low word of args[0] (the flags)
        (_JSET, 0, 1, CLONE_NEWUSER),         # 12: CLONE_NEWUSER ->
        (_RET, 0, 0, eperm),                  # 13:   refuse
        (_RET, 0, 0, _ALLOW),                 # 14: other flags: allow
    ]
    endian = "<" if struct.pack("=H", 1) == b"\x01\x00" else ">"
    return b"".join(struct.pack(endian + "HBBI", *i) for i in ins)


def program_fd() -> int | None:
    """A readable file descriptor holding the filter (the caller passes it to bwrap and closes
    it), or None where this architecture has no filter."""
    if not supported():
        return None
    f = tempfile.TemporaryFile()
    f.write(program())
    f.flush()
    f.seek(0)
    fd = os.dup(f.fileno())
    f.close()
    return fd
