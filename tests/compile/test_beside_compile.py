"""Work done beside XLA's compile: the fusion log parsed as XLA writes it (``LogFollower``), the
optimized module parsed from XLA's dump and analyzed during code generation, and the check that
the dump is the compiled module (``same_module_text``). The serial path (everything parsed from
the compiled texts after the compile) is the oracle of the integration test; the unit tests'
expected values are read off the text they write."""

from __future__ import annotations

import json

from analysis.compile import stages
from analysis.compile.decisions import LogFollower, capture
from analysis.compile.load import load_source
from analysis.fusion.log import FUSED, NOT_FUSED
from analysis.hlo import parse_module
from analysis.pipeline import same_module_text
from tests.paths import ROOT

P = "I1201 09:14:35.7559{}   20414 "
LOG = [
    P.format(61) + "hlo_pass_pipeline.cc:303] Running HLO pass pipeline on module jit_model: simplification",
    P.format(62) + "hlo_pass_pipeline.cc:181]   HLO pass fusion",
    "a line the user's code printed while tracing: naïve",
    P.format(63) + "instruction_fusion.cc:649] Considering fusion of: %exp.0 = f32[8]{0} exponential(%sub.1), "
                   "metadata={op_name=\"jit(f)/exp\" stack_frame_id=2} with operand sub.1",
    P.format(64) + "cpu_instruction_fusion.cc:483] Fusing: consumer is elementwise or fusible.",
    "W1201 09:14:35.755965   20414 cpu_client.cc:9] a warning XLA printed",
    P.format(66) + "instruction_fusion.cc:848] Fusing %sub.1 = f32[8]{0} subtract(%x.1, %b.1), metadata={op_name="
                   "\"jit(f)/sub\" stack_frame_id=1} into %exp.0 = f32[8]{0} exponential(%sub.1), metadata={op_name="
                   "\"jit(f)/exp\" stack_frame_id=2}",
    P.format(67) + "instruction_fusion.cc:855]        created new fusion: %subtract_exponential_fusion = f32[8]{0} "
                   "fusion(%x.1, %b.1), kind=kLoop, calls=%fused_computation",
    P.format(68) + "instruction_fusion.cc:649] Considering fusion of: %bc.2 = f32[8,8]{1,0} broadcast(%reduce_sum.0), "
                   "dimensions={0} with operand reduce_sum.0",
    P.format(69) + "instruction_fusion.cc:687] not fusing operand %reduce_sum.0 = f32[8]{0} reduce(%p.0, %c.0), "
                   "dimensions={1}, to_apply=%add because Fusion is not profitable.",
]


def test_the_follower_parses_a_log_written_in_pieces(tmp_path):
    """Pieces cut mid-line and mid-character, as a reader beside a writer sees the file: the
    fusion passes' lines are parsed and numbered as in the filtered log (the user's line and
    XLA's warning are not in it), the rest kept to be echoed."""
    path = tmp_path / "log"
    data = ("\n".join(LOG) + "\n").encode("utf-8")
    cuts = [0, 40, data.index("naï".encode()) + 3, data.index(b"Fusing %sub"), len(data) - 7, len(data)]
    follower = LogFollower(str(path))
    assert follower.poll() is False  # no file yet: nothing, and no failure
    with open(path, "wb") as f:
        for a, b in zip(cuts, cuts[1:]):
            f.write(data[a:b])
            f.flush()
            follower.poll()
    assert not follower.complete
    follower.close()
    assert follower.complete
    records, facts = follower.parser.result("jit_model")
    fused, refused = records
    assert (fused.decision, fused.producer, fused.consumer, fused.fusion) == \
        (FUSED, "sub.1", "exp.0", "subtract_exponential_fusion")
    assert fused.reason == "Fusing: consumer is elementwise or fusible."
    assert (refused.decision, refused.producer, refused.consumer, refused.reason) == \
        (NOT_FUSED, "reduce_sum.0", "bc.2", "Fusion is not profitable.")
    # kept lines: pipeline, pass, considering, Fusing:, Fusing, created, considering, not fusing
    assert (fused.line, refused.line) == (5, 8) and facts["log_lines"] == 8
    assert follower.show == [LOG[2], LOG[5]]


