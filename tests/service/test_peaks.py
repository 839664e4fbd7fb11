"""A shared calibration keeps its caches' roofs and its spread, each checked (analysis/service/peaks.py)."""

from __future__ import annotations

from analysis.service import peaks

GOOD = {"source": "calibrated", "memory_bytes_per_s": 2.0e10, "flops_per_s": {"matmul": 1.0e11},
        "machine": "host|cpu|cpu|2|0.12", "note": "calibrated"}


def test_a_shared_calibration_keeps_its_cache_roofs_and_spread():
    lv = {"name": "L2 cache", "bytes": 1048576, "bytes_per_s": 1.9e11}
    sp = {"memory": {"median": 1.8e10, "q1": 1.7e10, "q3": 1.9e10, "n": 30}}
    out = peaks.checked({**GOOD, "memory_levels": [lv], "spread": sp})
    assert out["memory_levels"] == [lv] and out["spread"] == sp


def test_a_cache_roof_outside_a_physical_range_is_dropped():
    bad = [{"name": "L2 cache", "bytes": 1048576, "bytes_per_s": 1.0},  # 1 B/s
           {"name": "L3 cache", "bytes": "big", "bytes_per_s": 1e11},
           {"name": "<b>x</b>" * 10, "bytes": 1024, "bytes_per_s": 1e11}]
    assert peaks.checked({**GOOD, "memory_levels": bad})["memory_levels"] == []
