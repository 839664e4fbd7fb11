"""PyTorch: an MLP written with torch.nn, compiled by XLA through torchax.

The module is the model: its parameters (`named_parameters()`) are inputs of the compiled
program, as a JAX model's weights are, and its submodules' names (`hidden`, `act`, `out`) are the
layers. PyTorch's `nn.Linear` computes `x @ W.T + b`: look for each matmul in a library call with
the transposed weight read in place (no transpose kernel), and for the bias add and the GELU of the
hidden layer fused into kernels of their own behind it, as in the JAX `mlp`. Compare it with what
Inductor makes of the same module (Compare page, "XLA beside Inductor").
"""

import torch
from torch import nn


class MLP(nn.Module):
    def __init__(self, d_in=256, d_hidden=1024, d_out=256):
        super().__init__()
        self.hidden = nn.Linear(d_in, d_hidden)
        self.act = nn.GELU()
        self.out = nn.Linear(d_hidden, d_out)

    def forward(self, x):
        return self.out(self.act(self.hidden(x)))


torch.manual_seed(0)
model = MLP()


def example_inputs():
    return (torch.randn(128, 256),)
