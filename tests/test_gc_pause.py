"""The collector pause is counted across threads and leaves the collector as it found it."""

from __future__ import annotations

import gc
import threading

from analysis.gc_pause import gc_paused


def test_nested_pauses_turn_the_collector_back_on_once_the_last_ends():
    assert gc.isenabled()
    with gc_paused():
        assert not gc.isenabled()
        with gc_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # the outer pause is still on
    assert gc.isenabled()


def test_a_pause_ended_by_an_error_still_turns_it_back_on():
    try:
        with gc_paused():
            raise ValueError("inside")
    except ValueError:
        pass
    assert gc.isenabled()


def test_a_collector_that_was_off_stays_off():
    gc.disable()
    try:
        with gc_paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_overlapping_pauses_in_two_threads():
    first_in, second_in, first_out = threading.Event(), threading.Event(), threading.Event()
    seen = {}

    def first():
        with gc_paused():
            first_in.set()
            second_in.wait(10)
        seen["after_first"] = gc.isenabled()  # the second thread's pause still holds
        first_out.set()

    def second():
        first_in.wait(10)
        with gc_paused():
            second_in.set()
            first_out.wait(10)

    ts = [threading.Thread(target=first), threading.Thread(target=second)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(20)
    assert seen["after_first"] is False
    assert gc.isenabled()
