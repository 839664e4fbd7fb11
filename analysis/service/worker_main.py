"""The worker process: ``python -m analysis.service.worker_main`` compiles (and maybe measures)
one job and answers in the protocol of ``analysis.service.job``.

Before it reads the job it applies the resource limits it is given in ``$XLA_EXPLORER_RLIMITS``
(set by ``analysis.service.worker_process``), so the user's code can never raise them. Anything the
user's code prints goes to stderr, never into the protocol stream.
"""

from __future__ import annotations

import base64
import json
import os
import sys
import threading
from typing import Callable

from analysis.bundle.core import Bundle
from analysis.fusion.codec import fusion_decisions_json
from analysis.compile import backend, hlo_proto, load, measure, placement, recipe, sweep
from analysis.errors import ExplorerError
from analysis import tuning
from analysis.hlo.parser import prepare as prepare_parser
from analysis.codegen.finish import disassemble_objects
from analysis.inputs import Upload, open_upload
from analysis.service.job import Job, Opened, is_measure, job_devices
from analysis.service.messages import (Answer, Decisions, Failure, Measured, Preview, Probe, Progress, Texts,
                                       leave_out, measured_fields)
from analysis.service import messages
from analysis.pipeline import WorkAhead


def execute(job: Job, progress: Callable[[str], None] | None = None,
            preview: Callable[[Bundle], None] | None = None,
            texts: Callable[[dict], None] | None = None, ends_with_job: bool = False,
            decisions: Callable[[dict], None] | None = None, ahead: WorkAhead | None = None) -> Bundle:
    """Run a job in this process (the worker's body). ``texts`` receives the HLO before and after
    optimization once compiled (the parent parses them while this process analyzes), and
    ``decisions`` the fusion decisions made beside the compile (``compile_model``), and ``ahead``
    works on a draft of the bundle there (``compile_model``: a trusted CLI run's report). A measuring
    job of a program with at least ``job.preview_kernels`` kernels hands its compiled bundle to
    ``preview`` before measuring. ``ends_with_job``: this process exits after the job (the
    worker), so the compile's objects are never looked at by the collector again."""
    say = progress or (lambda p: None)
    if job.kind == "probe":
        raise ExplorerError("protocol", "a probe job has no bundle; use probe()")
    if job.kind == "open":  # an upload, through the gate (what only XLA reads, XLA prints here)
        say("load")
        b = open_upload(upload_of(job), print_proto=hlo_proto.hlo_text)
        disassemble_objects(b)
        return b
    if job.kind == "sweep":
        return sweep.run_sweep(job, progress)
    if job.gpu_target and job.measure:
        raise ExplorerError("options", f"a compile for GPU target {job.gpu_target!r} without a GPU cannot be "
                                       "measured (there is nothing to run it on)")
    if job.gpu_target:
        backend.allow_gpu_target()
    devices = job_devices(job)
    if devices > 1:  # before the file builds its mesh (which would fail less clearly)
        placement.check_device_count(backend.select_device(job.backend).platform, devices, job.filename)
    if job.kind == "gallery":
        loaded = load.load_gallery(job.name)
    else:
        say("load")
        loaded = load.load_source(job.source, job.filename, job.name)
    with load.as_main(loaded.module):  # the user's code runs as under ``python FILE`` throughout
        return _compile_and_measure(job, loaded, progress, preview, texts, ends_with_job, decisions, devices, ahead)


def upload_of(job: Job) -> Upload:
    """The ``Upload`` an ``open`` job carries (``analysis.service.job.upload_job``)."""
    extra = job.upload or Opened()

    def raw(text) -> bytes:
        try:
            return base64.b64decode(text or "", validate=True)
        except (ValueError, TypeError):
            raise ExplorerError("protocol", "an open job's bytes are not base64", job.filename) from None

    return Upload(name=job.filename, data=raw(job.source), trace_name=extra.trace_name,
                  trace=raw(extra.trace) if extra.trace is not None else None, module=extra.module,
                  prefer=extra.prefer)


