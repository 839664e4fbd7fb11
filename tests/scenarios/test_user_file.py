"""A user's model file runs exactly as ``python FILE`` would run it (``analysis.compile.load``):
its own ``__future__`` imports only, its module registered as ``__main__`` while it runs, and
``__name__``, ``__file__``, ``__doc__`` and ``sys.argv`` as Python sets them.

Every Flax Linen and Equinox example declares typed fields (``features: int = 256``); with this
project's ``from __future__ import annotations`` leaking into the user's code, and the user's
module missing from ``sys.modules``, ``dataclasses`` failed on every one of them. The library
cases below each fail that way without the loader's fix; each runs with and without the file's
own ``from __future__ import annotations``.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytest.importorskip("jax")

from analysis.compile.load import load_source  # noqa: E402
from analysis.errors import ExplorerError  # noqa: E402

# What the file sees of itself, gathered as it runs; ``python FILE`` prints it, the loader's
# example_inputs() raises it (the one channel out of a sandboxed worker that needs no compile).
PROBE = '''"""The probe's docstring."""
{future}
import __future__ as _future
import builtins
import json
import sys

def _ann(x: int):
    return x

_flags = sys._getframe(0).f_code.co_flags
FACTS = {{
    "name": __name__,
    "file": __file__,
    "doc": __doc__,
    "main_is_me": sys.modules.get("__main__") is not None and sys.modules["__main__"].__dict__ is globals(),
    "by_name_is_me": sys.modules.get(__name__) is not None and sys.modules[__name__].__dict__ is globals(),
    "future": sorted(f for f in _future.all_feature_names
                     if _flags & getattr(_future, f).compiler_flag),
    "annotation": repr(_ann.__annotations__["x"]),
    "argv0": sys.argv[0],
    "spec": repr(__spec__),
    "package": repr(__package__),
    "builtins_is_module": __builtins__ is builtins or __builtins__ is vars(builtins),
}}

def model(x):
    return x

def example_inputs():
    raise RuntimeError("FACTS " + json.dumps(FACTS))

print(json.dumps(FACTS))
'''


def _probe(tmp_path, future: bool) -> tuple[str, str]:
    path = tmp_path / ("probe_future.py" if future else "probe.py")
    path.write_text(PROBE.format(future="from __future__ import annotations" if future else ""))
    return str(path), path.read_text()


def _as_python_runs_it(path: str) -> dict:
    out = subprocess.run([sys.executable, path], capture_output=True, text=True, check=True, timeout=60)
    return json.loads(out.stdout.strip().splitlines()[-1])


def _facts_from(err: ExplorerError) -> dict:
    assert "FACTS " in err.message, err.message
    return json.loads(err.message.split("FACTS ", 1)[1])


@pytest.mark.parametrize("future", [False, True], ids=["plain", "future-annotations"])
def test_the_loader_runs_a_file_as_python_does(tmp_path, future):
    path, source = _probe(tmp_path, future)
    expected = _as_python_runs_it(path)
    # the file's own view, checked against what Python itself set (not against the loader)
    assert expected["name"] == "__main__" and expected["main_is_me"] and expected["by_name_is_me"]
    assert expected["future"] == (["annotations"] if future else [])
    with pytest.raises(ExplorerError) as e:
        load_source(source, path, "probe")
    assert _facts_from(e.value) == expected
    # and the loader puts back what was there: this process's own __main__
    assert getattr(sys.modules["__main__"], "FACTS", None) is None


@pytest.mark.sandbox
def test_the_sandboxed_worker_runs_a_file_as_python_does(tmp_path):
    from analysis.service import sandbox
    from analysis.service.worker import Job, run_job

    ok, why = sandbox.sandbox_status()
    if not ok:
        pytest.skip(f"bubblewrap cannot run here: {why}")
    path, source = _probe(tmp_path, future=False)
    expected = _as_python_runs_it(path)
    with pytest.raises(ExplorerError) as e:
        run_job(Job(kind="file", source=source, filename=path, name="probe", backend="cpu"))
    assert _facts_from(e.value) == expected


# ----------------------------------------------------------------------------- library constructs

LINEN = '''
import jax, jax.numpy as jnp
import flax.linen as nn

