"""analysis.tuning: the collector pause is counted across threads and leaves the collector as it found it."""

from __future__ import annotations

import gc
import threading

from analysis.tuning import building
from tests.paths import ROOT


def test_nested_pauses_turn_the_collector_back_on_once_the_last_ends():
    assert gc.isenabled()
    with building():
        assert not gc.isenabled()
        with building():
            assert not gc.isenabled()
        assert not gc.isenabled()  # the outer pause is still on
    assert gc.isenabled()


def test_a_pause_ended_by_an_error_still_turns_it_back_on():
    try:
        with building():
            raise ValueError("inside")
    except ValueError:
        pass
    assert gc.isenabled()


def test_a_collector_that_was_off_stays_off():
    gc.disable()
    try:
        with building():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_overlapping_pauses_in_two_threads():
    first_in, second_in, first_out = threading.Event(), threading.Event(), threading.Event()
    seen = {}

    def first():
        with building():
            first_in.set()
            second_in.wait(10)
        seen["after_first"] = gc.isenabled()  # the second thread's pause still holds
        first_out.set()

    def second():
        first_in.wait(10)
        with building():
            second_in.set()
            first_out.wait(10)

    ts = [threading.Thread(target=first), threading.Thread(target=second)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(20)
    assert seen["after_first"] is False
    assert gc.isenabled()


def test_only_a_process_that_ends_with_its_job_freezes_the_compiles_objects():
    """The worker (``ends_with_job``) puts what the compile made into the collector's permanent
    generation, so no later pass walks it; a compile in a process that goes on (the CLI's
    ``--trusted``) leaves the collector as it was. In a process of its own each: freezing is
    for the life of the process."""
    import os
    import subprocess
    import sys

    root = ROOT
    code = ("import gc, sys\nfrom analysis.service.job import Job\nfrom analysis.service.worker_main import execute\n"
            "b = execute(Job(kind='gallery', name='softmax', backend='cpu'), ends_with_job=(sys.argv[1] == '1'))\n"
            "assert b.kernels\nprint(gc.get_freeze_count(), gc.isenabled())\n")
    got = {}
    for ends in ("1", "0"):
        out = subprocess.run([sys.executable, "-c", code, ends], cwd=root, capture_output=True, text=True, timeout=300,
                             env={**os.environ, "JAX_PLATFORMS": "cpu"})
        assert out.returncode == 0, out.stderr[-2000:]
        frozen, enabled = out.stdout.split()
        got[ends] = (int(frozen), enabled)
    assert got["1"][0] > 10_000 and got["1"][1] == "True"
    assert got["0"] == (0, "True")


def test_no_module_but_tuning_tunes_the_runtime():
    """The collector, priorities and glibc's allocator are touched in analysis/tuning.py only."""
    import os
    import re

    root = ROOT
    calls = re.compile(r"\bgc\.(disable|enable|freeze|collect|set_threshold)\(|\bos\.(setpriority|nice)\(|"
                       r"/proc/self/autogroup|\bmallopt\b|\bmalloc_trim\b")
    found = []
    for top in ("analysis", "app", "sample_models"):
        for dirpath, _, files in os.walk(os.path.join(root, top)):
            for f in files:
                if f.endswith(".py"):
                    path = os.path.join(dirpath, f)
                    rel = os.path.relpath(path, root)
                    if rel != os.path.join("analysis", "tuning.py") and calls.search(open(path).read()):
                        found.append(rel)
    assert found == []


def test_what_a_pause_built_goes_to_the_oldest_generation_unwalked():
    # a young collection right after the pause would walk all of it (docs/performance.md)
    with building():
        made = [[i] for i in range(1000)]
    oldest = {id(o) for o in gc.get_objects(generation=2)}
    assert all(id(x) in oldest for x in made)
    young = {id(o) for g in (0, 1) for o in gc.get_objects(generation=g)}
    assert not any(id(x) in young for x in made)


def test_what_is_frozen_for_good_stays_frozen(monkeypatch):
    unfrozen = []
    real_unfreeze = gc.unfreeze
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        monkeypatch.setattr(gc, "unfreeze", lambda: unfrozen.append(True))
        with building():
            pass
        monkeypatch.undo()
        assert not unfrozen  # the permanent generation was left as it was
        # (objects frozen here may still die on other threads, which shrinks the count a little;
        # an unfreeze would empty it)
        assert gc.get_freeze_count() > 0.9 * frozen
    finally:
        real_unfreeze()
