"""Runtimes: the jax releases a job can be compiled with, each an interpreter with one jax and
jaxlib (and the model libraries) in a virtual environment of its own.

A job names its runtime by jax version (``Job.jax``; None: the app's own). The worker for it is
that runtime's Python running this repository's ``analysis`` (on ``PYTHONPATH``, read-only in the
sandbox, as for any worker), under the same sandbox and limits (``worker_process``). A runtime is:

- the app's own environment (``sys.prefix``: its jax);
- one found beside it: ``<repo>/.venv`` and ``<repo>/.venv/jax-*`` (the suite's jax 0.10 leg,
  ``scripts/dev.sh``);
- one made here on first use, from the package registry with pip, under the data folder
  (``<data>/runtimes/jax-VERSION``): at most ``MAX_MADE`` of them, listed and removed with
  ``xla-explorer runtimes`` (``docs/runtimes.md``).

What differs between the releases inside the worker is ``analysis.compile.xla_release``: the
worker's code is one path for all of them. This module imports no JAX: it reads versions from
the environments' package metadata.
"""

from __future__ import annotations

import fcntl
import glob
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass

from analysis.errors import ExplorerError
from analysis.service.settings import REPO_ROOT, data_dir

# The releases offered: the newest of each minor version the worker's code runs on, with the
# oldest Python each runs on (jax 0.11 and later need 3.12). The app's own environment takes
# 0.10-0.12 (pyproject); 0.9 is offered as a runtime only (its compile of the gallery checked
# by hand, docs/runtimes.md; the suite runs on 0.10 and the newest).
RELEASES = {"0.12": ("0.12.0.1", (3, 12)), "0.11": ("0.11.2", (3, 12)), "0.10": ("0.10.2", (3, 11)),
            "0.9": ("0.9.2", (3, 11))}
PYTHONS = ((3, 13), (3, 12), (3, 11))  # the interpreters looked for, newest first
# What a runtime holds besides jax and jaxlib: what the worker imports (pyproject's dependencies
# that the worker's side needs; no Streamlit, no plotting) and the model libraries (frameworks)
WORKER_PACKAGES = ("google-re2>=1.1", "capstone>=5.0", "pyelftools>=0.31", "protobuf>=4.21")
# (upper bounds only: pip takes the newest each jax release works with; flax 0.12.8 needs jax 0.10)
FRAMEWORKS = ("flax<0.13", "equinox<0.14", "optax<0.3", "keras<3.16")
MAX_MADE = 4  # runtimes made under the data folder at once (each is ~1 GB)
MAKE_TIMEOUT_S = 1200
_VERSION = re.compile(r"^\d+\.\d+(\.\d+){0,2}$")


@dataclass(frozen=True)
class Runtime:
    """One runtime: its jax and jaxlib versions, its Python (``python``, the interpreter to run;
    ``python_version``, as ``3.11``), the environment's folder and whether it was made here (only
    those are removable)."""

    jax: str
    jaxlib: str
    python: str
    python_version: str
    prefix: str
    made: bool = False
    own: bool = False  # the app's own environment

    def line(self) -> str:
        where = "this app's own" if self.own else ("made here" if self.made else "found")
        return f"jax {self.jax:10s} jaxlib {self.jaxlib:10s} Python {self.python_version:5s} {where}: {self.prefix}"


def runtimes_dir(environ=None) -> str:
    return os.path.join(data_dir(environ), "runtimes")


def _dist_version(site: str, dist: str) -> str | None:
    for d in glob.glob(os.path.join(site, f"{dist}-*.dist-info")):
        m = re.match(rf"{dist}-([^-]+)\.dist-info$", os.path.basename(d))
        if m:
            return m.group(1)
    return None


def _of(prefix: str, made: bool = False, own: bool = False) -> Runtime | None:
    """The runtime in the environment at ``prefix``, or None when it has no jax or no Python."""
    python = os.path.join(prefix, "bin", "python")
    for site in sorted(glob.glob(os.path.join(prefix, "lib", "python3.*", "site-packages"))):
        jax, jaxlib = _dist_version(site, "jax"), _dist_version(site, "jaxlib")
        if jax and jaxlib and os.path.exists(python):
            pyv = os.path.basename(os.path.dirname(site))[len("python"):]
            return Runtime(jax, jaxlib, python, pyv, prefix, made, own)
    return None


def own() -> Runtime:
    """The app's own environment as a runtime (its interpreter is ``sys.executable``)."""
    import importlib.metadata as md

    def v(dist):
        try:
            return md.version(dist)
        except md.PackageNotFoundError:
            return "none"

    return Runtime(v("jax"), v("jaxlib"), sys.executable, "%d.%d" % sys.version_info[:2], sys.prefix, own=True)


def available(environ=None) -> list[Runtime]:
    """Every runtime on this machine, newest jax first: the app's own, the ones beside it
    (``<repo>/.venv``, ``<repo>/.venv/jax-*``) and the ones made here; one per jax version (the
    app's own first)."""
    found = [own()]
    for p in [os.path.join(REPO_ROOT, ".venv")] + sorted(glob.glob(os.path.join(REPO_ROOT, ".venv", "jax-*"))):
        r = _of(p)
        if r:
            found.append(r)
    for p in sorted(glob.glob(os.path.join(runtimes_dir(environ), "jax-*"))):
        if os.path.exists(os.path.join(p, ".complete")):
            r = _of(p, made=True)
            if r:
                found.append(r)
    out: dict[str, Runtime] = {}
    for r in found:
        out.setdefault(r.jax, r)
    return sorted(out.values(), key=lambda r: _key(r.jax), reverse=True)


def _key(version: str) -> tuple:
    return tuple(int(x) for x in re.findall(r"\d+", version))


