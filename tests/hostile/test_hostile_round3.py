"""Round 3 of the hostile corpus (issue 38): tiny inputs that cost the server gigabytes, minutes
or everyone's timings. One case per finding, each ending with the stated outcome; the worker's
cases run in the real bubblewrap sandbox."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings

import pytest

from analysis.bundle.core import Bundle
from analysis.errors import ExplorerError
from analysis.service.job import Job
from analysis.service.settings import REPO_ROOT, Limits
from app.explorer_state import explorer_state
from tests.hostile.conftest import needs_bwrap

CLI = [sys.executable, "-m", "analysis.cli"]


def rss_mb() -> float:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) / 1024 for line in f if line.startswith("VmRSS:"))


def one_line_error(p) -> str:
    assert p.returncode == 2, (p.returncode, p.stderr[-800:])
    lines = [ln for ln in p.stderr.splitlines() if ln.startswith("xla-explorer:")]
    assert len(lines) == 1 and "Traceback" not in p.stderr, p.stderr[-800:]
    return lines[0]


TAIL = """
def model(x):
    return x * 2

def example_inputs():
    import jax.numpy as jnp
    return (jnp.ones(3),)
"""

# A worker's protocol stream is an object in the user's process: the user's code can write a
# message to it (as tests/hostile/test_hostile_worker.py's flood does).
WRITE_MESSAGE = """
import gc, io
for _o in gc.get_objects():
    if isinstance(_o, io.TextIOWrapper) and not _o.closed and _o.writable() and _o.fileno() > 2:
        _o.write({line!r} + "\\n")
        _o.flush()
