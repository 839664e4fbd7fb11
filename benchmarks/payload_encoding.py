"""A big program's graph payload, its light details by column (``details.pack_light``) beside
the same details as plain objects: the JSON text the server holds, its deflated size (what the
websocket carries, ``graph_payload.packed_args``) and the time to make each, side by side.

    .venv/bin/python benchmarks/payload_encoding.py [N]     (N layers of the stack, default 96)
"""
import json
import os
import sys
import time
import zlib

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from sample_models._stack import stack_source
from analysis.compile.load import load_source
from analysis.compile.stages import compile_model
from analysis.render.details import node_details, pack_light
from app import graph_payload as gp

n = int(sys.argv[1]) if len(sys.argv) > 1 else 96
b = compile_model(load_source(stack_source(n), f"s{n}.py", f"s{n}"), "cpu").bundle
p = gp.graph_payload(b)
packed = p["packed"]
d = json.loads(packed)
light = node_details(b, light=True)
plain = json.dumps({**d, "light": light}, default=str)


def z(t):
    t0 = time.perf_counter()
    c = zlib.compress(t.encode(), 1)
    return len(c), time.perf_counter() - t0


t0 = time.perf_counter()
pack_light(light)
t_pack = time.perf_counter() - t0
print(json.dumps({"n": n, "light_nodes": len(light),
                  "held_text_by_column_MB": round(len(packed) / 1e6, 2), "held_text_plain_MB": round(len(plain) / 1e6, 2),
                  "wire_by_column_MB": round(z(packed)[0] / 1e6, 2), "wire_plain_MB": round(z(plain)[0] / 1e6, 2),
                  "deflate_s_by_column": round(z(packed)[1], 3), "deflate_s_plain": round(z(plain)[1], 3),
                  "pack_light_s": round(t_pack, 3)}, indent=1))
