"""The Ray engine: the same sandboxed worker, run as a Ray task on the node Ray picks.

The home-made thread queue (``analysis.service.job_queue.JobQueue``) stays in front: the cache,
identical requests in flight shared, per-session limits, handles with status, position, phase,
result and cancel. With ``engine = "ray"`` its runner is ``RayRunner`` instead of the local
``run_job``: each job becomes one Ray task that runs ``worker_process.run_worker`` on its node
(bubblewrap there, the same limits) and streams the worker's phases back as it goes (a Ray
streaming generator), so the caller's handle moves while the job runs.

- **Placement.** A compile job asks for one CPU. A measuring job asks for what makes its
  timings clean: on a GPU backend one GPU (``num_gpus=1``); on the CPU every CPU of the largest
  node, so nothing else runs beside it there.
- **Faults.** A node lost mid-job: Ray runs the task again once elsewhere (``max_retries=1``);
  lost twice, the job ends with a one-line error. Cancel: the task is cancelled; inside it, the
  cancel reaches ``run_worker``, which kills the sandboxed process tree on that node (bwrap's
  ``--die-with-parent`` covers a worker that is killed outright). A cluster that cannot be
  reached is a one-line ``engine`` error naming the address, after ``CONNECT_S`` at most.
- **Trust.** What a node sends back is checked like an upload: the parent re-derives the bundle
  from its HLO texts (``worker.untrusted_bundle``).

Ray is optional (``pip install -e '.[ray]'``); nothing here is imported unless the engine is.
"""

from __future__ import annotations

import os
import queue
import socket
import threading
import time
from dataclasses import asdict
from typing import Callable

from analysis.errors import ExplorerError
from analysis.pipeline import WorkAhead
from analysis.service import messages
from analysis.service.job import Job, is_measure
from analysis.service.settings import EngineSettings, Limits
from analysis.service.failure import describe_failure
from analysis.service.worker_process import run_worker
from analysis.service.worker import EarlyParts, Ran, interpret

CONNECT_S = 20.0  # longest wait for a Ray cluster to answer
NAMESPACE = "xla-explorer"
_init_lock = threading.Lock()


def _ray():
    try:
        import ray
    except ImportError:
        raise ExplorerError("engine", "engine = \"ray\" needs Ray: pip install -e '.[ray]'") from None
    return ray


# ``ray.init`` without an address starts the local cluster's processes (GCS, raylet) as children
# of the calling thread, with a parent-death signal: Linux sends it when that *thread* ends, so a
# cluster started from a short-lived thread was killed a second after it started (and the app
# with it). Every ``ray.init`` therefore runs on one thread that lives as long as the process.
_host_jobs: "queue.SimpleQueue | None" = None


def _on_host(fn: Callable[[], None]) -> threading.Event:
    """Run ``fn`` on the process's long-lived Ray thread (started on first use); the event is
    set once it has returned."""
    global _host_jobs
    if _host_jobs is None:
        _host_jobs = queue.SimpleQueue()
        threading.Thread(target=_host_loop, args=(_host_jobs,), name="xla-explorer-ray-host", daemon=True).start()
    done = threading.Event()
    _host_jobs.put((fn, done))
    return done


def _host_loop(jobs: "queue.SimpleQueue") -> None:
    while True:
        fn, done = jobs.get()
        try:
            fn()
        except BaseException:  # noqa: BLE001 - fn reports its own failure; the thread must stay
            pass
        finally:
            done.set()