def test_a_follower_closed_on_a_partial_last_line_reads_it(tmp_path):
    path = tmp_path / "log"
    path.write_text(LOG[0] + "\n" + LOG[1] + "\n" + LOG[9])  # no newline at the end
    follower = LogFollower(str(path))
    follower.poll()
    assert follower.parser.lines == 2
    follower.close()
    assert follower.parser.lines == 3


def test_a_follower_whose_file_never_came_is_not_complete(tmp_path):
    follower = LogFollower(str(tmp_path / "missing"))
    follower.close()
    assert follower.closed and not follower.complete


MODULE = """HloModule m, entry_computation_layout={(f32[8]{0})->f32[8]{0}}

ENTRY %main (p: f32[8]) -> f32[8] {
  %p = f32[8]{0} parameter(0)
  ROOT %f = f32[8]{0} custom-call(%p), custom_call_target="foo", backend_config={"a":1,"b":[2,3]}
}
"""


def test_a_dump_that_differs_only_in_backend_config_order_is_the_compiled_module():
    compiled = MODULE.replace('{"a":1,"b":[2,3]}', '{"b":[2,3],"a":1}')
    m = parse_module(MODULE)
    f = m.entry.instructions[-1]
    assert f.backend_config == {"a": 1, "b": [2, 3]}  # decoded once before: decoded again after
    assert same_module_text(m, MODULE, compiled)
    assert f.attributes["backend_config"] == '{"b":[2,3],"a":1}'
    assert list(f.backend_config) == ["b", "a"] and m.text == compiled


def test_a_dump_that_differs_in_anything_else_is_not():
    for compiled in (MODULE.replace('{"a":1,"b":[2,3]}', '{"b":[2,4],"a":1}'),  # another value
                     MODULE.replace('"foo"', '"bar"'),  # another attribute
                     MODULE.replace("%p = f32[8]{0} parameter(0)", "%q = f32[8]{0} parameter(0)"),  # no config there
                     MODULE + "\n"):  # another line count
        m = parse_module(MODULE)
        assert not same_module_text(m, MODULE, compiled), compiled
        assert m.entry.instructions[-1].attributes["backend_config"] == '{"a":1,"b":[2,3]}'
    assert not same_module_text(parse_module(MODULE), None, MODULE)


def test_the_optimized_dump_is_read_only_when_there_is_one(tmp_path):
    assert stages.after_optimizations(str(tmp_path)) is None
    (tmp_path / "module_0001.jit_m.cpu_after_optimizations-buffer-assignment.txt").write_text("x")
    assert stages.after_optimizations(str(tmp_path)) is None
    (tmp_path / "module_0001.jit_m.cpu_after_optimizations.txt").write_text("HloModule jit_m\n")
    assert stages.after_optimizations(str(tmp_path)) == "HloModule jit_m\n"
    (tmp_path / "module_0002.jit_n.cpu_after_optimizations.txt").write_text("HloModule jit_n\n")
    assert stages.after_optimizations(str(tmp_path)) is None  # which one was compiled: not known here


MODEL = '''
import jax
import jax.numpy as jnp


def model(x, w):
    with jax.named_scope("block"):
        h = jnp.tanh(x @ w) * 2.0 + 1.0
    return jax.nn.softmax(h, axis=-1).sum(axis=0)


def example_inputs():
    return (jnp.ones((64, 32)), jnp.ones((32, 16)))
'''


def _compile():
    return stages.compile_model(load_source(MODEL, "m.py", "m"), "cpu").bundle