def _compile_and_measure(job: Job, loaded, progress, preview, texts, ends_with_job, decisions,
                         devices: int = 1, ahead: WorkAhead | None = None) -> Bundle:
    previewing = (is_measure(job) and preview is not None and job.preview_kernels is not None)

    def on_graphs(b: Bundle) -> None:
        # a big program's preview, as soon as its graphs can be drawn: the buffer assignment and
        # the kernels' code (read next) come with the measurement (messages.MEASURED_FIELDS)
        if len(b.kernels) >= job.preview_kernels:
            preview(b)

    # No collector pass from the compile until its preview is sent, and in a process that ends
    # with the job none over the compile's objects after (none are garbage): they go into the
    # collector's permanent generation as the pause ends (docs/performance.md); what cycles
    # the compile left are freed when the process exits.
    with tuning.building():  # an entry point of analysis.tuning
        c = recipe.compile(loaded, job.backend, job.compiler_options, progress, source_kind=job.kind,
                           gpu_target=job.gpu_target, dump_passes=job.dump_passes, on_texts=texts,
                           on_decisions=decisions, devices=devices, ahead=ahead,
                           on_graphs=on_graphs if previewing else None)
        disassemble_objects(c.bundle)  # here, not in the parent (no ELF reader runs there)
        if ends_with_job:
            tuning.freeze()
    if is_measure(job):
        if job.peaks:
            measure.CALIBRATIONS.remember(c.bundle.environment, job.peaks)
        recipe.measured(c, measure_it=job.measure, compare=job.compare_fusion, iterations=job.iterations,
                        progress=progress)
    if job.inductor:
        recipe.beside_inductor(c, measure_it=job.measure, progress=progress)
    return c.bundle


def apply_limits(spec: dict) -> None:
    """Lower this process's resource limits (soft and hard, so they stay down)."""
    import resource

    def setl(res, value):
        try:
            resource.setrlimit(res, (value, value))
        except (ValueError, OSError):
            pass

    mb = 1024 * 1024
    setl(resource.RLIMIT_CORE, 0)
    if spec.get("cpu_s"):
        resource.setrlimit(resource.RLIMIT_CPU, (int(spec["cpu_s"]), int(spec["cpu_s"]) + 5))
    if spec.get("as_mb"):
        setl(resource.RLIMIT_AS, int(spec["as_mb"]) * mb)
    if spec.get("data_mb"):
        setl(resource.RLIMIT_DATA, int(spec["data_mb"]) * mb)
    if spec.get("file_mb"):
        setl(resource.RLIMIT_FSIZE, int(spec["file_mb"]) * mb)
    if spec.get("nproc"):
        setl(resource.RLIMIT_NPROC, int(spec["nproc"]))


# After a big program's preview the worker waits for the page to draw it (its parent closes our
# stdin: ``worker_process``'s ``hold``) before it reads the dump's rest and times the kernels, so
# the reading and the timing loops do not take the cores the page draws with, nor the drawing
# the cores the kernels are timed on (docs/performance.md). At most this long: a page that never
# draws (a tab closed) does not keep the timings back for more.
PREVIEW_HOLD_S = 15.0


def wait_for_release(fd: int = 0, bound: float = PREVIEW_HOLD_S) -> bool:
    """Wait until ``fd`` (the job's stdin, after its one line) is closed by the parent, or
    ``bound`` seconds pass; True when the parent released it."""
    import select

    ready, _, _ = select.select([fd], [], [], bound)
    return bool(ready)


_LIMIT_WORDS = ("RESOURCE_EXHAUSTED", "MemoryError", "Out of memory", "out of memory", "Cannot allocate memory")


def _as_limit(err: ExplorerError) -> ExplorerError:
    """Memory exhaustion reported by JAX/XLA is a limit, whatever phase it happened in."""
    if err.phase != "limit" and any(w in (err.message or "") for w in _LIMIT_WORDS):
        return ExplorerError("limit", f"out of memory ({err.phase}): {err.message}", err.file, err.line,
                             err.column, err.excerpt)
    return err