def connect(settings: EngineSettings) -> str:
    """Join (or, without an address, start) the Ray cluster; returns where it is. Raises a
    one-line ``engine`` error when it cannot be reached within ``CONNECT_S``."""
    ray = _ray()
    with _init_lock:
        if ray.is_initialized():
            return settings.address or "local"
        address = settings.address or None
        out: dict = {}

        def init():
            try:
                kw = dict(namespace=NAMESPACE, ignore_reinit_error=True, log_to_driver=False,
                          include_dashboard=False)
                if address is None:
                    kw.update(num_cpus=settings.local_cpus or None, object_store_memory=settings.object_store_mb << 20)
                ray.init(address=address, **kw)
                out["ok"] = True
            except Exception as e:  # noqa: BLE001 - every way Ray fails to connect is one line
                out["error"] = f"{type(e).__name__}: {' '.join(str(e).split())[:200]}"

        _on_host(init).wait(CONNECT_S)
        if not out.get("ok"):
            why = out.get("error") or f"no answer within {CONNECT_S:g} s"
            raise ExplorerError("engine", f"cannot reach the Ray cluster at {address or 'a new local cluster'}: {why}")
        return address or "local"


def _node_cpus(ray) -> float:
    """CPUs of the largest alive node (a measuring CPU job takes a whole node)."""
    best = 0.0
    for n in ray.nodes():
        if n.get("Alive"):
            best = max(best, float((n.get("Resources") or {}).get("CPU", 0)))
    return best or 1.0


def resources_for(job: Job, node_cpus: float) -> dict:
    """The Ray resources a job asks for (see the module docstring)."""
    if is_measure(job):
        if job.backend in ("gpu", "cuda", "rocm"):
            return {"num_cpus": 1, "num_gpus": 1}
        return {"num_cpus": node_cpus, "num_gpus": 0}
    return {"num_cpus": 1, "num_gpus": 0}


def _remote_body(job: dict, limits: dict):
    """The Ray task (a streaming generator): run the sandboxed worker on this node, yield its
    phases as ``("phase", text)``, its HLO once compiled as ``("texts", {...})``, the fusion
    decisions it made beside the compile as ``("decisions", {...})``, a measuring
    job's preview as ``("preview", bundle)`` (the worker's raw messages, checked by the caller)
    and last ``("done", {...})`` with the worker's raw final message."""
    phases: list = []
    have = threading.Condition()
    cancel = threading.Event()
    out: dict = {}

    def say(p):
        with have:
            phases.append(("phase", p))
            have.notify_all()

    def early(kind):
        def put(d):
            with have:
                phases.append((kind, d))
                have.notify_all()
        return put

    def body():
        try:
            lim = Limits(**limits)
            res = run_worker(job, lim, say, cancel,
                             early("preview") if job.get("preview_kernels") is not None else None,
                             early("texts"), early("decisions"))
            # the final message in its wire form (JSON values) to the caller, which reads it as untrusted
            out["message"] = messages.wire(res.message) if res.message is not None else None
            out["isolated"] = res.isolated
            if res.message is None:
                code = job.get("source") if job.get("kind") in ("code", "file") else None  # (an upload is no code)
                out["failure"] = describe_failure(res, lim, job.get("filename"), code).to_dict()
        except ExplorerError as e:
            out["failure"] = e.to_dict()
        except Exception as e:  # noqa: BLE001 - a bug on the node is still one line for the caller
            out["failure"] = ExplorerError("run", f"internal error on the node: {type(e).__name__}: {e}",
                                           job.get("filename")).to_dict()
        finally:
            with have:
                out["finished"] = True
                have.notify_all()

    t = threading.Thread(target=body, daemon=True)
    t.start()
    try:
        import ray

        node_id = ray.get_runtime_context().get_node_id()
    except Exception:  # noqa: BLE001 - only a name for the caller's status line
        node_id = ""
    yield ("node", {"hostname": socket.gethostname(), "node_id": node_id})
    sent = 0
    try:
        while True:
            with have:
                while sent >= len(phases) and not out.get("finished"):
                    have.wait(0.5)
                batch, sent = phases[sent:], len(phases)
                finished = out.get("finished")
            for item in batch:
                yield item
            if finished:
                break
    except BaseException:
        # cancelled (Ray raises in the task): the worker's process tree goes with it
        cancel.set()
        t.join(30)
        raise
    yield ("done", {"message": out.get("message"), "isolated": bool(out.get("isolated")),
                    "failure": out.get("failure"),
                    "node": {"hostname": socket.gethostname(), "pid": os.getpid()}})