def test_what_is_made_beside_the_compile_is_what_the_serial_path_makes(monkeypatch):
    """The log parsed as it was written, the optimized module parsed and analyzed from the dump
    and the decisions mapped to it, against everything made from the compiled texts after the
    compile."""
    import threading

    from analysis.pipeline import Pipeline

    made = []
    analysis = Pipeline.analysis

    def spy(self):
        got = analysis(self)
        if threading.current_thread().name == "xla-explorer-beside-compile":
            made.append(got)
        return got

    monkeypatch.setattr(Pipeline, "analysis", spy)
    decided = []
    decide = stages.decide

    def decide_spy(follower, *a):
        decide(follower, *a)
        decided.append(follower.decided)

    monkeypatch.setattr(stages, "decide", decide_spy)
    polls = []
    poll = LogFollower.poll
    monkeypatch.setattr(LogFollower, "poll", lambda self, final=False: polls.append(final) or poll(self, final))
    made_here = {}
    for mode in ("beside", "serial"):  # one call site: the stacks XLA records are the same
        if mode == "serial":
            monkeypatch.setattr(stages, "after_optimizations", lambda d: None)
            monkeypatch.setattr(LogFollower, "poll", lambda self, final=False: False)  # never complete: the file
            monkeypatch.setattr(LogFollower, "complete", property(lambda self: False))
        made_here[mode] = _compile()
        if mode == "beside":
            assert made and made[-1] is not None and made_here[mode].kernels is made[-1][0]  # analyzed beside
            assert False in polls and polls[-1] is True  # polled during the compile, closed after it
            assert decided and made_here[mode].fusion_decisions is decided[-1][2]  # decided beside too
    beside, serial = made_here["beside"], made_here["serial"]
    assert beside.fusion_decisions["records"]
    assert beside.stages["hlo_after"] == serial.stages["hlo_after"]
    assert json.dumps(beside.to_dict()["kernels"]) == json.dumps(serial.to_dict()["kernels"])
    for key in ("provenance", "metrics", "fusion_decisions"):
        assert beside.to_dict()[key] == serial.to_dict()[key], key


def test_the_first_texts_carry_the_jaxpr_and_stablehlo_the_bundle_holds():
    """While XLA compiles, the first texts message has the HLO before optimization with the jaxpr
    and StableHLO, the very texts the bundle then holds (so a worker's answer leaves them out);
    the last message has the compiled HLO texts."""
    told: list[dict] = []
    b = stages.compile_model(load_source(MODEL, "m.py", "m"), "cpu", on_texts=told.append).bundle
    assert set(told[0]) == {"jaxpr", "stablehlo", "hlo_before"}
    for k in ("jaxpr", "stablehlo"):  # (not sent again: the worker's answer leaves out what is sent)
        assert told[0][k] is b.stages[k]
    assert told[0]["hlo_before"] == b.stages["hlo_before"]
    assert "exp" in told[0]["jaxpr"] and "stablehlo." in told[0]["stablehlo"]
    assert set(told[-1]) == {"hlo_before", "hlo_after"} and told[-1]["hlo_after"] == b.stages["hlo_after"]
    # the bundle holds a text object told, which a worker's answer then leaves out
    assert any(t.get("hlo_after") is b.stages["hlo_after"] for t in told)


def test_the_capture_echoes_what_is_not_the_fusion_log(tmp_path, capfd):
    """With a follower the log file is not rewritten; XLA's warnings and the user's own lines
    still reach stderr, the fusion lines do not."""
    follower = LogFollower(str(tmp_path / "xla-explorer.fusion-decisions.log"))
    with capture(str(tmp_path), follower) as path:
        if path is None:  # this jaxlib has no runtime log switch: nothing is captured
            return
        import os

        os.write(2, ("\n".join(LOG) + "\n").encode())
    err = capfd.readouterr().err
    assert follower.complete and follower.parser.lines == 8
    assert "a line the user's code printed" in err and "a warning XLA printed" in err
    assert "Considering fusion of" not in err


def test_a_measuring_worker_measures_at_its_own_priority_after_its_preview():
    """Timings are never taken at a lowered priority: a measuring job that sent its preview
    measures with every thread and its session's autogroup at the nice values it started with
    (in a new session, so this test's own group is left as it is)."""
    import json
    import os
    import subprocess
    import sys

    code = """
import os, json
from analysis.service.job import Job
from analysis.service.worker_main import execute
def nice():
    tids = sorted(int(x) for x in os.listdir('/proc/self/task'))
    try:
        group = int(open('/proc/self/autogroup').read().split()[-1])
    except OSError:
        group = None
    return {"threads": sorted({os.getpriority(os.PRIO_PROCESS, t) for t in tids}), "group": group}
start = nice()
seen = []
def preview(b):
    seen.append(len(b.kernels))
job = Job(kind="gallery", name="softmax", backend="cpu", measure=True, iterations=3, preview_kernels=0)
b = execute(job, preview=preview, ends_with_job=True)
print(json.dumps({"start": start, "end": nice(), "previewed": seen, "timed": bool(b.timings)}))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                         start_new_session=True, cwd=ROOT,
                         env={**os.environ, "JAX_PLATFORMS": "cpu"})
    assert out.returncode == 0, out.stderr[-2000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["previewed"] and got["timed"]
    assert got["end"] == got["start"]
