"""What a job's cached bundle is keyed by: the content of everything that decides it
(``cache_key``: the code, options, backend, jax and jaxlib versions and the device kind), and the
devices JAX sees on this machine, asked once per machine of a kind and remembered in the store
(``device_probe``; a machine's first job runs beside its probe: ``LateKey``)."""

from __future__ import annotations

import importlib.metadata
import os
import platform
import threading
import warnings
from dataclasses import asdict

from analysis.bundle.core import SCHEMA_VERSION
from analysis.errors import ExplorerError
from analysis.service.job import Job, job_devices, job_source
from analysis.service.sandbox import gpu_device_nodes
from analysis.service.settings import Limits
from analysis.service.store import content_key
from analysis.service.worker import run_probe



def _version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "none"


def machine_fingerprint() -> dict:
    """What decides which devices JAX sees here, known without importing JAX."""
    return {"host": platform.node(), "machine": platform.machine(), "jax": _version("jax"),
            "jaxlib": _version("jaxlib"), "nvidia": gpu_device_nodes(),
            "env": {k: os.environ.get(k, "") for k in ("JAX_PLATFORMS", "CUDA_VISIBLE_DEVICES")}}


_probe_lock = threading.Lock()
probe_memo: dict[str, dict] = {}


def probe_meta_key() -> str:
    """The store's meta key for this machine's device probe."""
    return "probe:" + content_key(machine_fingerprint())[:32]


def device_probe(store=None, limits: Limits | None = None) -> dict:
    """The devices JAX sees on this machine (``worker.probe()``), asked once per machine and
    remembered in the store under the machine's fingerprint."""
    fp = probe_meta_key()
    with _probe_lock:
        stored = None
        if store is not None:
            try:
                stored = store.get_meta(fp)
            except ExplorerError as e:
                warnings.warn(e.one_line())
        if isinstance(stored, dict) and "backends" in stored:
            probe_memo[fp] = stored
            return stored
        found = probe_memo.get(fp) or run_probe(limits)
        probe_memo[fp] = found
        if store is not None:
            try:
                store.put_meta(fp, found)
            except ExplorerError as e:
                warnings.warn(e.one_line())
        return found


def forget_probes() -> None:
    """Forget the probes remembered in this process (the store keeps its own)."""
    with _probe_lock:
        probe_memo.clear()


def known_probe(store, unreadable=None) -> dict | None:
    """This machine's device probe if it was made before (here or in the store), else None;
    never runs one. A store that cannot be read now (busy, damaged) gives ``unreadable``."""
    fp = probe_meta_key()
    if fp in probe_memo:
        return probe_memo[fp]
    try:
        stored = store.get_meta(fp) if store is not None else None
    except ExplorerError:
        return unreadable
    return stored if isinstance(stored, dict) and "backends" in stored else None


class LateKey(threading.Thread):
    """A machine's first job: its device probe (a sandboxed Python with JAX, seconds:
    docs/performance.md) runs beside the job instead of before it, and the queue stores the
    bundle under the key it gives (``key``) once both are done. Nothing can be cached for this
    machine's kind before its probe anyway, unless the store was filled on another machine of the
    same kind: that one cache hit is given up."""

    def __init__(self, job: Job, store, limits: Limits):
        super().__init__(name="xla-explorer-device-probe", daemon=True)
        self.job, self.store, self.limits = job, store, limits
        self.start()

    def run(self) -> None:
        try:
            device_probe(self.store, self.limits)
        except ExplorerError as e:
            warnings.warn(f"device probe failed: {e.one_line()}")

    def key(self) -> str | None:
        """The job's cache key, once the probe is done (None if it failed). Called by the queue
        as the job ends, so the bundle is stored even when no one waits for it any more."""
        self.join(self.limits.timeout_s + 10)
        try:
            probe = known_probe(self.store)
            return cache_key(self.job, device_kind_for(self.job.backend, probe)) if probe is not None else None
        except Exception as e:  # noqa: BLE001 - the bundle is then not cached; the job is not failed
            warnings.warn(f"bundle not cached: {type(e).__name__}: {e}")
            return None


def device_kind_for(backend: str, probe: dict) -> str:
    b = probe.get("default", "cpu") if backend == "auto" else backend
    info = probe.get("backends", {}).get(b)
    return f"{b}:{info['device_kind']}x{info.get('count', 1)}" if info else f"{b}:absent"


def cache_key(job: Job, device_kind: str) -> str:
    """Content hash of everything that decides a job's bundle."""
    d = asdict(job)
    d.pop("peaks", None)  # how timings are judged, not what is measured
    d.pop("preview_kernels", None)  # when the bundle is first shown, not what it is
    if d.get("gpu_target") is None:
        d.pop("gpu_target", None)  # keys made before GPU targets existed stay valid
    if not d.get("inductor"):
        d.pop("inductor", None)  # keys made before the Inductor study existed stay valid
    d["source"] = job_source(job)
    d["devices"] = job_devices(job)  # as resolved: asked for, or the file's DEVICES
    if d["devices"] == 1:
        d.pop("devices")  # keys made before device counts existed stay valid
    versions = (_version("jax"), _version("jaxlib"))
    if d.get("jax") is None:
        d.pop("jax", None)  # keys made before runtimes existed stay valid
    else:  # the runtime's own versions (the version asked for until it is made)
        from analysis.service.runtimes import find

        r = find(job.jax)
        versions = (r.jax, r.jaxlib) if r is not None else (job.jax, job.jax)
    return content_key("bundle", SCHEMA_VERSION, d, *versions, device_kind)