class RayRunner:
    """A ``JobQueue`` runner (``runner(job, progress, limits=, cancel=) -> Ran``) that runs each
    job as a Ray task."""

    def __init__(self, settings: EngineSettings):
        self.settings = settings
        self.where = connect(settings)
        ray = _ray()
        self._task = ray.remote(max_retries=1, retry_exceptions=False)(_remote_body)
        self.last_node: dict = {}  # the node the latest job started on (its "node" message)

    def options_for(self, job: Job) -> dict:
        ray = _ray()
        return resources_for(job, _node_cpus(ray))

    def __call__(self, job: Job, progress: Callable[[str], None] | None = None, limits: Limits | None = None,
                 cancel: threading.Event | None = None, preview: Callable | None = None,
                 ahead: WorkAhead | None = None):
        from ray.exceptions import RayError, TaskCancelledError

        limits = limits or Limits.from_env()
        early = EarlyParts(job, preview, ahead, text_mb=limits.upload_mb)
        ray = _ray()
        say = progress or (lambda p: None)
        cancel = cancel or threading.Event()
        gen = self._task.options(num_returns="streaming", **self.options_for(job)).remote(asdict(job), asdict(limits))
        deadline = time.monotonic() + limits.timeout_s + 60  # the worker's own limit, and Ray's slack
        final = None
        cancelled_at = None
        try:
            while final is None:
                if cancel.is_set() and cancelled_at is None:
                    cancelled_at = time.monotonic()
                    ray.cancel(gen)
                if cancelled_at is not None and time.monotonic() - cancelled_at > 15:
                    ray.cancel(gen, force=True)
                    raise ExplorerError("run", "the job was cancelled", job.filename)
                if time.monotonic() > deadline:
                    ray.cancel(gen, force=True)
                    raise ExplorerError("timeout", f"the Ray task gave no result within {limits.timeout_s + 60:g} s",
                                        job.filename)
                ready, _ = ray.wait([gen], timeout=0.25)
                if gen.is_finished():
                    break
                if not (ready and gen.next_ready()):
                    # (a cancelled stream can look ready to ray.wait while its next item is not:
                    # next() would then block until the task ends, past the force-cancel above)
                    time.sleep(0.05)
                    continue
                ref = next(gen)
                kind, value = ray.get(ref)
                if kind == "phase":
                    say(str(value)[:200])
                elif kind == "preview":
                    early(value)
                elif kind == "texts":
                    early.texts(value)
                elif kind == "decisions":
                    early.decisions(value)
                elif kind == "node" and isinstance(value, dict):
                    self.last_node = {k: str(v)[:100] for k, v in value.items()}
                    say(f"node:{self.last_node.get('hostname', '')}")
                elif kind == "done" and isinstance(value, dict):
                    final = value
        except TaskCancelledError:
            raise ExplorerError("run", "the job was cancelled", job.filename) from None
        except RayError as e:
            if cancel.is_set():
                raise ExplorerError("run", "the job was cancelled", job.filename) from None
            raise ExplorerError("engine", f"the Ray task failed twice (node lost or worker killed): "
                                          f"{type(e).__name__}", job.filename) from None
        if final is None:
            raise ExplorerError("engine", "the Ray task ended without a result", job.filename)
        if final.get("failure"):
            try:
                raise ExplorerError.from_dict(final["failure"])
            except (TypeError, AttributeError):
                raise ExplorerError("protocol", "a node sent a malformed error", job.filename) from None
        ran = interpret(messages.read(final.get("message")), bool(final.get("isolated")), job, pipe=early.wait(),
                        preview=early.bundle, sent=early.sent, decided=early.decided, text_mb=limits.upload_mb)
        node = final.get("node") if isinstance(final.get("node"), dict) else {}
        ran.bundle.environment["engine"] = {"kind": "ray", "address": self.where,
                                            "node": str(node.get("hostname", ""))[:100]}
        return Ran(ran.bundle, ran.isolated)