def offered(environ=None) -> list[str]:
    """The jax versions a job may name here, newest first: every runtime present, and the newest
    release of each supported minor version that a Python on this machine runs (made on first use)."""
    have = {r.jax for r in available(environ)}
    for minor, (release, py) in RELEASES.items():
        if not any(_key(v)[:2] == _key(minor) for v in have) and find_python(py):
            have.add(release)
    return sorted(have, key=_key, reverse=True)


def find_python(oldest: tuple) -> str | None:
    """An interpreter of at least ``oldest`` (newest first): on the PATH, in pyenv, in uv."""
    for v in PYTHONS:
        if v < oldest:
            continue
        name = "python%d.%d" % v
        cands = [shutil.which(name)]
        root = os.environ.get("PYENV_ROOT") or os.path.expanduser("~/.pyenv")
        cands += sorted(glob.glob(os.path.join(root, "versions", "%d.%d*" % v, "bin", name)), reverse=True)
        cands += sorted(glob.glob(os.path.expanduser("~/.local/share/uv/python/cpython-%d.%d*/bin/" % v + name)))
        cands += ["/usr/local/bin/" + name, "/usr/bin/" + name]
        for c in cands:
            if c and os.path.exists(c) and _runs(c):
                return c
    return None


def _runs(python: str) -> bool:
    try:
        return subprocess.run([python, "-c", "import venv, ensurepip"], capture_output=True, timeout=30).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def check_version(version: str, flag: str = "--jax") -> str:
    """``version`` (``0.10.2``, or ``0.10`` for that minor's newest) checked: a release the
    worker's code reads. An ExplorerError in one line otherwise."""
    v = str(version).strip()
    if not _VERSION.match(v):
        raise ExplorerError("options", f"{flag} takes a jax version like 0.10.2, not {v[:40]!r}")
    if ".".join(map(str, _key(v)[:2])) not in RELEASES:
        raise ExplorerError("options", f"jax {v} is not offered: the worker's code runs on jax "
                                       + ", ".join(sorted(RELEASES, key=_key)) + " (docs/runtimes.md)")
    return v


def find(version: str, environ=None) -> Runtime | None:
    """The runtime present for ``version`` (a minor version names its newest one), else None."""
    v = check_version(version)
    for r in available(environ):
        if r.jax == v or (v.count(".") == 1 and _key(r.jax)[:2] == _key(v)):
            return r
    return None


def resolve(version: str | None, say=None, environ=None) -> Runtime:
    """The runtime a job naming ``version`` runs in (None: the app's own), made here first when it
    is not present (minutes: pip downloads jax; ``say`` hears that it is)."""
    if version is None:
        return own()
    return find(version, environ) or make(version, say, environ)


def make(version: str, say=None, environ=None) -> Runtime:
    """Make the runtime for jax ``version`` under the data folder: a venv of a Python that release
    runs on, with jax, jaxlib, the worker's packages and the model libraries from the registry."""
    v = check_version(version)
    minor = ".".join(map(str, _key(v)[:2]))
    release, oldest_py = RELEASES[minor]
    if v.count(".") == 1:
        v = release
    python = find_python(oldest_py)
    if python is None:
        raise ExplorerError("options", f"jax {v} needs Python {oldest_py[0]}.{oldest_py[1]} or later, and this machine "
                                       "has none (install one with pyenv or uv, then ask again)")
    root = runtimes_dir(environ)
    os.makedirs(root, exist_ok=True)
    with open(os.path.join(root, ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one make at a time, across processes
        r = find(v, environ)
        if r is not None:
            return r
        made = [r for r in available(environ) if r.made]
        if len(made) >= MAX_MADE:
            raise ExplorerError("options", f"{len(made)} runtimes are made here already, the most kept (jax "
                                           + ", ".join(r.jax for r in made)
                                           + "): remove one with `xla-explorer runtimes --remove VERSION`")
        prefix = os.path.join(root, f"jax-{v}")
        shutil.rmtree(prefix, ignore_errors=True)  # a make that did not finish
        if say:
            say(f"making the jax {v} runtime (first use: pip installs jax {v} into {prefix}; minutes)")
        try:
            _run([python, "-m", "venv", prefix])
            pip = [os.path.join(prefix, "bin", "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
            _run(pip + [f"jax=={v}", f"jaxlib=={v}", *WORKER_PACKAGES, *FRAMEWORKS])
        except ExplorerError:
            shutil.rmtree(prefix, ignore_errors=True)
            raise
        open(os.path.join(prefix, ".complete"), "w").close()
        r = _of(prefix, made=True)
        if r is None or r.jax != v:
            shutil.rmtree(prefix, ignore_errors=True)
            raise ExplorerError("run", f"the jax {v} runtime was made without jax {v} in it")
        return r


def _run(argv: list) -> None:
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=MAKE_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise ExplorerError("run", f"cannot make the runtime: {' '.join(map(str, argv[:4]))}: {e}") from None
    if p.returncode != 0:
        lines = [ln for ln in p.stderr.splitlines() if ln.startswith("ERROR")] or p.stderr.strip().splitlines() or [""]
        raise ExplorerError("run", f"cannot make the runtime: {lines[-1][:300]}")


def remove(version: str, environ=None) -> Runtime:
    """Remove the runtime made here for ``version`` (one found beside the app is not ours to remove)."""
    r = find(version, environ)
    if r is None:
        raise ExplorerError("options", f"no runtime for jax {version} here")
    if not r.made:
        raise ExplorerError("options", f"the jax {r.jax} runtime was not made here ({r.prefix}): it is not removed")
    shutil.rmtree(r.prefix)
    return r
