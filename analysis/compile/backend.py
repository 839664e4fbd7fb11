"""Where a compile runs: the device for a backend name or a GPU target, and the environment a
Bundle records (versions, platform, device kind)."""

from __future__ import annotations

import os
import platform as _platform

import jax
import jaxlib

from analysis.compile import xla_release
from analysis.devices.catalog import platform_of, target_config
from analysis.errors import ExplorerError

BACKENDS = ("auto", "cpu", "gpu")


def available_backends() -> list[str]:
    out = []
    for b in ("cpu", "gpu", "tpu"):
        try:
            if jax.devices(b):
                out.append(b)
        except RuntimeError:
            pass
    return out


def select_device(backend: str):
    if backend not in BACKENDS:
        raise ExplorerError("options", f"backend must be one of {', '.join(BACKENDS)}, not {backend!r}")
    if backend == "auto":
        return jax.devices()[0]
    try:
        return jax.devices(backend)[0]
    except RuntimeError:
        raise ExplorerError("options", f"no {backend.upper()} backend is available here "
                                       f"(present: {', '.join(available_backends())})") from None


def allow_gpu_target() -> None:
    """With no GPU the CUDA plugin only loads when told to skip its device checks; call before
    JAX starts its backends (the first ``jax.devices()``)."""
    os.environ.setdefault("JAX_SKIP_CUDA_CONSTRAINTS_CHECK", "1")


def gpu_target_device(name: str):
    """A device of the named GPU target (``analysis.devices.catalog``) to compile for without a GPU.
    Needs the CUDA plugin (the ``cuda`` extra) and ``allow_gpu_target()`` when no GPU is here."""
    return gpu_target_devices(name, 1)[0]


def gpu_target_devices(name: str, n: int = 1) -> list:
    """``n`` devices of the named GPU target in one node (``1x1xN``, as XLA names a topology),
    to compile a program sharded over them without a GPU."""
    cfg = target_config(name)
    from jax.experimental import topologies

    try:
        topo = topologies.get_topology_desc(platform="cuda", target_config=cfg, topology=f"1x1x{int(n)}")
    except Exception as e:  # noqa: BLE001 - no plugin, or a plugin that refused to load: one line
        first = (str(e).strip().splitlines() or [type(e).__name__])[0]
        raise ExplorerError("options", f"cannot compile for GPU target {name!r} here: {first} "
                                       "(needs the cuda extra; with no GPU, set "
                                       "JAX_SKIP_CUDA_CONSTRAINTS_CHECK=1)") from None
    return list(topo.devices)


def environment(device, gpu_target: str | None = None, devices: int = 1) -> dict:
    env = {
        "jax": jax.__version__, "jaxlib": jaxlib.__version__, "xla": xla_release.xla_version(),
        "python": _platform.python_version(), "backend": device.platform,
        "platform": platform_of(device.platform),
        "device_kind": getattr(device, "device_kind", device.platform),
        "device_count": devices if gpu_target else len(jax.devices(device.platform)),
        "machine": _platform.machine(), "cpu_count": os.cpu_count(),
    }
    if devices > 1:
        env["devices"] = devices  # the devices the program runs on (the job's setting)
    if gpu_target:
        # compiled for a described device, not on one: no autotuning, nothing run
        env["deviceless"] = True
        env["gpu_target"] = gpu_target.lower()
    return env


def probe() -> dict:
    """What this machine's JAX sees: per backend the device kind and count, and the default."""
    out: dict = {"jax": jax.__version__, "backends": {}}
    for b in ("cpu", "gpu", "tpu"):
        try:
            devs = jax.devices(b)
        except RuntimeError:
            continue
        if devs:
            out["backends"][b] = {"device_kind": getattr(devs[0], "device_kind", b), "count": len(devs)}
    out["default"] = platform_of(jax.devices()[0].platform)
    return out