"""


# ----------------------------------------------------------------------------- 1: the decisions bomb


def decisions_bomb(n: int) -> dict:
    """Fusion-decision records by column that claim ``n`` rows and hold no column."""
    return {"records": {"count": n, "columns": {}}, "edges": []}


@pytest.mark.parametrize("n", [10**6, 10**12])
def test_a_decisions_bomb_in_a_bundle_is_refused_before_anything_is_made(n):
    text = json.dumps({"schema_version": 3, "fusion_decisions": decisions_bomb(n)})
    assert len(text) < 120  # the whole attack
    before = rss_mb()
    with pytest.raises(ExplorerError) as info:
        Bundle.from_json(text)
    assert "claims" in info.value.message and "no columns" in info.value.message
    assert "\n" not in info.value.one_line()
    # 10^6 rows made anyway were +32 MB (10^7: +320 MB); refused, nothing is made for them
    assert rss_mb() - before < 16


def test_a_count_over_the_bound_is_refused_even_when_backed(monkeypatch):
    rows = 6
    fd = {"records": {"count": rows, "columns": {"decision": ["fused"] * rows}}, "edges": []}
    text = json.dumps({"schema_version": 3, "fusion_decisions": fd})
    assert len(Bundle.from_json(text).fusion_decisions["records"]) == rows  # within the default bound
    monkeypatch.setenv("XLA_EXPLORER_MAX_RECORDS", "5")
    with pytest.raises(ExplorerError, match="count \\(6\\) is over the limit of 5 records"):
        Bundle.from_json(text)
    # a count that the columns do not back (5 values for 4 rows) stays refused as well
    monkeypatch.delenv("XLA_EXPLORER_MAX_RECORDS")
    fd["records"] = {"count": 4, "columns": {"decision": ["fused"] * 5}}
    with pytest.raises(ExplorerError, match="has 5 values for 4 rows"):
        Bundle.from_json(json.dumps({"schema_version": 3, "fusion_decisions": fd}))


def test_a_decisions_bomb_uploaded_to_the_cli_is_one_line(tmp_path):
    f = tmp_path / "bomb.json"
    f.write_text(json.dumps({"schema_version": 3, "fusion_decisions": decisions_bomb(10**12)}))
    p = subprocess.run(CLI + ["analyze", str(f)], capture_output=True, text=True, cwd=REPO_ROOT, timeout=300)
    line = one_line_error(p)
    assert "malformed bundle" in line and "no columns" in line and "MemoryError" not in p.stderr


@pytest.mark.sandbox
@needs_bwrap
def test_a_decisions_bomb_sent_early_by_pasted_code_is_dropped_and_costs_nothing():
    from analysis.service.worker import run_job

    line = json.dumps({"decisions": decisions_bomb(10**8)})
    source = WRITE_MESSAGE.format(line=line) + TAIL
    before = rss_mb()
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        ran = run_job(Job(source=source, name="bomb"), limits=Limits(timeout_s=120, memory_mb=2600))
    assert ran.bundle.kernels  # the job itself still ends with its bundle
    dropped = [str(w.message) for w in said if "fusion decisions were dropped" in str(w.message)]
    assert dropped and "no columns" in dropped[0], [str(w.message) for w in said]
    assert rss_mb() - before < 200  # 10^8 rows made were +3.2 GB


def test_an_unexpected_error_on_a_page_is_one_line():
    from app.page_helpers import unexpected

    line = unexpected(MemoryError(), "load", "bomb.json")
    assert line == "load error at bomb.json: out of memory (the input needs more than this server has)"
    line = unexpected(TypeError("unsupported operand\ntype(s)"), "compile")
    assert line == "compile error: internal error: TypeError: unsupported operand type(s)"


# ----------------------------------------------------------------------------- 2: dump ReDoS
# Each parser of a dump's text is fed an adversarial input of growing size. The largest would
# take minutes (or hours) were the parser quadratic in it: measured before the fix, each case's
# cost went x4 per doubling (24,000 open steps: 58 s). pytest-timeout bounds each case.

REDOS_TIMEOUT = 60


@pytest.mark.timeout(REDOS_TIMEOUT)
@pytest.mark.parametrize("lines", [1_000, 20_000, 400_000])
def test_fusion_steps_left_open_cost_linear_time(lines):
    from analysis.fusion.gpu_dump import parse_fusion_dump

    # quadratic: 8,000 lines took 6.7 s, so 400,000 would take about 4.6 hours
    decisions, module = parse_fusion_dump("fusion_steps {\n" * lines)
    assert decisions == [] and module is None
    # a closed step after the open ones still reads
    text = "fusion_steps {\n" * lines + 'fusion_steps {\n  fusion {\n    producer_name: "a"\n' \
        '    consumer_name: "b"\n    fusion_name: "f"\n  }\n}\n'
    decisions, _ = parse_fusion_dump(text)
    assert [(d.producer, d.consumer, d.fusion) for d in decisions] == [("a", "b", "f")]


@pytest.mark.timeout(REDOS_TIMEOUT)
def test_a_dump_zip_of_open_fusion_steps_is_read_in_moments():
    import io
    import zipfile

    from analysis.inputs.dump import bundles_from_dump_zip

    hlo = "HloModule m\n\nENTRY %e (p: f32[4]) -> f32[4] {\n  ROOT %p = f32[4]{0} parameter(0)\n}\n"
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("module_0001.m.before_optimizations.txt", hlo)
        zf.writestr("module_0001.m.priority_fusion_dump.txt", "fusion_steps {\n" * 400_000)
    data = buf.getvalue()
    assert len(data) < 20_000  # the upload is a few KB
    found = bundles_from_dump_zip(data, "steps.zip")
    assert found and found[0].stages.get("hlo_before") == hlo


@pytest.mark.timeout(REDOS_TIMEOUT)
@pytest.mark.parametrize("n", [1_000, 20_000, 400_000])
def test_buffer_assignment_lines_cost_linear_time(n):
    from analysis.program.memory import parse_buffer_assignment

    # quadratic: a run of 8,000 spaces took 0.4 s (400,000: about 17 minutes); a value's name
    # of 8,000 "a{" 0.14 s (400,000: about 6 hours)
    text = "allocation 0: size 16" + " " * n + "x, parameter 0:\n"
    [a] = parse_buffer_assignment(text)
    assert (a.index, a.size, a.parameter) == (0, 16, 0)
    with pytest.raises(ExplorerError, match="cannot read this buffer-assignment value"):
        parse_buffer_assignment("allocation 0: size 16:\n value: <1 " + "a{" * n + "\n")
    text = "allocation 0: size 16:\n value: <1 add.1{} @0> (size=16,offset=0): f32[4]{0}\n"
    [a] = parse_buffer_assignment(text)
    assert [(v.instruction, v.index, v.size) for v in a.values] == [("add.1", "{}", 16)]


# ----------------------------------------------------------------------------- 3: poisoned peaks

# The user's code runs in its worker before the measurement: it chooses the "calibration".
SLOW_PEAKS = """
import analysis.compile.measure as _m
_real = _m.calibrate_peaks
def _fake(device=None):
    p = _real(device)
    p["memory_bytes_per_s"] = 1.0
    return p
_m.calibrate_peaks = _fake
"""
TEXT_PEAKS = """
import analysis.compile.measure as _m
_m.calibrate_peaks = lambda device=None: {"source": "calibrated", "memory_bytes_per_s": "fast",
                                          "flops_per_s": {"matmul": "fast"}}
