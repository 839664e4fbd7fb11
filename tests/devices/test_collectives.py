"""Collectives read from HLO text: replica groups in every form XLA prints, in words, and the
bytes each device moves under the ring algorithms, checked on snippets written here with the
numbers worked by hand."""

from __future__ import annotations

import pytest

from analysis.devices.collectives import (NVLINK_H200_BYTES_PER_S, collectives, devices_words, module_devices,
                                  parse_pairs, parse_replica_groups)
from analysis.hlo import parse_module


@pytest.mark.parametrize("text, devices, groups", [
    ("{{0,1,2,3},{4,5,6,7}}", 8, ((0, 1, 2, 3), (4, 5, 6, 7))),
    ("{}", 4, ((0, 1, 2, 3),)),
    ("{}", 1, ()),
    ("[2,4]<=[8]", 8, ((0, 1, 2, 3), (4, 5, 6, 7))),
    # iota [4,2] transposed: rows of the transpose are 0,2,4,6 and 1,3,5,7
    ("[2,4]<=[4,2]T(1,0)", 8, ((0, 2, 4, 6), (1, 3, 5, 7))),
    ("[1,8]<=[8]", 8, ((0, 1, 2, 3, 4, 5, 6, 7),)),
    # the mesh form: devices row-major over the mesh, a group varies the named axes
    ("mesh['axis_0'=8,'axis_1'=1] {'axis_0'}", 8, ((0, 1, 2, 3, 4, 5, 6, 7),)),
    ("mesh['x'=2,'y'=4] {'y'}", 8, ((0, 1, 2, 3), (4, 5, 6, 7))),
    ("mesh['x'=2,'y'=4] {'x'}", 8, ((0, 4), (1, 5), (2, 6), (3, 7))),
    ("mesh['x'=2,'y'=4] {'z'}", 8, ()),  # an axis the mesh does not have: not guessed
    ("nonsense", 8, ()),
])
def test_replica_groups_in_every_form(text, devices, groups):
    assert parse_replica_groups(text, devices) == groups


def test_device_lists_in_words():
    assert devices_words(range(8)) == "devices 0-7"
    assert devices_words([0, 2, 4, 6]) == "devices 0, 2, 4 and 6"
    assert devices_words([0, 1, 2, 3, 6, 7]) == "devices 0-3, 6 and 7"
    assert devices_words([5]) == "device 5"
    assert parse_pairs("{{0,1},{1,2},{2,0}}") == ((0, 1), (1, 2), (2, 0))


# Eight devices; buffers of f32[1024] (4096 bytes) and f32[128] (512 bytes).
HLO = """HloModule m, is_scheduled=true, num_partitions=8

add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}

ENTRY main {
  p = f32[1024]{0} parameter(0)
  q = f32[128]{0} parameter(1)
  ar = f32[1024]{0} all-reduce(p), channel_id=1, replica_groups={{0,1,2,3,4,5,6,7}}, use_global_device_ids=true, to_apply=add
  ag = f32[1024]{0} all-gather(q), channel_id=2, replica_groups=[1,8]<=[8], dimensions={0}, use_global_device_ids=true
  rs = f32[128]{0} reduce-scatter(p), channel_id=3, replica_groups={}, dimensions={0}, to_apply=add
  cp = f32[128]{0} collective-permute(q), channel_id=4, source_target_pairs={{0,1},{1,2},{2,3},{3,4},{4,5},{5,6},{6,7},{7,0}}
  ars = f32[1024]{0} all-reduce-start(ar), channel_id=5, replica_groups=[2,4]<=[8], to_apply=add
  busy = f32[128]{0} negate(q)
  ard = f32[1024]{0} all-reduce-done(ars)
  ROOT t = (f32[1024]{0}, f32[128]{0}, f32[128]{0}, f32[1024]{0}) tuple(ag, rs, cp, ard)
}
"""


def test_each_collective_with_its_devices_and_the_ring_bytes():
    m = parse_module(HLO)
    assert module_devices(m) == 8
    cs = {c.name: c for c in collectives(m)}
    assert set(cs) == {"ar", "ag", "rs", "cp", "ars"}  # the async pair once, by its start
    # all-reduce of 4096 bytes over 8: 2 x 7/8 x 4096 = 7168
    assert (cs["ar"].kind, cs["ar"].buffer_bytes, cs["ar"].sent_bytes) == ("all-reduce", 4096, 7168)
    assert cs["ar"].words() == "sum over devices 0-7"
    # all-gather: 7/8 of the gathered 4096 bytes = 3584
    assert (cs["ag"].buffer_bytes, cs["ag"].sent_bytes) == (4096, 3584)
    assert cs["ag"].words() == "gathered from devices 0-7"
    # reduce-scatter ({} = all eight): 7/8 of its 4096-byte input
    assert (cs["rs"].buffer_bytes, cs["rs"].sent_bytes) == (4096, 3584)
    # collective-permute: every source sends its whole 512-byte operand
    assert (cs["cp"].sent_bytes, cs["cp"].pairs[-1]) == (512, (7, 0))
    assert cs["cp"].words().startswith("a ring: each of devices 0-7 sends to the next")
    # the async all-reduce in two groups of 4: 2 x 3/4 x 4096 = 6144
    assert cs["ars"].is_async and cs["ars"].group_size == 4 and cs["ars"].sent_bytes == 6144
    assert cs["ars"].words() == "sum over 2 groups of 4 devices (0-3; 4-7)"
    assert cs["ars"].overlapped == ("busy",) and cs["ar"].overlapped == ()  # scheduled inside the pair
    # at NVLink's 900 GB/s (450 each way): 7168 bytes in 7168 / 450e9 s
    assert cs["ar"].estimate_seconds() == pytest.approx(7168 / (NVLINK_H200_BYTES_PER_S / 2))


