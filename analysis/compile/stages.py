"""Trace, lower and compile a loaded model, one ``jax.stages`` step at a time.

``compile_model`` runs trace -> jaxpr, lower -> StableHLO and HLO with metadata, compile ->
optimized HLO, times each, hands the texts to the pure analysis, and returns a ``Compiled``:
the Bundle plus what only this process has (the executable and its device arguments), so a
measurement can run it. Errors the user's code causes come back as ``ExplorerError`` with the
phase and the user's line.

While XLA compiles (C++, without the GIL) a thread beside it (``_Beside``) does the Python work
that does not need the executable: the jaxpr's text, the fusion log as it is written, and the
compile's ``analysis.pipeline.Pipeline`` fed XLA's dumps of the module it starts from and, once
XLA:CPU has dumped it (before its code generation), the optimized one. After the compile the
pipeline is offered the compiled texts: what it made beside XLA stands where they are those
dumps, and is made then where they are not.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import tempfile
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable

import jax

from analysis.bundle.core import Bundle, now
from analysis.compile.backend import allow_gpu_target, environment, select_device
from analysis.compile.code_dump import read_code
from analysis.compile.placement import (check_device_count, mesh_of, placed_inputs, sharding_text, target_devices,
                                       target_inputs)
from analysis.devices.catalog import check_devices, devices_in_source
from analysis.compile.load import LoadedModel, as_main, describe_inputs, load_model
from analysis.compile.user_errors import defined_at, user_code
from analysis.errors import ExplorerError
from analysis import tuning
from analysis.hlo import HloParseError
from analysis.hlo.parser import prepare as prepare_parser
from analysis.program.memory import agree_with_xla, memory_from_dir
from analysis.studies.passes import pass_log_from_dir
from analysis.pipeline import Pipeline, WorkAhead
from analysis.compile.xla_release import DUMP_OPTIONS as RELEASE_DUMP_OPTIONS
from analysis.compile.decisions import LOG_FILE, LogFollower, capture as capture_decisions, decide, read_decisions
from analysis.inputs.dump import AFTER_FILE
from sample_models import gallery


@dataclass
class Compiled:
    """One compile: its Bundle, and (when it was compiled for a device that is here) the
    executable with its arguments on that device, to run it."""

    bundle: Bundle
    loaded: LoadedModel
    executable: Any = None
    args: Any = None
    gpu_target: str | None = None

    def runnable(self) -> bool:
        return self.executable is not None and self.args is not None


def read_dump(bundle: Bundle, dump_dir: str, dump_passes: bool, say: Callable[[str], None],
              follower: LogFollower | None = None, on_graphs: Callable[[Bundle], None] | None = None) -> None:
    """What XLA wrote into the compile's dump folder, into the bundle: the pass-by-pass log when
    it was asked for. (Each reader of a dump file is one call here.) ``follower``: the fusion
    log, read during the compile. ``on_graphs`` gets the bundle once what its graphs are drawn
    from is in (the analyzed texts, the fusion decisions), before the buffer assignment and the
    kernels' code are read (a worker's preview: ``compile_model``)."""
    if dump_passes:
        say("passes")
        bundle.options["dump_passes"] = True
        bundle.pass_log = pass_log_from_dir(dump_dir)
    read_decisions(bundle, dump_dir, follower)  # the fusion passes' log (and XLA:GPU's fusion process dump)
    if on_graphs is not None:
        on_graphs(bundle)
    bundle.memory = memory_from_dir(dump_dir, bundle)  # buffer assignment, live ranges, peak
    bundle.code = read_code(dump_dir, bundle)  # each kernel's LLVM IR and machine code (docs/code.md)


def compile_model(loaded: LoadedModel, backend: str = "auto", compiler_options: dict | None = None,
                  progress: Callable[[str], None] | None = None, source_kind: str = "code",
                  gpu_target: str | None = None, dump_passes: bool = False,
                  on_texts: Callable[[dict], None] | None = None,
                  on_decisions: Callable[[dict], None] | None = None, devices: int | None = None,
                  ahead: WorkAhead | None = None, on_graphs: Callable[[Bundle], None] | None = None) -> Compiled:
    """Trace, lower, compile and analyze; raises ExplorerError. ``devices``: how many the
    program runs on (None: the model file's ``DEVICES = N``, else 1); this process must have
    them (a worker is started with them), a GPU target is described with them. ``on_texts`` receives the HLO
    before and after optimization as soon as XLA is done, before the analysis; before that,
    while XLA compiles, each text on its own as XLA dumps it, from another thread
    (``{"hlo_before": ...}`` with the ``jaxpr`` and ``stablehlo`` texts, then
    ``{"hlo_after": ...}``). The last call has the compiled HLO texts (equal to the early ones
    when XLA's dumps were those). ``on_decisions`` receives the fusion decisions made beside
    the compile from the optimized module's dump, from that thread (before XLA is done unless
    that thread was late); the bundle holds that very object when they stand
    (``read_decisions``). ``ahead`` (``analysis.pipeline.WorkAhead``): the caller's work, in
    that thread: its ``before`` on the module before optimization as soon as that parses (while
    XLA optimizes), its ``draft`` on a draft of the bundle once the decisions are made
    (``Pipeline.work_ahead``); what it makes there the bundle finds (the report's layer graphs,
    docs/performance.md). ``on_graphs`` gets the bundle, in this thread, as soon as everything its
    graphs are drawn from is in (its texts analyzed, its fusion decisions read): before the
    buffer assignment (``memory``), the kernels' code and XLA's own estimates
    (``cost_analysis``, ``memory_analysis``), which the bundle has once this returns
    (``GRAPHS_LATER``: a worker's preview is sent there, docs/worker.md).

    XLA dumps the compile into a private temporary folder (``xla_dump_to``; with ``dump_passes``
    a snapshot after every pass that changed the module), read by ``read_dump`` and removed; the
    bundle records the user's options, not the dump's. With ``gpu_target`` (a name in
    ``analysis.devices.catalog.GPU_TARGETS``) the program is compiled for that GPU without one being
    present: the inputs are only shapes, and nothing can be run."""
    compiler_options = dict(compiler_options or {})
    if devices is None:
        devices = devices_in_source(loaded.source, loaded.filename) or 1
    devices = check_devices(devices)
    dump_dir = tempfile.mkdtemp(prefix="xla-dump-")  # the worker's private /tmp in the sandbox
    follower = LogFollower(os.path.join(dump_dir, LOG_FILE))  # the log parsed beside the compile
    # No cyclic collection from trace to bundle: every structure made is kept (the parses,
    # kernels, decisions), and a full pass over them is a noticeable pause (docs/performance.md),
    # on either thread, at a moment set by allocation counts; what tracing leaves in cycles
    # waits until the pause ends
    try:
        with tuning.building():  # an entry point of analysis.tuning (the thread beside the compile is in it too)
            # the dump is read while XLA's own estimates are made beside it (C++, without the GIL:
            # docs/performance.md): reading it after them left this thread waiting
            c = compile_loaded(loaded, backend, compiler_options, progress, source_kind, gpu_target,
                         {"xla_dump_to": dump_dir, **RELEASE_DUMP_OPTIONS,
                          **({"xla_dump_hlo_pass_re": ".*"} if dump_passes else {})},
                         on_texts, follower, on_decisions=on_decisions, ahead=ahead,
                         read=lambda b: read_dump(b, dump_dir, dump_passes, progress or (lambda p: None), follower,
                                                   on_graphs),
                         around_xla=lambda: capture_decisions(dump_dir, follower),  # XLA's fusion log
                         devices=devices)
        return c
    finally:
        shutil.rmtree(dump_dir, ignore_errors=True)


def compile_loaded(loaded: LoadedModel, backend: str, compiler_options: dict, progress, source_kind: str,
             gpu_target: str | None, dump_options: dict, on_texts=None, follower=None,
             read: Callable[[Bundle], None] | None = None, around_xla=contextlib.nullcontext,
             on_decisions: Callable[[dict], None] | None = None, devices: int = 1,
             ahead: WorkAhead | None = None) -> Compiled:
    """Trace, lower, compile and analyze (``compile_model`` without its dump folder); ``read``
    takes the analyzed bundle before XLA's estimates are waited for (``read_dump``);
    ``around_xla()`` is the context XLA compiles in (``capture_decisions``)."""
    say = progress or (lambda phase: None)
    if gpu_target:
        allow_gpu_target()
        device, backend = target_devices(gpu_target, devices)[0], "gpu"
    else:
        device = select_device(backend)
    fn = loaded.filename
    # where an error JAX raises about the program, with none of its lines on the stack, points
    at = defined_at(loaded.source, "model")
    times: dict[str, float] = {}

    with user_code("inputs", fn):
        if gpu_target:
            args = target_inputs(loaded.inputs, target_devices(gpu_target, devices))
        else:
            check_device_count(device.platform, devices, fn)
            args = placed_inputs(loaded.inputs, device)

    say("trace")
    t0 = time.perf_counter()
    with user_code("trace", fn, at), as_main(loaded.module):
        traced = jax.jit(loaded.model).trace(*args)
    times["trace"] = time.perf_counter() - t0

    say("lower")
    t0 = time.perf_counter()
    with user_code("lower", fn, at):
        lowered = traced.lower()
        stablehlo = lowered.as_text()
    times["lower"] = time.perf_counter() - t0

    # While XLA compiles (C++, without the GIL) the jaxpr's text and the parse of the HLO
    # before optimization are made beside it (pure Python, docs/performance.md). That HLO is
    # the module XLA itself dumps as it starts (``*.before_optimizations.txt``): the same
    # instructions, metadata and stack frames as ``lowered.as_text(dialect="hlo",
    # debug_info=True)``, which would hold the GIL to convert it again.
    dump_dir = dump_options.get("xla_dump_to")
    env = environment(device, gpu_target, devices)
    # Each dump's text goes to ``on_texts`` as soon as it parses here: the HLO before
    # optimization as XLA starts, the optimized one as its code generation begins (at 192
    # layers half-way through a compile that keeps one core busy), so whoever reads them can
    # parse them beside the compile too; the compiled texts follow as ever
    # (the StableHLO and the jaxpr, known before XLA starts, go with the first of them)
    pipe = Pipeline(env.get("platform") or None)
    beside = _Beside(traced, dump_dir, follower, pipe, on_text=on_texts, stablehlo=stablehlo,
                     on_decisions=on_decisions,
                     ahead=(ahead, {"name": loaded.name, "file": fn, "code": loaded.source}) if ahead else None)
    say("compile")
    t0 = time.perf_counter()
    with around_xla():
        try:
            compiled = lowered.compile(compiler_options={**FULL_OPTIMIZATION, **compiler_options, **dump_options})
            stats = _ExecutableStats(compiled)  # XLA's own estimates, made beside what follows
            hlo_after = compiled.as_text()
        except Exception as e:  # noqa: BLE001 - XLA's errors (bad option, unsupported op): first line
            msg = str(e).strip().splitlines()
            raise ExplorerError("compile", msg[0] if msg else type(e).__name__, fn) from None
        finally:
            beside.compiled.set()
            beside.join()
    times["compile"] = time.perf_counter() - t0
    hlo_before = before_optimizations(dump_dir, hlo_after) if dump_dir else None
    if hlo_before is None:  # XLA wrote no dump (or not this module's): convert it here
        with user_code("lower", fn, at):
            hlo_before = lowered.as_text(dialect="hlo", debug_info=True)
    with user_code("trace", fn, at):
        jaxpr = beside.jaxpr if beside.jaxpr is not None else str(traced.jaxpr)
    if on_texts is not None:
        on_texts({"hlo_before": hlo_before, "hlo_after": hlo_after})

    say("analyze")
    t0 = time.perf_counter()
    bundle = Bundle(
        source={"kind": source_kind, "name": loaded.name, "file": fn, "code": loaded.source,
                "description": loaded.description, "inputs": _with_shardings(describe_inputs(loaded.inputs), args),
                **({"library": loaded.library, "parameters": loaded.parameters} if loaded.library else {}),
                **({"state_changes": list(loaded.state.changed)} if loaded.state is not None and loaded.state.changed
                   else {})},
        options={"backend": backend, "compiler_options": compiler_options,
                 **({"devices": devices, "mesh": mesh_of(args)} if devices > 1 else {})},
        environment=env,
        stages={"jaxpr": jaxpr, "stablehlo": stablehlo, "hlo_before": hlo_before, "hlo_after": hlo_after},
        created=now(),
    )
    for stage, text in (("hlo_before", hlo_before), ("hlo_after", hlo_after)):
        try:
            pipe.offer(stage, text)  # nothing to do where the thread beside XLA parsed this very module
        except HloParseError:
            pass  # the bundle parses it itself, and says where it is bad
    pipe.onto(bundle)  # its analysis: made beside XLA's code generation, or now
    times["analyze"] = time.perf_counter() - t0
    bundle.phase_seconds = {k: round(v, 4) for k, v in times.items()}
    if read is not None:
        read(bundle)
    bundle.cost_analysis, bundle.memory_analysis = stats.result()
    agree_with_xla(bundle)
    if gpu_target:  # a deviceless compile has nothing to run on
        return Compiled(bundle, loaded, gpu_target=gpu_target)
    return Compiled(bundle, loaded, compiled, args)


# What a bundle handed to ``compile_model``'s ``on_graphs`` does not have yet (read after it).
GRAPHS_LATER = ("memory", "code", "cost_analysis", "memory_analysis")

BEFORE_SUFFIX = ".before_optimizations.txt"

# XLA's default LLVM optimization level (its DebugOptions default), set on every compile whose
# code the user is shown, measured or timed: a CPU worker runs with O0 in XLA_FLAGS for the
# model's own eager ops (``analysis.service.worker_process.EAGER_XLA_FLAGS``), and this puts the default
# back for the compiles that count. (Checked on XLA:CPU: with O0 in XLA_FLAGS and this option,
# the optimized HLO, every kernel's LLVM IR and object file are byte for byte those of a
# compile with no flags at all.) A level the user asks for wins.
FULL_OPTIMIZATION = {"xla_backend_optimization_level": 3}


def _before_files(dump_dir: str) -> list[str]:
    try:
        return sorted(n for n in os.listdir(dump_dir) if n.endswith(BEFORE_SUFFIX))
    except OSError:
        return []


def before_optimizations(dump_dir: str, hlo_after: str | None = None) -> str | None:
    """The module XLA dumped as it started this compile (the HLO before optimization), or
    None. With several modules in the folder, the one named like the optimized module."""
    names = _before_files(dump_dir)
    m = re.match(r"HloModule ([\w.\-]+)", hlo_after or "")
    mine = [n for n in names if m and f".{m.group(1)}{BEFORE_SUFFIX}" in n]
    if not (mine or names):
        return None
    try:
        with open(os.path.join(dump_dir, (mine or names)[-1]), encoding="utf-8", errors="replace") as f:
            return f.read() or None
    except OSError:
        return None


def after_optimizations(dump_dir: str) -> str | None:
    """The optimized module XLA dumped (``*<platform>_after_optimizations.txt``), or None. XLA:CPU
    writes it before its code generation, well before the compile ends (docs/performance.md)."""
    try:
        names = sorted(n for n in os.listdir(dump_dir) if AFTER_FILE.match(n))
    except OSError:
        return None
    if len(names) != 1:  # none yet, or several modules: the compiled one is not known here
        return None
    try:
        with open(os.path.join(dump_dir, names[0]), encoding="utf-8", errors="replace") as f:
            return f.read() or None
    except OSError:
        return None


def _or_none(fn, *args):
    """``fn(*args)``, or None where it raises: beside the compile a part that fails is only made
    again by the caller after the compile, where its error is raised and reported as always; an
    estimate XLA's backend does not implement is none."""
    try:
        return fn(*args)
    except Exception:  # noqa: BLE001 - see above: the one place the beside thread's failures end
        return None


class _Beside(threading.Thread):
    """Work done in a thread while XLA compiles (C++, without the GIL): the jaxpr's text, the
    fusion log parsed as XLA writes it (``LogFollower``), and the compile's pipeline fed the
    modules XLA dumps as it starts and as it begins code generation (polled until they parse),
    analyzed once both are in, the fusion decisions mapped onto them, and then the caller's
    ``ahead`` work on a draft bundle of them (``compile_model``). A part that fails here is
    made again by the caller, so an error is raised (and reported) where it always was."""

    POLL_S = 0.01

    def __init__(self, traced, dump_dir: str | None, follower: LogFollower | None, pipe: Pipeline,
                 on_text: Callable[[dict], None] | None = None, stablehlo: str | None = None,
                 on_decisions: Callable[[dict], None] | None = None, ahead: tuple | None = None):
        super().__init__(name="xla-explorer-beside-compile", daemon=True)
        self._ahead = ahead  # (work, source) for a draft once the decisions are made, or None
        self._traced, self._dir, self._follower, self._pipe = traced, dump_dir, follower, pipe
        # {"hlo_before": text} once that dump parsed (with the jaxpr and ``stablehlo``), then
        # {"hlo_after": text}
        self._on_text = on_text
        self._on_decisions = on_decisions  # the decisions made here, once made
        self._with_first = {"stablehlo": stablehlo} if stablehlo else {}
        self.compiled = threading.Event()  # set by the caller once XLA is done
        self.jaxpr: str | None = None
        self.start()

    def run(self) -> None:
        # (at XLA's own priority: at a lower one, the fusion decisions the app's first graphs
        # wait for came later, docs/performance.md "Fourth pass")
        self.jaxpr = _or_none(lambda: str(self._traced.jaxpr))
        if not self._dir:
            return
        prepare_parser()  # (a fresh worker's first parse: its patterns compiled while XLA runs)
        tried: dict[str, str] = {}
        told: set[str] = set()
        while True:
            done = self.compiled.is_set()
            if self._follower is not None and not self._follower.failed and _or_none(self._follower.poll) is None:
                self._follower.failed = True  # (poll returns True or False) the log is read from its file after
            if "hlo_before" not in told and self._offer("hlo_before", before_optimizations(self._dir), tried):
                told.add("hlo_before")
                # while XLA optimizes: the module's own indexes, and the caller's work on it alone
                _or_none(self._pipe.prepare_before, self._ahead[0] if self._ahead else None)
                if self._follower is not None and not self._follower.failed:  # and the log's records matched to it
                    _or_none(self._follower.match_onto, self._pipe.parse("hlo_before")[1])
            if "hlo_before" in told and "hlo_after" not in told and \
                    self._offer("hlo_after", after_optimizations(self._dir), tried):  # (after the compile too)
                told.add("hlo_after")
                self._decide()
            if done or (len(told) == 2 and self._follower is None):
                return
            self.compiled.wait(self.POLL_S)

    def _offer(self, stage: str, text: str | None, tried: dict) -> bool:
        """A dump's text to the pipeline, and on to ``on_text`` once it parsed."""
        if not text or text == tried.get(stage):
            return False
        tried[stage] = text
        if _or_none(lambda: self._pipe.offer(stage, text) or True) is None:  # still being written (or bad)
            return False
        self._tell(stage, text)
        return True

    def _tell(self, stage: str, text: str) -> None:
        if self._on_text is not None and not self.compiled.is_set():  # (after it, the caller sends them)
            extra, self._with_first = self._with_first, {}
            if self.jaxpr is not None and stage == "hlo_before":
                extra = {**extra, "jaxpr": self.jaxpr}
            _or_none(self._on_text, {**extra, stage: text})  # (they go again once compiled)

    def _decide(self) -> None:
        """The pipeline's analysis of the two dumps, and the fusion decisions mapped onto them
        (sent to ``on_decisions``; also when XLA finished meanwhile: they still come before the
        bundle, which then leaves them out)."""
        made = _or_none(self._pipe.analysis)
        follower = self._follower
        if made is None or follower is None or follower.failed:
            return

        def decided():
            follower.poll()  # XLA:CPU logged its fusion passes before it dumped the module
            decide(follower, self._pipe.parse("hlo_before")[1], self._pipe.parse("hlo_after")[1], made[1],
                   self._pipe.platform or "", self._dir)
            return follower.decided

        got = _or_none(decided)
        if got is None:
            follower.decided = None
            return
        if self._on_decisions is not None:
            _or_none(self._on_decisions, got[2])  # (the bundle carries them all the same)
        if self._ahead is not None:
            work, source = self._ahead
            _or_none(self._pipe.work_ahead, work, got[2], source, made[1])  # (mapped with its provenance)


def recompile(c: Compiled, extra_options: dict) -> Compiled:
    """The same model, backend and target compiled again with ``extra_options`` added."""
    b = c.bundle
    options = {**(b.options.get("compiler_options") or {}), **extra_options}
    return compile_model(c.loaded, b.options.get("backend", "auto"), options,
                         source_kind=b.source.get("kind", "code"), gpu_target=c.gpu_target,
                         devices=b.options.get("devices", 1))


class _ExecutableStats(threading.Thread):
    """``compiled.cost_analysis()`` and ``compiled.memory_analysis()``, made in a thread: XLA
    computes them in C++ without holding the GIL (most of it the memory analysis:
    docs/performance.md), so they run beside the parse and analysis that follow the compile."""

    def __init__(self, compiled):
        super().__init__(name="xla-explorer-executable-stats", daemon=True)
        self._compiled = compiled
        self._result: tuple = (None, None)
        self.start()

    def run(self) -> None:
        self._result = (_cost_analysis(self._compiled), _memory_analysis(self._compiled))

    def result(self) -> tuple:
        """(cost analysis, memory analysis), each None where XLA gave none."""
        self.join()
        return self._result


def _cost_analysis(compiled) -> dict | None:
    ca = _or_none(compiled.cost_analysis)  # some backends do not implement it: the bundle says none
    if isinstance(ca, list):
        ca = ca[0] if ca else None
    if not ca:
        return None
    return {str(k): float(v) for k, v in ca.items()}


def _memory_analysis(compiled) -> dict | None:
    ma = _or_none(compiled.memory_analysis)  # some backends do not implement it: the bundle says none
    if ma is None:
        return None
    out = {}
    for k in dir(ma):
        if k.endswith("_in_bytes"):
            try:
                out[k] = int(getattr(ma, k))
            except (TypeError, ValueError):
                pass
    return out or None


def analyze_model(model: str, backend: str = "auto", compiler_options: dict | None = None,
                  progress: Callable[[str], None] | None = None, gpu_target: str | None = None,
                  devices: int | None = None, ahead: WorkAhead | None = None) -> Compiled:
    """``model`` is a gallery name or a path to a ``.py`` model file; ``devices`` and ``ahead``
    as for ``compile_model`` (``devices`` checked against this process's before the file runs)."""
    if gpu_target:
        allow_gpu_target()  # before the model's example inputs start JAX's backends
    if devices is None:
        devices = devices_in_source(model_source(model), model) or 1
    check_device_count(select_device(backend).platform, check_devices(devices), model)
    loaded, kind = load_model(model)
    return compile_model(loaded, backend, compiler_options, progress, source_kind=kind, gpu_target=gpu_target,
                         devices=devices, ahead=ahead)


def model_source(model: str) -> str:
    """The text of a gallery model or a model file (empty where there is none: loading says so)."""
    entry = gallery().get(model)
    if entry is not None:
        return entry.source
    try:
        with open(model, encoding="utf-8") as f:
            return f.read()
    except (OSError, UnicodeDecodeError):
        return ""


def _with_shardings(described: list[dict], args) -> list[dict]:
    """Each input's description with its sharding, where it is on a mesh."""
    for d, x in zip(described, jax.tree_util.tree_leaves(args)):
        text = sharding_text(x)
        if text is not None:
            d["sharding"] = text
    return described