"""


def test_peaks_outside_a_physical_range_are_not_a_calibration():
    from analysis.service import peaks

    good = {"source": "calibrated", "memory_bytes_per_s": 2.0e10, "flops_per_s": {"matmul": 1.0e11},
            "machine": "host|cpu|cpu|16|0.10.2", "device_kind": "cpu", "note": "calibrated"}
    assert peaks.checked(good) == good
    for bad in ({"memory_bytes_per_s": 1.0}, {"memory_bytes_per_s": "fast"}, {"memory_bytes_per_s": True},
                {"memory_bytes_per_s": float("inf")}, {"flops_per_s": {"matmul": "x"}},
                {"flops_per_s": {"matmul": 1e30}}, {"flops_per_s": {}}, {"machine": ""},
                {"source": "table"}):
        assert peaks.checked({**good, **bad}) is None, bad
    assert peaks.checked({**good, "extra": "x" * 10**6}) == good  # only a calibration's own fields


@pytest.mark.sandbox
@needs_bwrap
@pytest.mark.parametrize("attack", [SLOW_PEAKS, TEXT_PEAKS], ids=["1 B/s", "text"])
def test_a_users_calibration_is_never_shared(tmp_path, attack):
    from analysis.service import peaks
    from analysis.service.cache_keys import probe_meta_key
    from analysis.service.job_queue import JobQueue, compile_job
    from analysis.service.store import Store

    store = Store(str(tmp_path / "store.sqlite"))
    q = JobQueue(Limits(timeout_s=120, measure_timeout_s=120, workers=1), store)
    try:
        try:
            compile_job(Job(source=attack + TAIL, name="evil", measure=True, iterations=3), session="evil", queue=q)
        except ExplorerError:
            pass  # (text peaks break the attacker's own measurement: theirs to break)
        assert store.get_meta(peaks.key(probe_meta_key())) is None
        # a later student's measurement calibrates afresh, and its numbers are physical
        b = compile_job(Job(source=TAIL, name="victim", measure=True, iterations=3), session="victim",
                        queue=q).bundle
        assert peaks.checked(b.timings["peaks"]) is not None
        pcts = [r["pct_of_peak"] for r in b.timings["kernels"].values() if r.get("pct_of_peak") is not None]
        assert pcts and max(pcts) < 10_000, pcts  # the attack's 1 B/s showed 1.3e13 "of peak"
    finally:
        q.shutdown()


# ----------------------------------------------------------------------------- 4: fairness


def test_the_session_id_reads_the_servers_real_xsrf_cookie():
    # The cookie as the app's server sets it (Streamlit's server writes Tornado's version-2
    # format: a 4-byte mask, the 16-byte token XORed with it): every tab of a browser gets the
    # same token under a new mask.
    from streamlit.web.server.starlette.starlette_app_utils import (decode_xsrf_token_string,
                                                                      generate_xsrf_token_string)

    from app.guard import xsrf_token, browser_session_id

    token = os.urandom(16)
    tabs = [generate_xsrf_token_string(token) for _ in range(4)]
    assert len({t.split("|")[1] for t in tabs}) > 1  # new masks (else the test shows nothing)
    assert [xsrf_token(t) for t in tabs] == [decode_xsrf_token_string(t)[0] for t in tabs] == [token] * 4
    headers, ip = {"User-Agent": "Mozilla/5.0 (X11; Linux x86_64) Chrome/140"}, "10.0.0.7"
    ids = {browser_session_id({"_streamlit_xsrf": t}, headers, ip) for t in tabs}
    assert len(ids) == 1
    other = browser_session_id({"_streamlit_xsrf": generate_xsrf_token_string(os.urandom(16))}, headers, ip)
    assert other not in ids
    # a fresh cookie jar is a new session of the same client (address and user agent)
    assert other.split("/")[0] == next(iter(ids)).split("/")[0]
    elsewhere = browser_session_id({"_streamlit_xsrf": tabs[0]}, headers, "10.0.0.8")
    assert elsewhere.split("/")[0] != other.split("/")[0]
    for bad in ("2|zz|00|1", "2|0a0b|1b2b3b4b|1", "2|0a0b0c0d||1"):  # not hex; a 2-byte mask; no token
        assert xsrf_token(bad) is None


class Gate:
    """A runner whose jobs run until the test lets each go; it records the order they started."""

    def __init__(self):
        import threading
        self.started: list[str] = []
        self.go: dict[str, "threading.Event"] = {}
        self._lock = threading.Lock()

    def __call__(self, job, progress=None, limits=None, cancel=None):
        import threading
        with self._lock:
            self.started.append(job.name)
            ev = self.go.setdefault(job.name, threading.Event())
        ev.wait(60)
        from analysis.bundle.core import bundle_from_hlo
        from analysis.service.worker import Ran
        return Ran(bundle_from_hlo("HloModule t\n\nENTRY %e () -> f32[] {\n  ROOT %c = f32[] constant(1)\n}\n"), False)

    def release(self, name):
        import threading
        with self._lock:
            self.go.setdefault(name, threading.Event()).set()


def test_fresh_cookie_jars_of_one_client_are_bounded_and_served_in_turn():
    from analysis.service.job_queue import JobQueue
    from tests.polling import wait_until

    gate = Gate()
    q = JobQueue(Limits(workers=1, session_jobs=3, client_jobs=4), store=None, runner=gate)
    try:
        # one attacker: fresh cookie jars (sessions) behind one address and user agent, each
        # with a measuring job
        hs = [q.submit(Job(name=f"jar{k}", measure=True), session=f"c-evil/b-{k}") for k in range(4)]
        with pytest.raises(ExplorerError, match="this browser's address already has 4 jobs"):
            q.submit(Job(name="jar4", measure=True), session="c-evil/b-4")
        wait_until(lambda: gate.started == ["jar0"], 30, "the first jar's job to start")
        # the attacker's own session, refilled; then a student's gallery link (a measuring job)
        victim = q.submit(Job(name="victim", measure=True), session="c-student/b-1")
        assert victim.position() == 1  # next after the running one, not after three more
        gate.release("jar0")
        wait_until(lambda: len(gate.started) == 2, 30, "the next job to start")
        assert gate.started == ["jar0", "victim"]
        # the compile lane takes turns the same way: a session's three jobs, then another's one
        c = [q.submit(Job(name=f"many{k}"), session="c-x/b-many") for k in range(3)]
        one = q.submit(Job(name="one"), session="c-y/b-one")
        wait_until(lambda: "many0" in gate.started, 30, "the first compile job")
        assert one.position() == 0 and c[2].position() == 2  # (a compile job: 0 is next)
        gate.release("many0")
        wait_until(lambda: "one" in gate.started, 30, "the other session's compile job")
        assert gate.started.index("one") == gate.started.index("many0") + 1
    finally:
        for name in ["victim", "one"] + [f"jar{k}" for k in range(5)] + [f"many{k}" for k in range(3)]:
            gate.release(name)
        q.shutdown(wait=False)


# ----------------------------------------------------------------------------- seccomp


@pytest.mark.sandbox
@needs_bwrap
def test_keyrings_io_uring_bpf_and_ptrace_are_refused_in_the_sandbox():
    import platform

    from analysis.service import seccomp
    from analysis.service.worker import run_job

    if not seccomp.supported():
        pytest.skip(f"no seccomp filter for {platform.machine()}")
    nr = seccomp.ARCHES[platform.machine()][1]
    calls = {  # each call with arguments that would do something real were it allowed
        "add_key": "libc.syscall(N['add_key'], b'user', b'job-a-secret', b'hunter2', 7, -3)",  # the user keyring
        "keyctl": "libc.syscall(N['keyctl'], 0, -3, 0)",  # KEYCTL_GET_KEYRING_ID of the user keyring
        "request_key": "libc.syscall(N['request_key'], b'user', b'job-a-secret', None, 0)",
        "io_uring_setup": "libc.syscall(N['io_uring_setup'], 8, ctypes.byref(ctypes.create_string_buffer(120)))",
        "bpf": "libc.syscall(N['bpf'], 0, ctypes.byref(ctypes.create_string_buffer(64)), 64)",  # BPF_MAP_CREATE
        "ptrace": "libc.syscall(N['ptrace'], 0, 0, 0, 0)",  # PTRACE_TRACEME
    }
    lines = ["import ctypes, os", "libc = ctypes.CDLL(None, use_errno=True)", f"N = {nr!r}", "out = {}"]
    for name, call in calls.items():
        lines += [f"r = {call}", f"out[{name!r}] = (r, ctypes.get_errno())"]
    lines += ["raise SystemExit('RESULTS=' + repr(out))"]
    with pytest.raises(ExplorerError) as info:
        run_job(Job(source="\n".join(lines) + "\n" + TAIL, name="syscalls"), limits=Limits(timeout_s=120))
    import ast
    got = ast.literal_eval(info.value.message.split("RESULTS=", 1)[1].strip())
    import errno
    want = {n: (-1, errno.ENOSYS if n.startswith("io_uring") else errno.EPERM) for n in calls}
    assert got == want
    # and a normal job still runs under the filter
    assert run_job(Job(source=TAIL, name="plain"), limits=Limits(timeout_s=120)).bundle.kernels


# ----------------------------------------------------------------------------- a worker's texts


BIG_HLO = """
_hlo = "HloModule big\\n\\nENTRY %e (p: f32[4]) -> f32[4] {\\n" + "".join(
    f"  %n{i} = f32[4]{{0}} negate(f32[4]{{0}} %p)\\n" for i in range(80_000)) + "  ROOT %p = f32[4]{0} parameter(0)\\n}\\n"