def test_a_module_without_collectives_or_a_bad_attribute():
    m = parse_module("HloModule m\n\nENTRY e {\n  p = f32[4]{0} parameter(0)\n  ROOT n = f32[4]{0} negate(p)\n}\n")
    assert collectives(m) == [] and module_devices(m) == 1
    assert collectives(None) == []
    bad = parse_module("HloModule m, num_partitions=2\n\nadd {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n"
                       "  ROOT s = f32[] add(a, b)\n}\n\nENTRY e {\n  p = f32[4]{0} parameter(0)\n"
                       "  ROOT r = f32[4]{0} all-reduce(p), replica_groups=garbage, to_apply=add\n}\n")
    (c,) = collectives(bad)
    assert c.groups == () and c.sent_bytes == 0 and "replica groups" in c.words()


# ----------------------------------------------------------------------------- shardings

from analysis.devices.sharding import parse_sharding  # noqa: E402


@pytest.mark.parametrize("text, words", [
    ("{replicated}", "replicated on every device"),
    ("{maximal device=3}", "on device 3"),
    ("{manual}", "per device (manual: shard_map)"),
    ("{devices=[8,1]<=[8]}", "rows split over 8 devices"),
    ("{devices=[1,8]<=[8]}", "columns split over 8 devices"),
    ("{devices=[2,4]<=[8]}", "rows split over 2 devices and columns split over 4 devices"),
    ("{devices=[4,1,2]<=[8] last_tile_dim_replicate}", "rows split over 4 devices, 2 copies of each block"),
    ("{devices=[1,1,8]<=[8] last_tile_dims={manual}}", "per device (manual: shard_map)"),
    ("{devices=[8]0,1,2,3,4,5,6,7}", "elements split over 8 devices"),
    ("{{replicated}, {devices=[8,1]<=[8]}}", "replicated on every device"),
])
def test_shardings_in_words(text, words):
    assert parse_sharding(text).words() == words


def test_which_block_each_device_holds():
    # [8,4] rows split in 4, columns in 2, devices by the iota [4,2] transposed: 0,2,4,6,1,3,5,7
    s = parse_sharding("{devices=[4,2]<=[2,4]T(1,0)}")
    assert s.devices == (0, 4, 1, 5, 2, 6, 3, 7)
    assert s.block_of(0, (8, 4)) == ((0, 2), (0, 2))
    assert s.block_of(4, (8, 4)) == ((0, 2), (2, 4))
    assert s.block_of(7, (8, 4)) == ((6, 8), (2, 4))
    # rows in 2 blocks, each held by 2 devices (the last tile dimension replicates)
    r = parse_sharding("{devices=[2,1,2]<=[4] last_tile_dim_replicate}")
    assert [r.block_of(d, (6, 3)) for d in range(4)] == [((0, 3), (0, 3))] * 2 + [((3, 6), (0, 3))] * 2
    assert parse_sharding("{maximal device=1}").block_of(0, (4,)) is None
    assert parse_sharding("{replicated}").block_of(5, (4,)) == ((0, 4),)
    assert parse_sharding("") is None and parse_sharding("{bogus}").kind == "unknown"


# ----------------------------------------------------------------------------- on the graphs

def test_the_graphs_say_what_each_collective_does_and_how_arrays_are_split():
    from analysis.program.kernels import kernels
    from analysis.render.module_graphs import post_graph, pre_graph

    m = parse_module(HLO)
    g = post_graph(m, kernels(m, "gpu"))
    assert g.title.endswith("(one of 8 devices)")  # its shapes are each device's
    by_name = {n.id: n for n in g.nodes.values()}
    assert by_name["k:ar"].route == "collective"
    assert by_name["k:ar"].label.splitlines()[1:] == [
        "all-reduce · sum over devices 0-7", "~7.0 KiB sent and received per device (ring estimate)"]
    assert "all-reduce (async) · sum over 2 groups of 4 devices" in by_name["k:ars"].label
    # the async pair is one kernel: the done draws no node of its own, its reader reads the start
    assert "k:ard" not in by_name
    assert any(e.src == "k:ars" for e in g.edges)
    pre = parse_module("HloModule m\n\nENTRY e {\n"
                       "  x = f32[16,4]{1,0} parameter(0), sharding={devices=[8,1]<=[8]}\n"
                       "  w = f32[4,4]{1,0} parameter(1), sharding={replicated}\n"
                       "  ROOT d = f32[16,4]{1,0} dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n}\n")
    labels = sorted(e.label for e in pre_graph(pre).edges)
    assert labels == ["f32[16,4]{1,0} · rows split over 8 devices", "f32[4,4]{1,0} · replicated on every device"]


def test_a_combined_collective_comes_from_every_op_it_combines():
    from analysis.program.provenance import combined_op_names

    assert combined_op_names("jit(f)/grad/(jvp()/reduce_sum:transpose(jvp())/dot_general)") == [
        "jit(f)/grad/jvp()/reduce_sum", "jit(f)/grad/transpose(jvp())/dot_general"]
    assert combined_op_names("jit(f)/transpose(jvp())/dot_general") == []


def test_the_data_parallel_all_reduce_links_to_the_gradients_it_sums(gallery_bundle):
    b = gallery_bundle("dp_train_step")
    (ar,) = [k for k in b.kernels if k.route == "collective"]
    ops = b.provenance.kernel_to_pre.get(ar.name) or []
    pre = b.module("hlo_before")
    grads = {i.name for c in pre.computations for i in c.instructions
             if "transpose(jvp())" in i.metadata.op_name and i.opcode in ("dot", "reduce")}
    assert grads and grads <= set(ops)  # every gradient's matmul and reduction it sums
