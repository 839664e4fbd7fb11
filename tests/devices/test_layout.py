"""What each device holds, read from a sharded program's two HLO texts written here: the global
shapes before the partitioner, each device's after it, the shardings XLA prints."""

from __future__ import annotations

from analysis.bundle.core import bundle_from_hlo
from analysis.devices.layout import device_layout, mesh_of_module
from analysis.hlo import parse_module

# x [16,4] split by rows over 4 devices, w [4,4] replicated; after the partitioner each device
# multiplies its 4 rows by w, which an all-reduce first sums (a made-up step, for the numbers).
BEFORE = """HloModule m, frontend_attributes={xla.sdy.meshes={mesh = #sdy.mesh<["rows"=4]>}}

ENTRY main {
  x = f32[16,4]{1,0} parameter(0), sharding={devices=[4,1]<=[4]}
  w = f32[4,4]{1,0} parameter(1), sharding={replicated}
  ROOT d = f32[16,4]{1,0} dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}
"""

AFTER = """HloModule m, is_scheduled=true, num_partitions=4

add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}

ENTRY main_spmd {
  p0 = f32[4,4]{1,0} parameter(0), sharding={devices=[4,1]<=[4]}
  p1 = f32[4,4]{1,0} parameter(1), sharding={replicated}
  ar = f32[4,4]{1,0} all-reduce(p1), channel_id=1, replica_groups={{0,1,2,3}}, to_apply=add
  ROOT d = f32[4,4]{1,0} dot(p0, ar), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}
"""


def test_each_array_per_device_and_the_collectives_traffic():
    b = bundle_from_hlo(AFTER, "step", before_text=BEFORE)
    layout = device_layout(b)
    assert layout.devices == 4 and layout.mesh == {"axes": {"rows": 4}}
    x, w, out = layout.arrays
    assert (x.role, x.shape, x.words) == ("input", (16, 4), "rows split over 4 devices")
    assert (x.device_bytes, x.total_bytes) == (4 * 4 * 4, 16 * 4 * 4)
    assert x.grid == [["0"], ["1"], ["2"], ["3"]]  # one block of rows each
    assert (w.words, w.device_bytes, w.grid) == ("replicated on every device", 64, [["0-3"]])
    assert x.reader == "d" and w.reader == "ar"  # the kernels that read them first
    # the output's sharding read off its shapes: [16,4] whole, [4,4] per device
    assert (out.role, out.words, out.device_bytes, out.reader) == ("output", "rows split over 4 devices", 64, "d")
    # the all-reduce of w's 64 bytes over 4: 2 x 3/4 x 64 = 96 bytes each way per device
    assert [c.name for c in layout.collectives] == ["ar"] and layout.sent_bytes == 96


def test_one_device_has_no_layout_and_a_module_without_a_mesh_none():
    one = AFTER.replace(", num_partitions=4", "")
    assert device_layout(bundle_from_hlo(one, "step", before_text=BEFORE)) is None
    assert mesh_of_module(parse_module(AFTER)) is None
