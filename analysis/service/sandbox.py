"""The sandbox: the bubblewrap (``bwrap``) command line a worker is started in, the probe of
whether bubblewrap can run here, and the status that says so.

Every model that is not a built-in gallery entry runs in a worker (``analysis.service.worker``)
started inside bubblewrap (``analysis.service.worker_process``, with this command line):

- new network, PID, IPC and UTS namespaces: no network at all, the worker sees only its own
  processes, and when the sandbox's init dies every process in it dies;
- a fresh root with only ``/usr`` (read-only), the Python interpreter's prefix and the virtual
  environment (read-only), the repository's ``analysis/`` and ``sample_models/`` (read-only),
  a private ``/tmp`` and ``/scratch`` (tmpfs of a bounded size, gone with the sandbox); the
  home folder, the rest of the repository and the app's store are not there at all;
- NVIDIA device nodes (``/dev/nvidia*``) and ``/sys`` (read-only) are bound only when present;
- when the app runs as root, the worker drops to an unprivileged user id of its own (one per
  worker slot, slots shared by every process on the machine through a lock folder) with no
  capabilities and ``no_new_privs``, so the process limit is enforced.

Resource limits (``Limits``): wall-clock timeout (the whole sandbox is killed), CPU seconds,
address space (or data segment on GPU machines, where CUDA needs a huge address space) per
process, memory and processes for the whole job together (``analysis.service.cgroup``: a cgroup
per job where the machine allows one, else a watchdog), the sizes of ``/tmp`` and ``/scratch``
(tmpfs, ``bwrap --size``), file size, and the bytes read back from the worker's stdout/stderr.
New user namespaces are refused inside the sandbox (``bwrap --disable-userns`` or the seccomp
filter of ``analysis.service.seccomp``).

Where bubblewrap cannot run, workers run with the limits only, and ``sandbox_status()`` says
so: ``(False, reason)``. The UI and the CLI show that warning; it is never silent.

The limits and the sandbox mode come from ``analysis.service.settings``; the slots (uids) and
a job's processes are ``analysis.service.slots``; how a worker failed, in words, is
``analysis.service.failure``. See ``docs/worker.md``.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
import threading

from analysis.errors import ExplorerError
from analysis.service import cgroup, seccomp
from analysis.service.settings import REPO_ROOT, Limits
from analysis.service.slots import JOB_TOKEN_ENV, UID_BASE

BWRAP = shutil.which("bwrap") or "/usr/bin/bwrap"


def gpu_device_nodes() -> list[str]:
    """The NVIDIA device nodes a GPU worker's sandbox binds."""
    return sorted(p for p in glob.glob("/dev/nvidia*") if not os.path.isdir(p) or p.endswith("caps"))


def cuda_plugin_installed() -> bool:
    """JAX's CUDA plugin is installed (found without importing it): JAX then loads the CUDA
    libraries at start, even on a machine without a GPU, and they need a huge address space."""
    import importlib.util
    return any(importlib.util.find_spec(m) is not None for m in ("jax_cuda12_plugin", "jax_cuda13_plugin"))