def _worker_main() -> int:
    import faulthandler
    import signal

    spec = os.environ.get("XLA_EXPLORER_RLIMITS")
    if spec:
        apply_limits(json.loads(spec))
    # A crash (segfault in the user's ctypes, ...) dumps the Python stack, user's line included,
    # to stderr, where the parent finds it.
    faulthandler.enable(file=sys.stderr, all_threads=False)
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a too-large write fails with EFBIG instead
    out = sys.stdout
    # The user's prints must not corrupt the protocol: route fd 1 to stderr for everything else.
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    del out

    lock = threading.Lock()  # the thread beside the compile sends the early texts

    def emit(msg):
        line = messages.line(msg)
        with lock:
            proto.write(line)
            proto.flush()

    if os.environ.get("XLA_EXPLORER_SPARE"):  # started ahead of its job (worker_process.keep_spare): while it
        prepare_parser()  # waits, what the job would otherwise do first
    try:
        # the job is one line; the parent keeps stdin open after it while a preview may be held
        job = Job.from_dict(json.loads(sys.stdin.buffer.readline()))
    except ExplorerError as e:
        emit(Failure(e.to_dict()))
        return 0
    except (ValueError, TypeError) as e:
        emit(Failure(ExplorerError("protocol", f"bad job: {e}").to_dict()))
        return 0
    try:
        if job.kind == "probe":
            emit(Probe(backend.probe()))
            return 0
        previewed = []
        sent: dict = {}

        def texts(t):
            # the dumps' texts as XLA writes them, then the compiled ones: a text already sent
            # goes once (the parent has it); ``sent`` holds the objects sent, the ones the bundle
            # holds (the pipeline keeps the first of equal texts), which leave_out leaves out
            new = {k: v for k, v in t.items() if sent.get(k) != v}
            sent.update(new)
            if new:
                emit(Texts(new))

        decided: list = []

        def decisions(fd):
            # made beside the compile, from the optimized module's dump: the parent draws with
            # them before XLA is done; the bundle leaves them out if they stand
            emit(Decisions(fusion_decisions_json(fd)))
            decided.append(fd)

        def preview(b):
            emit(Preview(leave_out(b, sent, decided[0] if decided else None)))
            previewed.append(True)
            emit(Progress("held"))  # until the page has drawn it (PREVIEW_HOLD_S)
            wait_for_release()

        bundle = execute(job, lambda p: emit(Progress(p)), preview, texts, ends_with_job=True,
                         decisions=decisions)
        if previewed:  # the parent has the rest: what was read after the preview and what measuring added
            with tuning.building():
                emit(Measured(measured_fields(bundle)))
        else:
            with tuning.building():  # the answer's objects too (see execute)
                emit(Answer(leave_out(bundle, sent, decided[0] if decided else None)))
    except ExplorerError as e:
        emit(Failure(_as_limit(e).to_dict()))
    except MemoryError:
        emit(Failure(ExplorerError("limit", "out of memory", job.filename).to_dict()))
    except BaseException as e:  # noqa: BLE001 - the protocol's last word: anything the user's code raised
        emit(Failure(ExplorerError("run", f"{type(e).__name__}: {e}", job.filename).to_dict()))
    return 0


def _end(code: int) -> None:
    """The worker's end once its last message is written (each line is flushed as it goes): the
    process exits at once, without the interpreter's way out (JAX's client closed, the compile's
    objects freed one by one: 0.2 s at 96 layers, docs/performance.md), which the parent would
    wait for, having read the answer, until the worker's output ends. Nothing of the job is left
    to write: its scratch folder is the sandbox's, removed with it."""
    for f in (sys.stdout, sys.stderr):
        try:
            f.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)


if __name__ == "__main__":
    _end(_worker_main())
