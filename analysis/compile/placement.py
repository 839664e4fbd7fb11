"""Where a program's inputs live when it is compiled: on the devices the model file put them
(its shardings kept: a batch split over a mesh stays split), the rest where JAX itself would put
them; for a GPU target without the GPU, the same layout described on the target's devices.

One rule for every input leaf, so a sharded program compiles as ``python FILE`` would run it:
an array already on the chosen backend's devices keeps its sharding; anything else (numpy
arrays, Python numbers, arrays on another backend) goes to JAX's default device, uncommitted,
or to the chosen device when the backend asked for is not JAX's default.
"""

from __future__ import annotations

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec, SingleDeviceSharding

from analysis.compile.backend import gpu_target_devices
from analysis.devices.catalog import MAX_DEVICES
from analysis.errors import ExplorerError


def check_device_count(platform: str, n: int, file: str | None = None) -> None:
    """An ExplorerError naming the limit when this process has fewer than ``n`` devices of
    ``platform``; call before the model file runs (its mesh would fail there, less clearly)."""
    try:
        have = len(jax.devices(platform))
    except RuntimeError:
        have = 0
    if have < n:
        raise ExplorerError("options", f"this job runs on {n} devices but this process has {have} {platform.upper()} "
                                       f"device(s); a worker started for the job has them (the app's Devices setting, "
                                       f"or xla-explorer --devices {n}; at most {MAX_DEVICES})", file)


def placed_inputs(inputs, device):
    """The inputs for a compile on ``device``'s backend (see the module's docstring)."""
    default = jax.devices()[0]

    def place(x):
        if isinstance(x, jax.Array):
            try:
                here = all(d.platform == device.platform for d in x.sharding.device_set)
            except Exception:  # noqa: BLE001 - a deleted or abstract array: placed anew below
                here = False
            if here:
                return x  # where the model file put it
        return jax.device_put(x) if device == default else jax.device_put(x, device)

    return jax.tree_util.tree_map(place, inputs)


def target_devices(name: str, n: int) -> list:
    """The ``n`` devices of GPU target ``name`` (one node), described without a GPU."""
    return gpu_target_devices(name, n)


def target_inputs(inputs, devices: list):
    """The inputs as shapes on a GPU target's ``devices``: an input sharded over a mesh of this
    process's devices gets the same mesh (shape, axis names, device order) made of the target's;
    the others are replicated over that mesh, or on the first device when nothing is sharded."""
    leaves = jax.tree_util.tree_leaves(inputs)
    index = {d.id: i for i, d in enumerate(jax.devices())}
    meshes: dict = {}

    def on_target(sharding):
        if not isinstance(sharding, NamedSharding):
            return None
        mesh = sharding.mesh
        if mesh.size > len(devices) or any(d.id not in index for d in mesh.devices.flat):
            return None
        key = (mesh.devices.shape, tuple(d.id for d in mesh.devices.flat), mesh.axis_names)
        if key not in meshes:
            order = np.vectorize(lambda d: index[d.id], otypes=[int])(mesh.devices)
            meshes[key] = Mesh(np.array(devices, dtype=object)[order], mesh.axis_names,
                               axis_types=getattr(mesh, "axis_types", None))
        return NamedSharding(meshes[key], sharding.spec)

    placed = [on_target(getattr(x, "sharding", None)) for x in leaves]
    first_mesh = next(iter(meshes.values()), None)
    rest = NamedSharding(first_mesh, PartitionSpec()) if first_mesh is not None else SingleDeviceSharding(devices[0])
    shaped = [jax.ShapeDtypeStruct(jax.numpy.shape(x), jax.numpy.result_type(x), sharding=s or rest)
              for x, s in zip(leaves, placed)]
    return jax.tree_util.tree_unflatten(jax.tree_util.tree_structure(inputs), shaped)


def mesh_of(args) -> dict | None:
    """The mesh the inputs are sharded over, as the bundle records it: axis names and sizes, and
    the devices' order (None where no input is on a mesh)."""
    for x in jax.tree_util.tree_leaves(args):
        s = getattr(x, "sharding", None)
        if isinstance(s, NamedSharding):
            m = s.mesh
            return {"axes": {str(k): int(v) for k, v in m.shape.items()},
                    "device_ids": [int(d.id) for d in m.devices.flat]}
    return None


def sharding_text(x) -> str | None:
    """An input's sharding as JAX prints its spec (``P('data', None)``), None when it has none
    of a mesh."""
    s = getattr(x, "sharding", None)
    if isinstance(s, NamedSharding):
        return str(s.spec)
    return None
