"""A seccomp filter that forbids new user namespaces inside the sandbox, and the kernel's
shared state and extra attack surface a worker never needs (keyrings, io_uring, BPF, ptrace).

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
- the kernel keyrings (``add_key``, ``keyctl``, ``request_key``) fail with ``EPERM``: a uid's
  keyrings outlive its processes, so one job of a worker uid could read the keys another job
  of that uid left (the sandbox makes no new keyring);
- ``bpf`` and ``ptrace`` fail with ``EPERM``; ``io_uring_setup``, ``_enter`` and ``_register``
  with ``ENOSYS`` (as on a kernel without io_uring, so a library falls back to plain calls);
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
ARCHES = {
    "x86_64": (0xC000003E, {"clone": 56, "unshare": 272, "clone3": 435, "ptrace": 101, "add_key": 248,
                            "request_key": 249, "keyctl": 250, "bpf": 321, "io_uring_setup": 425,
                            "io_uring_enter": 426, "io_uring_register": 427}),
    "aarch64": (0xC00000B7, {"clone": 220, "unshare": 97, "clone3": 435, "ptrace": 117, "add_key": 217,
                             "request_key": 218, "keyctl": 219, "bpf": 280, "io_uring_setup": 425,
                             "io_uring_enter": 426, "io_uring_register": 427}),
}
REFUSED = ("add_key", "keyctl", "request_key", "bpf", "ptrace")  # EPERM
NOT_HERE = ("clone3", "io_uring_setup", "io_uring_enter", "io_uring_register")  # ENOSYS

_LD_W_ABS, _JEQ, _JGE, _JSET, _RET = 0x20, 0x15, 0x35, 0x45, 0x06
_ALLOW = 0x7FFF0000
_ERRNO = 0x00050000


def supported() -> bool:
    return platform.machine() in ARCHES


def program() -> bytes:
    """The filter as bytes of ``struct sock_filter`` (what ``bwrap --seccomp`` reads)."""
    arch, nr = ARCHES[platform.machine()]
    eperm, enosys = _ERRNO | errno.EPERM, _ERRNO | errno.ENOSYS
    refused, not_here = [nr[n] for n in REFUSED], [nr[n] for n in NOT_HERE]
    # the checks of the syscall number; "-> NAME" jumps to the instruction of that label below
    checks = [(n, "eperm") for n in refused] + [(n, "enosys") for n in not_here] \
        + [(nr["unshare"], "flags"), (nr["clone"], "flags")]
    head = [
        (_LD_W_ABS, 0, 0, 4),                 # A = arch
        (_JEQ, 1, 0, arch),                   # native arch -> skip the next
        (_RET, 0, 0, eperm),                  # foreign arch: refuse
        (_LD_W_ABS, 0, 0, 0),                 # A = syscall number
        (_JGE, 0, 1, 0x40000000),             # x32 numbers ->
        (_RET, 0, 0, eperm),                  #   refuse
    ]
    tail = {  # label -> its instructions, in this order after the checks (a check that does not
        #      match goes on to the next, the last one to "allow")
        "allow": [(_RET, 0, 0, _ALLOW)],      # anything else: the checks fall through to here
        "eperm": [(_RET, 0, 0, eperm)],
        "enosys": [(_RET, 0, 0, enosys)],
        "flags": [(_LD_W_ABS, 0, 0, 16),      # A = low word of args[0] (clone's, unshare's flags)
                  (_JSET, 0, 1, CLONE_NEWUSER),  # CLONE_NEWUSER ->
                  (_RET, 0, 0, eperm),        #   refuse
                  (_RET, 0, 0, _ALLOW)],      # other flags: allow
    }
    at, where = len(head) + len(checks), {}
    for label, block in tail.items():
        where[label] = at
        at += len(block)
    ins = list(head)
    for i, (number, label) in enumerate(checks):
        here = len(head) + i
        ins.append((_JEQ, where[label] - here - 1, 0, number))  # (offsets count from the next one)
    for block in tail.values():
        ins.extend(block)
    assert all(0 <= jt < 256 for _, jt, _, _ in ins)
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
