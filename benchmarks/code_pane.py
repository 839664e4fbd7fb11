"""What the Code pane adds to the graphs' first message, and what it costs when it is opened,
side by side in one run, for a gallery model compiled on the CPU here (each kernel's LLVM IR and
machine code in its bundle): the first graph's component arguments (``graph_payload`` ->
``packed_args``) of the bundle with its code and of the same bundle without it (they must be the
same: the code is sent only when the pane is opened), and the pane's data (``add_code``, then
``code_since``: what the websocket carries) against that first message.

    .venv/bin/python benchmarks/code_pane.py [MODEL ...]     (default softmax_layernorm transformer_block)
"""
import json
import os
import sys
import time
from dataclasses import replace

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from analysis.compile.stages import analyze_model
from app import graph_payload as gp


def wire(args: dict) -> int:
    return len(json.dumps(args, default=str, separators=(",", ":")))


for model in sys.argv[1:] or ["softmax_layernorm", "transformer_block"]:
    b = analyze_model(model, backend="cpu").bundle
    bare = replace(b, code=None)
    with_code = gp.graph_payload(b)
    without = gp.graph_payload(bare)  # (its layouts come from the cache the first one filled)
    first_with = gp.packed_args({k: v for k, v in with_code.items() if k != "details_log"}, 0)
    first_without = gp.packed_args({k: v for k, v in without.items() if k != "details_log"}, 0)
    t3 = time.perf_counter()
    gp.add_code(b, with_code)
    sent = gp.code_since(with_code, 0)
    t4 = time.perf_counter()
    print(json.dumps({
        "model": model, "kernels": len(b.kernels), "kernels_with_code": len(with_code["code"]["kernels"]),
        "first_message_bytes_with_code": wire(first_with), "first_message_bytes_without": wire(first_without),
        "code_message_bytes": wire(sent), "code_deflated": set(sent) == {"z"},
        "code_over_first": round(wire(sent) / wire(first_without), 2),
        "pane_data_s": round(t4 - t3, 3),  # made when the pane opens, in the frame's round trip
    }))