def torch_cuda_installed(python: str) -> bool:
    """The runtime of interpreter ``python`` (a venv's ``bin/python``) holds a CUDA build of
    PyTorch (found by its files, without importing it): importing torch then maps CUDA's
    libraries, 3 GB of address space it never touches (measured with torch 2.13's CUDA build)."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(python)))
    return bool(glob.glob(os.path.join(root, "lib", "python3*", "site-packages", "torch", "lib", "libtorch_cuda*.so")))


def gpu_present() -> bool:
    """A GPU JAX can use is here: an NVIDIA device node and JAX's CUDA plugin (checked without
    importing JAX). The one test of it: the workers' sandbox and the app's choices both use it."""
    return bool(gpu_device_nodes()) and cuda_plugin_installed()


# ----------------------------------------------------------------------------- status

_probe_lock = threading.Lock()
_bwrap_works: tuple[bool, str] | None = None  # bubblewrap probed once per process


def sandbox_status(limits: Limits | None = None, refresh: bool = False) -> tuple[bool, str]:
    """``(isolated, reason)``: whether workers started with ``limits`` (default: the settings)
    run inside bubblewrap. False when the settings turn the sandbox off (any way they can: the
    settings file, ``XLA_EXPLORER_SANDBOX``, a ``Limits`` handed in) or bubblewrap cannot run."""
    try:
        mode = (limits or Limits.from_env()).sandbox
    except ExplorerError as e:  # unreadable settings: say so where the warning is shown
        return False, f"the settings cannot be read ({e.one_line()}): user code would run unsandboxed"
    if mode == "off":
        return False, ("sandbox turned off in the settings (sandbox = \"off\" or XLA_EXPLORER_SANDBOX=off): "
                       "user code runs with resource limits only")
    return bwrap_status(refresh)


def bwrap_status(refresh: bool = False) -> tuple[bool, str]:
    """Whether bubblewrap can make a sandbox on this machine: probed once (a tiny sandbox that
    must come up without network) and remembered; ``refresh`` probes again."""
    global _bwrap_works
    with _probe_lock:
        if _bwrap_works is None or refresh:
            _bwrap_works = _probe_bwrap()
        return _bwrap_works


def _probe_bwrap() -> tuple[bool, str]:
    if not os.path.exists(BWRAP):
        return False, "bubblewrap (bwrap) is not installed: user code runs with resource limits only"
    fd = seccomp.program_fd() if use_seccomp() else None
    try:
        argv = bwrap_argv(slot=0, gpu=False, limits=Limits(), seccomp_fd=fd) + ["/usr/bin/true"]
        try:
            p = subprocess.run(argv, capture_output=True, text=True, timeout=20, env=sandbox_env(None),
                               pass_fds=(fd,) if fd is not None else ())
        except (OSError, subprocess.TimeoutExpired) as e:
            return False, f"bubblewrap cannot start ({e}): user code runs with resource limits only"
        if p.returncode != 0:
            why = (p.stderr.strip().splitlines() or [f"exit {p.returncode}"])[-1]
            return False, f"bubblewrap cannot create a sandbox here ({why}): user code runs with resource limits only"
        return True, "isolated: bubblewrap sandbox without network, read-only system, " + _walls()
    finally:
        if fd is not None:
            os.close(fd)


def _walls() -> str:
    """What bounds a job besides the namespaces, in words (the status line's tail)."""
    f = bwrap_features()
    tmp = "/tmp and /scratch private tmpfs of a bounded size" if "size" in f else \
        "/tmp and /scratch private tmpfs (this bwrap cannot bound their size)"
    if os.geteuid() != 0 and "disable-userns" in f:
        userns = "new user namespaces refused (bwrap --disable-userns)"
    elif use_seccomp():
        userns = "new user namespaces refused (seccomp)"
    else:
        userns = "new user namespaces NOT refused (no filter for this machine)"
    return f"{tmp}; {userns}; {cgroup.mechanism().describe()}"


_features: frozenset | None = None


def bwrap_features() -> frozenset:
    """The options of the installed bwrap this module uses when present: ``size`` (tmpfs size),
    ``disable-userns``, ``seccomp``."""
    global _features
    if _features is None:
        try:
            text = subprocess.run([BWRAP, "--help"], capture_output=True, text=True, timeout=10).stdout
        except (OSError, subprocess.TimeoutExpired):
            text = ""
        _features = frozenset(n for n in ("size", "disable-userns", "seccomp") if f"--{n} " in text)
    return _features


def use_seccomp() -> bool:
    return seccomp.supported() and "seccomp" in bwrap_features()


# ----------------------------------------------------------------------------- command line


def _ancestors(path: str) -> list[str]:
    out = []
    p = os.path.dirname(path)
    while p and p != "/":
        out.append(p)
        p = os.path.dirname(p)
    return out[::-1]


def _ro_paths(python: str | None = None) -> list[str]:
    """Host paths the worker needs, read-only: interpreter, venv, our code. ``python``: a
    runtime's interpreter (``analysis.service.runtimes``; its venv and base installation are
    bound instead of this process's)."""
    if python is None or python == sys.executable:
        python, prefixes = sys.executable, [sys.base_prefix, sys.prefix]
    else:  # <venv>/bin/python, a link to <base>/bin/pythonX.Y
        prefixes = [os.path.dirname(os.path.dirname(os.path.realpath(python))), os.path.dirname(os.path.dirname(python))]
    paths = [os.path.realpath(prefixes[0]), os.path.realpath(prefixes[1]), prefixes[1],
             os.path.join(REPO_ROOT, "analysis"), os.path.join(REPO_ROOT, "sample_models")]
    exe_dir = os.path.dirname(os.path.realpath(python))
    if not any(exe_dir == p or exe_dir.startswith(p + "/") for p in paths):
        paths.append(exe_dir)
    for d in os.environ.get("LD_LIBRARY_PATH", "").split(":"):  # e.g. a CUDA driver outside /usr
        if d and os.path.isdir(d):
            paths.append(os.path.realpath(d))
    out: list[str] = []
    for p in paths:
        if p.startswith("/usr/") or p == "/usr" or not os.path.exists(p):
            continue
        if p not in out:
            out.append(p)
    # Parents before children so a child bind lands on top of its parent's.
    return sorted(out, key=lambda p: (p.count("/"), p))


def bwrap_argv(slot: int, gpu: bool, limits: Limits, seccomp_fd: int | None = None,
               python: str | None = None) -> list[str]:
    """bwrap's command line for a worker in ``slot`` (its uid, when the app runs as root), up to
    the worker's own command, which follows it; ``python``, the runtime's interpreter it runs
    (None: this process's)."""
    feats = bwrap_features()
    a = [BWRAP, "--unshare-net", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
         "--die-with-parent", "--new-session", "--hostname", "sandbox"]
    root = os.geteuid() == 0
    if not root:
        a += ["--unshare-user"]
        if "disable-userns" in feats:
            a += ["--disable-userns"]
    else:
        # Keep just enough capability for setpriv to drop to the slot's uid; then none at all.
        a += ["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
    if seccomp_fd is not None:
        a += ["--seccomp", str(seccomp_fd)]
    a += ["--ro-bind", "/usr", "/usr"]
    for top in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        p = "/" + top
        if os.path.islink(p):
            a += ["--symlink", os.readlink(p), p]
        elif os.path.isdir(p):
            a += ["--ro-bind", p, p]
    for f in ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/localtime", "/etc/nsswitch.conf"):
        if os.path.exists(f):
            a += ["--ro-bind", f, f]
    a += ["--proc", "/proc", "--dev", "/dev"]
    # /tmp and /scratch (home and working folder) live in host memory: each has a size.
    for mount, mb in (("/tmp", limits.tmp_mb), ("/scratch", limits.scratch_mb)):
        a += ["--perms", "1777"]
        if "size" in feats:
            a += ["--size", str(int(mb) << 20)]
        a += ["--tmpfs", mount]
    made = {"/tmp", "/scratch"}
    for p in _ro_paths(python):
        for d in _ancestors(p):
            if d not in made:
                a += ["--perms", "0755", "--dir", d]
                made.add(d)
        a += ["--ro-bind", p, p]
        made.add(p)
    a += ["--chdir", "/scratch"]
    if gpu:
        for node in gpu_device_nodes():
            a += ["--dev-bind", node, node]
        if os.path.isdir("/sys"):
            a += ["--ro-bind", "/sys", "/sys"]
    if root:
        uid = UID_BASE + slot
        a += ["/usr/bin/setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--inh-caps=-all",
              "--bounding-set=-all", "--no-new-privs", "--"]
    return a


# Environment variables passed on to a worker when set (a spare is kept only for the same ones);
# XLA_EXPLORER_GPU_TOOLS=1: ptxas and nvdisasm on a GPU compile's PTX (analysis.compile.code_gpu)
PASSED_ENV = ("JAX_PLATFORMS", "CUDA_VISIBLE_DEVICES", "LD_LIBRARY_PATH", "XLA_FLAGS", "JAX_ENABLE_X64",
              "XLA_EXPLORER_GPU_TOOLS")


def sandbox_env(token: str | None, extra: dict | None = None) -> dict:
    """The whole environment of a sandboxed worker (``token``: the job's, see ``slots``)."""
    env = {"PATH": "/usr/bin:/bin", "HOME": "/scratch", "TMPDIR": "/tmp", "LANG": "C.UTF-8",
           "PYTHONPATH": REPO_ROOT, "PYTHONDONTWRITEBYTECODE": "1", "PYTHONUNBUFFERED": "1",
           "XDG_CACHE_HOME": "/scratch/.cache", "MPLCONFIGDIR": "/scratch/.mpl",
           "TF_CPP_MIN_LOG_LEVEL": "2", "XLA_PYTHON_CLIENT_PREALLOCATE": "false"}
    for k in PASSED_ENV:
        if os.environ.get(k):
            env[k] = os.environ[k]
    if token:
        env[JOB_TOKEN_ENV] = token
    env.update(extra or {})
    return env
