"""The gate: everything a user hands over becomes a Bundle here, inside the sandboxed worker.

A user gives a file (and maybe the profiler trace of its run): an HLO text, a bundle's JSON, a
zipped XLA dump (HLO, LLVM IR, PTX, object files, fusion logs, buffer assignments), a profiler
trace (``.xplane.pb``, ``.trace.json(.gz)``, a zip of the profiler's folder), or a dump and its
trace zipped together. ``open_upload`` tells which it is (``kind_of``, one sniffer over the
file's name and bytes) and hands it to the reader of that kind (an adapter: ``ADAPTERS``), which
makes the bundle and says what else the file holds (``bundle.source["upload"]``: the other
modules of a dump, the other programs of a trace, so a front end can ask for one of them by
name with another job).

Only the worker runs this (a ``kind="open"`` job: ``analysis.service.job.upload_job``), in the
sandbox and under the job's limits, through the queue like a compile (its per-session bounds,
its cache, the Ray engine); the app and the CLI receive the bundle it makes, checked on arrival
like any worker's (``analysis.service.worker.untrusted_bundle``): docs/worker.md, "The gate".
A notebook, the user's own process, runs it in place.

Nothing here imports JAX: the one step that needs XLA (printing the HLO a trace carries, which
only XLA's own deserializer reads) is handed in by the worker (``print_proto``).
"""

from analysis.inputs.opener import ADAPTERS, UPLOAD_KINDS, Upload, kind_of, open_upload

__all__ = ["ADAPTERS", "UPLOAD_KINDS", "Upload", "kind_of", "open_upload"]
