"""Measuring on this CPU (analysis/compile/measure.py): the calibration of the roofs, measured
here, and the fusion comparison's alternated calls."""

from __future__ import annotations

import pytest

from analysis.compile import measure


def test_the_calibration_measures_each_cache_and_keeps_the_spread_of_its_runs():
    p = measure.calibrate_peaks()
    caches = measure.cache_sizes()
    assert [lv["name"] for lv in p["memory_levels"]] == [f"{name} cache" for name, _ in caches]
    for lv, (_, size) in zip(p["memory_levels"], caches):
        assert lv["bytes"] == size and lv["buffer_bytes"] == size // 2 and lv["bytes_per_s"] > 0
        s = lv["spread"]
        assert s["n"] >= 3 and s["q1"] <= s["median"] <= s["q3"] <= lv["bytes_per_s"]
    for key, best in (("memory", p["memory_bytes_per_s"]), ("matmul", p["flops_per_s"]["matmul"])):
        s = p["spread"][key]
        assert s["n"] >= 3 and s["q1"] <= s["median"] <= s["q3"] <= best  # the roof is the best run


def test_the_cache_is_the_second_level_getconf_reports():
    import subprocess

    out = subprocess.run(["getconf", "LEVEL2_CACHE_SIZE"], capture_output=True, text=True).stdout.strip()
    expected = [("L2", int(out))] if out.isdigit() and int(out) > 0 else []
    assert measure.cache_sizes() == expected


def test_alternated_calls_take_turns_and_swap_the_order_every_round():
    seen = []
    out = measure.alternate_calls(lambda: seen.append("a"), lambda: seen.append("b"),
                                  budget_s=60.0, min_calls=3, max_calls=3)
    # a warm call of each, then rounds a b | b a | a b (a drift in load falls on both alike)
    assert seen == ["a", "b", "a", "b", "b", "a", "a", "b"]
    assert len(out["a"]) == len(out["b"]) == 3 and out["stopped"] in ("parted", "calls")


def test_alternated_calls_stop_once_their_spreads_part():
    """A call doing a million additions against one doing none: the two interquartile ranges
    part, and the calls stop there, with as many of each and at least the minimum."""
    from analysis.measures import spread

    def slow():
        total = 0
        for i in range(1_000_000):
            total += i
        return total

    out = measure.alternate_calls(slow, lambda: None, budget_s=30.0, min_calls=5, max_calls=200)
    assert out["stopped"] == "parted"
    assert len(out["a"]) == len(out["b"]) >= 5
    assert spread(out["a"]).parts_from(spread(out["b"]))


def test_alternated_calls_are_bounded_in_time():
    """Two alike calls whose spreads need not part: the budget (0 s) ends them after the minimum."""
    out = measure.alternate_calls(lambda: None, lambda: None, budget_s=0.0, min_calls=4, max_calls=1000)
    assert len(out["a"]) == len(out["b"]) == 4 and out["stopped"] in ("parted", "time")