"""


@pytest.mark.sandbox
@needs_bwrap
def test_a_workers_texts_obey_the_upload_limit():
    from analysis.service.worker import run_job

    # 3.4 MB of HLO sent early (as a compile's texts are), then in the final bundle; the limit 2 MB
    ns: dict = {}
    exec(BIG_HLO, ns)
    assert len(ns["_hlo"]) > 3 * 2**20
    send = BIG_HLO + WRITE_MESSAGE.format(line="X").replace("'X' + ", "_json.dumps({'texts': {'hlo_before': _hlo}}) + ")
    limits = Limits(timeout_s=120, upload_mb=2)
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        ran = run_job(Job(source="import json as _json\n" + send + TAIL, name="texts"), limits=limits)
    dropped = [str(w.message) for w in said if "early texts were dropped" in str(w.message)]
    assert dropped and "hlo_before text is 3." in dropped[0] and "upload limit (2 MB" in dropped[0], dropped
    assert "HloModule big" not in ran.bundle.stages.get("hlo_before", "")  # the job's own texts, not the flood
    # the final bundle's texts are bounded the same way
    rewrite = BIG_HLO + """
import analysis.bundle.core as _b
_orig = _b.Bundle.to_dict
def _big(self, *args, **kw):
    d = _orig(self, *args, **kw)
    d.setdefault("stages", {})["hlo_before"] = _hlo
    return d
