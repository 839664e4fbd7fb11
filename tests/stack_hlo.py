"""A hand-written stack of layers as HLO text, before and after optimization, for the layers
view and big-program tests: ``n`` layers, each ``per_layer`` elementwise ops (a multiply by a
value every layer reads, then tanh, exp, ... in a chain) named ``jit(f)/layer<i>/<op>``, and
after optimization one loop fusion per layer holding that layer's ops."""

from __future__ import annotations

CHAIN = ("tanh", "exponential", "negate", "log-plus-one", "sine", "cosine")


def stack_texts(n: int = 8, shared: str = "  %bc = f32[8]{0} broadcast(%c), dimensions={}",
                per_layer: int = 2) -> tuple[str, str]:
    """``(before, after)``. ``shared`` defines ``%bc``, the value every layer multiplies by: by
    default the broadcast of a constant without an op_name, as JAX hoists constants."""
    pre = ["HloModule stack", "", "ENTRY %main (x: f32[8]) -> f32[8] {", "  %x = f32[8]{0} parameter(0)",
           "  %c = f32[] constant(2)", shared]
    post = ["HloModule stack, is_scheduled=true", ""]
    prev = "x"
    for i in range(n):
        body = [f'  %m{i} = f32[8]{{0}} multiply(%{{prev}}, %bc), metadata={{op_name="jit(f)/layer{i}/mul"}}']
        last = f"m{i}"
        for j in range(per_layer - 1):
            op = CHAIN[j % len(CHAIN)]
            name = f"t{i}" if j == per_layer - 2 else f"o{i}_{j}"
            body.append(f'  %{name} = f32[8]{{0}} {op}(%{last}), metadata={{op_name="jit(f)/layer{i}/{op}"}}')
            last = name
        pre += [line.replace("{prev}", prev) for line in body]
        post += [f"%fused{i} (p: f32[8]) -> f32[8] {{", "  %p = f32[8]{0} parameter(0)",
                 "  %c = f32[] constant(2)", "  %bc = f32[8]{0} broadcast(%c), dimensions={}"]
        inner = [line.replace("{prev}", "p") for line in body]
        inner[-1] = inner[-1].replace(f"  %{last} =", f"  ROOT %{last} =", 1)
        post += inner + ["}", ""]
        prev = last
    pre += [f"  ROOT %out = f32[8]{{0}} copy(%{prev})", "}"]
    post += ["ENTRY %main (x: f32[8]) -> f32[8] {", "  %x = f32[8]{0} parameter(0)"]
    prev = "x"
    for i in range(n):
        root = "ROOT " if i == n - 1 else ""
        post.append(f"  {root}%fusion.{i} = f32[8]{{0}} fusion(%{prev}), kind=kLoop, calls=%fused{i}")
        prev = f"fusion.{i}"
    post.append("}")
    return "\n".join(pre) + "\n", "\n".join(post) + "\n"
