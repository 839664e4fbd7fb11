"""PyTorch models through torchax: a module's parameters and buffers are the program's inputs,
its ``named_modules()`` names its layers, each kernel's source line is in the user's ``forward``,
the compiled program computes what the module computes, and an op torchax cannot lower is one
line naming the op and the user's line. Skipped where the [torch] extra is not installed."""

from __future__ import annotations

import sys

import numpy as np
import pytest

pytest.importorskip("torchax", reason="the [torch] extra is not installed here")

from analysis.compile.load import load_source  # noqa: E402
from analysis.compile.stages import compile_model  # noqa: E402
from analysis.errors import ExplorerError  # noqa: E402
from analysis.program.layers import layers_of_bundle  # noqa: E402

NET = '''import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = nn.LayerNorm(16)
        self.blocks = nn.ModuleList([nn.Linear(16, 16), nn.Linear(16, 16)])
        self.head = nn.Sequential(nn.Linear(16, 8), nn.ReLU())
        self.register_buffer("scale", torch.full((16,), 0.5))

    def forward(self, x):
        x = self.norm(x) * self.scale
        for block in self.blocks:
            x = torch.tanh(block(x))
        return self.head(x)


torch.manual_seed(0)
model = Net()


def example_inputs():
    return (torch.randn(4, 16),)
'''
# where the test's file calls what (1-based lines of NET)
LINE = {text: NET.splitlines().index(text) + 1 for text in (
    "        x = self.norm(x) * self.scale", "            x = torch.tanh(block(x))", "        return self.head(x)")}


@pytest.fixture(scope="module")
def net():
    loaded = load_source(NET, "<net>", "net")
    return loaded, compile_model(loaded, "cpu").bundle


def test_the_parameters_and_buffers_are_the_programs_inputs(net):
    loaded, b = net
    # LayerNorm's weight and bias, two Linear's each, the head's Linear's two, and the buffer
    assert loaded.library == "torch"
    assert b.source["parameters"] == 2 + 2 * 2 + 2 + 1
    pre = b.module("hlo_before")
    params = [i for i in pre.entry.instructions if i.opcode == "parameter"]
    assert len(params) == 2 + 2 * 2 + 2 + 1 + 1  # and the input x


def test_the_layers_are_the_modules_names(net):
    _, b = net
    root = layers_of_bundle(b)
    paths = {layer.path for layer in root.walk() if layer.path}
    # a ModuleList item is named as named_modules() names it; a Sequential is called, so its items
    # are layers within it; torch's ops (aten::native_layer_norm, torch::linear) are no layers
    assert paths == {("norm",), ("blocks.0",), ("blocks.1",), ("head",), ("head", "0"), ("head", "1")}


def test_every_kernel_points_at_the_users_forward(net):
    _, b = net
    lines = {line for k in b.kernels for f, line in k.source_lines}
    files = {f for k in b.kernels for f, _ in k.source_lines}
    assert files == {"<net>"}
    assert set(LINE.values()) <= lines <= set(LINE.values()) | {LINE["        x = self.norm(x) * self.scale"]}


def test_the_compiled_program_computes_what_the_module_computes(net):
    import jax
    import torch

    loaded, _ = net
    torch_model = loaded.module.__dict__["model"]
    x = np.array(loaded.inputs[-1])  # (a writable copy of) the input example_inputs() gave, as the program's last argument
    want = torch_model(torch.from_numpy(x)).detach().numpy()
    got = np.asarray(jax.jit(loaded.model)(*loaded.inputs))
    assert got.shape == (4, 8)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_an_op_torchax_cannot_lower_is_one_line_at_the_users_call():
    src = NET.replace("        return self.head(x)", "        return torch.special.airy_ai(self.head(x))")
    with pytest.raises(ExplorerError) as info:
        compile_model(load_source(src, "<bad>", "bad"), "cpu")
    e = info.value
    assert e.line == LINE["        return self.head(x)"]
    assert "aten::special_airy_ai" in e.message and "\n" not in e.message and "Traceback" not in e.message


def test_a_training_step_of_torch_tensors_names_the_files_modules():
    src = '''import torch
from torch import nn
import torch.nn.functional as F

net = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))


def loss_fn(params, x, y):
    return F.cross_entropy(torch.func.functional_call(net, params, (x,)), y)


def model(params, x, y):
    grads, loss = torch.func.grad_and_value(loss_fn)(params, x, y)
    return {k: params[k] - 0.1 * grads[k] for k in params}, loss


def example_inputs():
    return {k: v.detach() for k, v in net.named_parameters()}, torch.randn(8, 16), torch.randint(0, 4, (8,))
'''
    loaded = load_source(src, "<step>", "step")
    b = compile_model(loaded, "cpu").bundle
    paths = {layer.path for layer in layers_of_bundle(b).walk() if layer.path}
    assert {("net",), ("net", "0"), ("net", "2")} <= paths
    # the step's outputs: the four updated parameter arrays and the loss
    out = b.module("hlo_after").entry.root
    assert out.opcode == "tuple" and len(out.operands) == 5


def test_without_torch_the_error_says_how_to_add_it(monkeypatch):
    from analysis.compile.user_errors import TORCH_MISSING

    monkeypatch.setitem(sys.modules, "torch", None)  # as if it were not installed
    with pytest.raises(ExplorerError) as info:
        load_source(NET, "<no-torch>", "no-torch")
    assert info.value.line == 1 and TORCH_MISSING in info.value.message and info.value.phase == "import"


def test_a_torch_job_compiles_in_the_sandbox():
    from analysis.service.job import Job
    from analysis.service.worker import run_job

    b = run_job(Job(kind="code", source=NET, filename="<net>", backend="cpu")).bundle
    assert b.source["library"] == "torch" and b.source["parameters"] == 9
    assert b.metrics["kernels_after"] > 0