_b.Bundle.to_dict = _big
"""
    with pytest.raises(ExplorerError) as info:
        run_job(Job(source=rewrite + TAIL, name="texts"), limits=limits)
    assert info.value.phase == "limit" and "upload limit (2 MB" in info.value.message


# ----------------------------------------------------------------------------- memory: live curve


def _value(i, offset, size, start, end, allocation=0):
    return {"id": i, "name": f"v{i}", "kind": "temp", "allocation": allocation, "offset": offset, "size": size,
            "start": start, "end": end, "phi": False}


def test_the_live_curve_counts_each_byte_of_an_allocation_once():
    from analysis.program.memory import live_curve, peak_buffers

    # a: bytes 0-8 at steps 0-1; b: bytes 4-12 at steps 1-2; c: another allocation, step 2
    mem = {"schedule": ["s0", "s1", "s2"],
           "values": [_value(0, 0, 8, 0, 1), _value(1, 4, 8, 1, 2), _value(2, 0, 100, 2, 2, allocation=1)]}
    assert [p["total"] for p in live_curve(mem)] == [8, 12, 108]
    assert [p["temp"] for p in live_curve(mem)] == [8, 12, 108]
    rows = peak_buffers(mem, 1)
    assert [(r["name"], r["bytes"]) for r in rows] == [("v0", 8), ("v1", 4)]  # 12 bytes, each once


@pytest.mark.timeout(REDOS_TIMEOUT)
@pytest.mark.parametrize("n", [1_000, 50_000])
def test_the_live_curve_of_an_allocation_of_many_values_costs_n_log_n(n):
    from analysis.program.memory import live_curve, peak_buffers

    # value i: bytes 4i..4i+4 of one allocation, live from step i to the end. Summed again at
    # every step this was n^2 log n (20,000 values: 215 s; 50,000 would take over 20 minutes).
    mem = {"schedule": [f"s{t}" for t in range(n)], "values": [_value(i, 4 * i, 4, i, n - 1) for i in range(n)]}
    curve = live_curve(mem)
    assert [p["total"] for p in curve[:3]] == [4, 8, 12] and curve[-1]["total"] == 4 * n
    rows = peak_buffers(mem, n - 1)
    assert len(rows) == n and sum(r["bytes"] for r in rows) == 4 * n


# ----------------------------------------------------------------------------- compare: pairing


def _kernel(name, ops):
    from analysis.program.kernels import Kernel
    return Kernel(name=name, opcode="fusion", route="emitter", computation="main", shape="f32[4]",
                  op_names=tuple(ops))


def test_kernels_are_paired_by_their_most_similar_ops():
    from analysis.studies.compare import pair_kernels

    a = [_kernel("fa", ["x", "y"]), _kernel("ga", ["q"])]
    b = [_kernel("fb", ["x"]), _kernel("hb", ["x", "y", "z"]), _kernel("gb", ["r"])]
    got = {(m.a, m.b, m.how, m.score) for m in pair_kernels(a, b)}
    # {x,y} vs {x,y,z}: 2/3; vs {x}: 1/2
    assert got == {("fa", "hb", "ops", 0.667), ("ga", None, "only a", 0.0), (None, "fb", "only b", 0.0),
                   (None, "gb", "only b", 0.0)}


@pytest.mark.timeout(REDOS_TIMEOUT)
def test_pairing_two_big_bundles_kernels_is_not_k_squared():
    from analysis.studies.compare import pair_kernels

    # 20,000 kernels a side, each with an op of its own and one op every kernel carries: every
    # pair compared was K^2 (3,000 a side: 32 s and +360 MB; 20,000 would take over 20 minutes)
    k = 20_000
    a = [_kernel(f"a{i}", [f"op{i}", "shared"]) for i in range(k)]
    b = [_kernel(f"b{i}", [f"op{(i * 7) % k}", "shared"]) for i in range(k)]
    got = pair_kernels(a, b)
    assert len(got) == k
    inverse = pow(7, -1, k)  # b_j carries op (7j mod k): a_i's twin is b_(i / 7 mod k)
    assert all(m.how == "ops" and m.score == 1.0 and m.b == f"b{int(m.a[1:]) * inverse % k}" for m in got)


# ----------------------------------------------------------------------------- uploads


def _dump_zip(texts: dict) -> bytes:
    import io
    import zipfile

    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, text in texts.items():
            zf.writestr(name, text)
    return buf.getvalue()


def test_a_small_zip_of_much_hlo_is_held_to_the_upload_limit():
    from analysis.inputs.dump import bundles_from_dump_zip

    # 40 MB of HLO (two modules of 20 MB) deflate to a small zip; the texts to parse together
    # are held to the upload limit (here 32 MB), not to the zip's 200 MiB
    line = "  %n = f32[4]{0} negate(f32[4]{0} %p), metadata={op_name=\"jit(f)/neg\"}\n"
    body = line * (20 * 2**20 // len(line))
    head = "\n\nENTRY %e (p: f32[4]) -> f32[4] {\n  %p = f32[4]{0} parameter(0)\n"
    data = _dump_zip({f"module_000{k}.m{k}.before_optimizations.txt": f"HloModule m{k}" + head + body + "}\n"
                      for k in (1, 2)})
    assert len(data) < 2 * 2**20
    before = rss_mb()
    with pytest.raises(ExplorerError) as info:
        bundles_from_dump_zip(data, "big.zip", parsed_mb=32)
    assert "larger than the upload limit (32 MB" in info.value.message and info.value.file == "big.zip"
    assert rss_mb() - before < 200  # nothing was parsed (50 MB of HLO parsed was +580 MB)
    # a dump within the limit still opens
    small = "HloModule s\n\nENTRY %e (p: f32[4]) -> f32[4] {\n  ROOT %p = f32[4]{0} parameter(0)\n}\n"
    [b] = bundles_from_dump_zip(_dump_zip({"module_0001.s.before_optimizations.txt": small}), "s.zip", parsed_mb=1)
    assert b.stages["hlo_before"] == small


def test_the_server_refuses_an_upload_over_the_limit_before_reading_it():
    # Streamlit's own bound on an upload's size: without it a 190 MB upload was refused by the
    # page but held (+530 MB) first
    import tomllib

    with open(os.path.join(REPO_ROOT, ".streamlit", "config.toml"), "rb") as f:
        server = tomllib.load(f)["server"]
    assert server["maxUploadSize"] == Limits.upload_mb


def test_compares_uploads_are_held_to_the_upload_limit(monkeypatch):
    import ast

    from app.uploads import open_files

    # the Compare page's loader, taken from the page (whose top level draws the page) and run
    # on an upload over the limit, which must not be read (nor sent to the gate's worker)
    src = open(os.path.join(REPO_ROOT, "app", "sections", "compare.py")).read()
    fn = next(n for n in ast.parse(src).body if isinstance(n, ast.FunctionDef) and n.name == "_load_upload")
    shown: list = []
    ns = {"Bundle": Bundle, "open_files": open_files, "ExplorerError": ExplorerError, "show_error": shown.append}
    exec(compile(ast.Module([fn], []), "compare.py", "exec"), ns)

    class Upload:
        name, size = "huge.hlo", 35 * 2**20

        def getvalue(self):
            raise AssertionError("read before the size was checked")

    monkeypatch.setenv("XLA_EXPLORER_UPLOAD_MB", "32")
    assert ns["_load_upload"](Upload()) is None
    assert len(shown) == 1 and "35.0 MB, larger than the upload limit (32 MB" in shown[0]


# ----------------------------------------------------------------------------- bundle.memory


def _mlp_bundle() -> dict:
    with open(os.path.join(REPO_ROOT, "tests", "fixtures", "cpu", "mlp.bundle.json")) as f:
        return json.load(f)


def test_a_bundles_memory_is_checked_and_its_totals_derived():
    d = _mlp_bundle()
    mem = d["memory"]
    assert mem and mem["values"] and mem["peak"]
    real = Bundle.from_dict(json.loads(json.dumps(d))).memory["totals"]
    # the totals are the allocations' sizes added up, whatever the file says
    d["memory"]["totals"] = {"temp": 10**15}
    assert Bundle.from_dict(d).memory["totals"] == real
    assert real["all"] == sum(a["size"] for a in mem["allocations"])


@pytest.mark.parametrize("change, where", [
    (lambda m: m.update(values="many"), "memory.values"),
    (lambda m: m["values"][0].update(size="big"), "memory.values[0]"),
    (lambda m: m["values"][0].update(offset=-8), "memory.values[0]"),
    (lambda m: m["values"][0].update(kind="evil"), "memory.values[0]"),
    (lambda m: m["values"][0].update(start=0, end=10**9), "memory.values[0]"),
    (lambda m: m["values"][0].update(source="x.py"), "memory.values[0].source"),
    (lambda m: m["allocations"][0].update(kind=7), "memory.allocations[0]"),
    (lambda m: m.update(schedule=[{"a": 1}]), "memory.schedule"),
    (lambda m: m.update(peak={"bytes": "x", "step": 0, "instruction": "a"}), "memory.peak"),
    (lambda m: m.update(peak={"bytes": 1, "step": 10**6, "instruction": "a"}), "memory.peak"),
    (lambda m: m.update(schedule=["a"] * 3_000_000), "memory.schedule"),
])
def test_a_forged_memory_is_one_line(change, where):
    d = _mlp_bundle()
    change(d["memory"])
    with pytest.raises(ExplorerError) as info:
        Bundle.from_dict(d)
    assert info.value.message.startswith(f"malformed bundle: {where} ") and "\n" not in info.value.one_line()


def test_a_forged_memory_analysis_does_not_break_the_agreement():
    d = _mlp_bundle()
    d["memory_analysis"] = {"temp_size_in_bytes": "lots", "argument_size_in_bytes": 4}
    ag = Bundle.from_dict(d).memory["agreement"]
    assert "temp" not in ag and ag["argument"]["xla"] == 4


# ----------------------------------------------------------------------------- Markdown images

IMAGE = "![x](http://127.0.0.1:9/beacon.png)"


def _shown_markdown(at) -> list[str]:
    """Every text the page handed to Markdown: its markdown, captions, alerts, expander labels."""
    out = [m.value for m in at.markdown] + [c.value for c in at.caption]
    out += [e.value for kind in (at.warning, at.info, at.error) for e in kind]
    out += [getattr(e, "label", "") for e in at.expander]
    return out


def _fetches_nothing(texts: list[str]) -> None:
    for t in texts:
        # a fenced text block shows its content as written; anywhere else an image is fetched
        assert t.startswith("```text\n") or "![" not in t, t


@pytest.mark.sandbox
@needs_bwrap
def test_images_in_pasted_codes_docstring_are_never_fetched():
    from streamlit.testing.v1 import AppTest

    from analysis.service.job_queue import reset_default_queue

    from analysis.service import slots, worker_process
    from tests.polling import wait_until

    reset_default_queue()
    first = len(worker_process.recent_tokens)
    try:
        app = os.path.join(REPO_ROOT, "app", "main.py")
        at = AppTest.from_file(app, default_timeout=240)
        at.run()
        code = f'"""Evil {IMAGE} title.\n\nThe lesson {IMAGE} here."""\n' + TAIL
        at.radio(key="source_kind").set_value("Paste code").run()
        explorer_state(at.session_state).code = code
        at.run()
        at.button(key="compile").click().run()
        assert not at.exception, at.exception
        assert explorer_state(at.session_state).bundle.source.get("description", "").startswith("Evil")
        texts = _shown_markdown(at)
        assert any("beacon" in t for t in texts)  # the docstring is shown (as text)
        _fetches_nothing(texts)
    finally:
        # the app's page started a spare worker (maybe one still starting): ended, and waited for,
        # so the module's check finds no process of its jobs left
        worker_process.spare.keep(False)
        reset_default_queue()
        wait_until(lambda: not any(slots.processes_with_token(t)
                                   for t in list(worker_process.recent_tokens)[first:]), 60,
                   "the page's workers to end")


def test_images_in_a_links_parameters_are_never_fetched():
    from streamlit.testing.v1 import AppTest

    page = os.path.join(REPO_ROOT, "app", "sections", "compare.py")
    at = AppTest.from_file(page, default_timeout=240)
    at.query_params["mode"] = IMAGE
    at.run()
    assert not at.exception, at.exception
    texts = _shown_markdown(at)
    assert any("beacon" in t for t in texts), texts  # the warning names the value (as text)
    _fetches_nothing(texts)


# ----------------------------------------------------------------------------- an idle server


def test_an_idle_queue_holds_no_bundle_of_a_finished_job():
    import gc
    import weakref

    from analysis.bundle.core import bundle_from_hlo
    from analysis.service.job_queue import JobQueue
    from analysis.service.worker import Ran
    from tests.polling import wait_until

    made: list = []

    def runner(job, progress=None, limits=None, cancel=None, preview=None):
        b = bundle_from_hlo("HloModule t\n\nENTRY %e () -> f32[] {\n  ROOT %c = f32[] constant(1)\n}\n")
        made.append(weakref.ref(b))
        return Ran(b, False)

    q = JobQueue(Limits(workers=1), store=None, runner=runner)
    try:
        h = q.submit(Job(name="one", preview_kernels=1), session="c-a/b-a")
        assert h.result(30).bundle.stages
        del h  # the page is gone (a closed tab): nothing of the job is the caller's any more

        def freed():
            gc.collect()
            return made[0]() is None

        wait_until(freed, 10, "the finished job's bundle to be freed")
    finally:
        q.shutdown()


# ----------------------------------------------------------------------------- fusion comparison


def _compared() -> dict:
    d = _mlp_bundle()
    side = {"kernels": 4, "bytes": 2_000_000, "flops": 10, "step_median_s": 0.002, "device_busy_s": 0.001,
            "iterations": 10, "top_kernels": [{"name": "f", "route": "emitter", "median_s": 0.001, "calls": 1}]}
    d["fusion_comparison"] = {"platform": "cpu", "disabled_passes": ["fusion"], "measured": True,
                              "default": side, "unfused": {**side, "kernels": 14, "bytes": 5_000_000,
                                                           "step_median_s": 0.005}}
    return d


def test_what_fusion_saved_is_derived_from_the_two_sides():
    d = _compared()
    d["fusion_comparison"].update(kernels_saved=999, speedup=1e9, bytes_saved="lots")
    fc = Bundle.from_dict(d).fusion_comparison
    # 14 - 4 kernels, 5 MB - 2 MB, 5 ms / 2 ms
    assert (fc["kernels_saved"], fc["bytes_saved"], fc["speedup"]) == (10, 3_000_000, 2.5)


@pytest.mark.parametrize("change", [
    lambda fc: fc.pop("unfused"),
    lambda fc: fc["default"].pop("kernels"),
    lambda fc: fc["unfused"].update(bytes=None),
    lambda fc: fc["default"].update(step_median_s="fast"),
    lambda fc: fc["unfused"].update(top_kernels=[{"route": "emitter"}]),
    lambda fc: fc.update(disabled_passes="fusion"),
], ids=["no side", "no kernels", "no bytes", "text time", "nameless row", "passes not a list"])
def test_a_fusion_comparison_that_lacks_fields_is_one_line(tmp_path, change):
    d = _compared()
    change(d["fusion_comparison"])
    with pytest.raises(ExplorerError, match="malformed bundle: fusion_comparison"):
        Bundle.from_dict(json.loads(json.dumps(d)))
    f = tmp_path / "fc.json"
    f.write_text(json.dumps(d))
    p = subprocess.run(CLI + ["analyze", str(f)], capture_output=True, text=True, cwd=REPO_ROOT, timeout=300)
    assert "fusion_comparison" in one_line_error(p)  # was: internal error: TypeError


# ----------------------------------------------------------------------------- deep scopes


@pytest.mark.parametrize("command", ["layers", "report"])
def test_scopes_3000_deep_are_walked_without_recursion(tmp_path, command):
    depth = 3000
    scope = "/".join(f"s{i}" for i in range(depth))
    hlo = ("HloModule deep\n\nENTRY %e (p: f32[4]) -> f32[4] {\n  %p = f32[4]{0} parameter(0)\n"
           f'  ROOT %n = f32[4]{{0}} negate(f32[4]{{0}} %p), metadata={{op_name="jit(f)/{scope}/neg"}}\n}}\n')
    f = tmp_path / "deep.hlo"
    f.write_text(hlo)
    args = [command, str(f)] + (["--html", str(tmp_path / "r.html")] if command == "report" else [])
    p = subprocess.run(CLI + args, capture_output=True, text=True, cwd=REPO_ROOT, timeout=300)
    assert p.returncode == 0 and "RecursionError" not in p.stderr, p.stderr[-800:]
    if command == "layers":
        assert "s0" in p.stdout  # the tree's top layer


def test_a_deep_layer_tree_rolls_its_totals_up():
    from analysis.program.layers import Layer, roll_up

    root = node = Layer(())
    for i in range(5000):  # a chain: each layer's bytes 1, the deepest layer's time 2 s
        child = Layer(node.path + (f"s{i}",))
        child.bytes = 1
        node.children[f"s{i}"] = child
        node = child
    node.time_s = 2.0
    assert roll_up(root) == (5000, 2.0)
    assert [layer.bytes for layer in list(root.walk())[:3]] == [5000, 5000, 4999]


# ----------------------------------------------------------------------------- a locked store


@pytest.mark.timeout(60)
def test_a_locked_store_makes_a_page_wait_once_not_per_call(tmp_path):
    from analysis.service.store import Store, StoreBusy
    from tests.hostile.test_hostile_inputs import _hold_lock

    path = str(tmp_path / "store.sqlite")
    Store(path).put_code("x = 1")
    holder = _hold_lock(path)
    try:
        s = Store(path, busy_s=2.0)
        # a page's calls while another process holds the lock: the first waits busy_s, the
        # others answer "store busy" at once. Each waiting its own 2 s, these 40 were 80 s, past
        # this test's time limit.
        for k in range(40):
            with pytest.raises(StoreBusy) as info:
                [s.put_code, s.get_code, s.get_meta][k % 3]("y = 2" if k % 3 == 0 else "peaks:x")
            assert info.value.one_line().count("\n") == 0 and "store busy" in info.value.message
    finally:
        holder.kill()
        holder.wait()
    # the lock gone, the store answers again
    from tests.polling import wait_until

    def answers():
        try:
            return s.get_code(s.put_code("z = 3")) == "z = 3"
        except StoreBusy:
            return False

    wait_until(answers, 30, "the store to answer again")