class Block(nn.Module):
    features: int = 16
    use_bias: bool = True

    @nn.compact
    def __call__(self, x):
        return nn.relu(nn.Dense(self.features, use_bias=self.use_bias, name="proj")(x))

class Net(nn.Module):
    widths: tuple = (16, 8)

    @nn.compact
    def __call__(self, x):
        for i, w in enumerate(self.widths):
            x = Block(w, name=f"block{i}")(x)
        return x

net = Net()
x0 = jnp.ones((2, 4))
params = net.init(jax.random.PRNGKey(0), x0)

def model(params, x):
    return net.apply(params, x)

def example_inputs():
    return params, x0
'''

EQUINOX = '''
import jax, jax.numpy as jnp
import equinox as eqx

class Mlp(eqx.Module):
    lin1: eqx.nn.Linear
    lin2: eqx.nn.Linear
    scale: float = eqx.field(static=True)

    def __init__(self, key, scale=2.0):
        k1, k2 = jax.random.split(key)
        self.lin1 = eqx.nn.Linear(4, 8, key=k1)
        self.lin2 = eqx.nn.Linear(8, 2, key=k2)
        self.scale = scale

    def __call__(self, x):
        return self.lin2(jax.nn.relu(self.lin1(x))) * self.scale

model = Mlp(jax.random.PRNGKey(0))

def example_inputs():
    return (jnp.ones(4),)
'''

STRUCT = '''
import jax, jax.numpy as jnp
from flax import struct

@struct.dataclass
class State:
    w: jax.Array
    step: int = struct.field(pytree_node=False, default=0)

def model(s, x):
    return s.w @ x + s.step

def example_inputs():
    return State(jnp.ones((3, 3)), step=2), jnp.ones(3)
'''

CONFIG = '''
import dataclasses
from typing import ClassVar
import jax.numpy as jnp

@dataclasses.dataclass(frozen=True)
class Config:
    width: int = 8
    depth: int = 2
    KIND: ClassVar[str] = "mlp"   # a class variable, not a field: dataclasses must see ClassVar

assert [f.name for f in dataclasses.fields(Config)] == ["width", "depth"], dataclasses.fields(Config)
cfg = Config()

def model(x):
    for _ in range(cfg.depth):
        x = jnp.tanh(x) * cfg.width
    return x

def example_inputs():
    return (jnp.ones(cfg.width),)
'''

NAMEDTUPLE = '''
import typing
import jax.numpy as jnp

class Batch(typing.NamedTuple):
    x: jnp.ndarray
    y: jnp.ndarray

def model(b: Batch):
    return ((b.x - b.y) ** 2).mean()

def example_inputs():
    return (Batch(jnp.ones(4), jnp.zeros(4)),)
'''


@pytest.mark.parametrize("future", [False, True], ids=["plain", "future-annotations"])
@pytest.mark.parametrize("name, source, leaves", [
    ("linen", LINEN, 4 + 1),  # two Dense layers' kernel and bias, and x
    ("equinox", EQUINOX, 4 + 1),  # two Linear layers' weight and bias (scale is static), and x
    ("struct", STRUCT, 2),  # w (step is not a pytree node), x
    ("config", CONFIG, 1),
    ("namedtuple", NAMEDTUPLE, 2),
])
def test_typed_fields_load_with_and_without_future_annotations(name, source, leaves, future):
    import jax

    src = ("from __future__ import annotations\n" if future else "") + source
    loaded = load_source(src, f"<{name}>", name)
    assert len(jax.tree_util.tree_leaves(loaded.inputs)) == leaves
    jax.jit(loaded.model).lower(*loaded.inputs)  # and it traces
