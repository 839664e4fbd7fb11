"""PyTorch: a pre-norm transformer block written with torch.nn, compiled by XLA through torchax.

Two encoder blocks (`nn.ModuleList`), each layer norm -> multi-head self-attention -> residual ->
layer norm -> MLP -> residual, as `torch.nn` users write them. The layer tree is the module's own
names (`layers.0/attn`, `layers.1/mlp/0`); every kernel's source line is in `forward` below, and
each op's PyTorch name (`aten::addmm`, `aten::_safe_softmax`) is kept with it. Look for
`nn.MultiheadAttention`'s projections as library matmuls, its softmax fused to a few kernels, and
the layer norms' reductions sharing kernels with the residual adds around them.
"""

import torch
from torch import nn


class Block(nn.Module):
    def __init__(self, d=128, heads=4):
        super().__init__()
        self.ln1 = nn.LayerNorm(d)
        self.attn = nn.MultiheadAttention(d, heads, batch_first=True)
        self.ln2 = nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x):
        h = self.ln1(x)
        x = x + self.attn(h, h, h, need_weights=False)[0]
        return x + self.mlp(self.ln2(x))


class Encoder(nn.Module):
    def __init__(self, n_layers=2):
        super().__init__()
        self.layers = nn.ModuleList([Block() for _ in range(n_layers)])

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


torch.manual_seed(0)
model = Encoder().eval()


def example_inputs():
    return (torch.randn(4, 64, 128),)
