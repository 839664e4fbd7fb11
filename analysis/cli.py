"""``xla-explorer``: the pipeline without a browser.

    xla-explorer list
    xla-explorer analyze MODEL [--backend auto|cpu|gpu | --gpu-target h100|h200] [--devices N] [--option KEY=VALUE ...] [--out FILE]
                               [--measure [--iters N]] [--compare-fusion]
    xla-explorer report MODEL --html OUT.html [--svg-dir DIR] [--module NAME]
    xla-explorer passes MODEL
    xla-explorer runtimes [--make VERSION] [--remove VERSION]
    xla-explorer compare MODEL --jax A --jax B [--out-dir DIR] [--measure]

Every compiling command takes ``--jax VERSION``: the jax release to compile with, in a runtime of
its own (``analysis.service.runtimes``, docs/runtimes.md).

A ``.py`` model file is someone's code: every command runs it in the sandboxed worker, never in
this process -- unless ``--trusted`` says it is one's own (then it runs here, and a note says so).

MODEL is a gallery name (``mlp``), a ``.py`` model file, an HLO text file, a Bundle JSON or a
zipped XLA dump folder (``--xla_dump_to`` output; its most interesting module, or ``--module``).
User errors exit with status 2 and one line on stderr naming the file, line and phase.
"""

from __future__ import annotations

import argparse
import io
import os
import sys
import zipfile
from typing import TYPE_CHECKING

# Only what parsing the command line needs is imported here: each command imports its own, after
# ``main`` has started the sandboxed worker a compile will use (``_worker_ahead``), whose Python and
# JAX then start beside these imports (docs/performance.md, "Tenth pass").
from analysis import tuning
from analysis.devices.catalog import GPU_TARGETS
from analysis.errors import ExplorerError, from_parse_error
from analysis.measures import ROUNDS

if TYPE_CHECKING:
    from analysis.pipeline import WorkAhead


def _read_text(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except OSError as e:
        raise ExplorerError("load", e.strerror or str(e), path) from None
    except UnicodeDecodeError:
        raise ExplorerError("load", "not a UTF-8 text file", path) from None


# The most a file (or a folder's files together) handed to the CLI may be: the worker that reads
# it is sent its bytes (docs/worker.md, "The gate")
MAX_INPUT_BYTES = 256 * 2 ** 20


def read_input(path: str) -> tuple[str, bytes]:
    """The name and bytes of a file the user gave, or of a folder's files zipped together here
    (stored, uncompressed: a profiler's trace folder, a dump folder), at most
    ``MAX_INPUT_BYTES``. The bytes are read, never parsed: the worker opens them."""
    too_big = f"over the {MAX_INPUT_BYTES // 2 ** 20} MiB an input may be"
    try:
        if not os.path.isdir(path):
            if os.path.getsize(path) > MAX_INPUT_BYTES:
                raise ExplorerError("load", too_big, path)
            with open(path, "rb") as f:
                return os.path.basename(path), f.read(MAX_INPUT_BYTES + 1)
        buf, total = io.BytesIO(), 0
        with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as z:
            for d, _, files in os.walk(path):
                for f in sorted(files):
                    full = os.path.join(d, f)
                    if os.path.islink(full) or not os.path.isfile(full):
                        continue
                    total += os.path.getsize(full)
                    if total > MAX_INPUT_BYTES:
                        raise ExplorerError("load", too_big, path)
                    z.write(full, os.path.relpath(full, path))
        return os.path.basename(os.path.normpath(path)) + ".zip", buf.getvalue()
    except OSError as e:
        raise ExplorerError("load", e.strerror or str(e), path) from None


def open_input(path: str, module: str | None = None, say=None, trusted: bool = False, trace: str | None = None,
               prefer: str | None = None, bundle=None):
    """The Bundle of a file the user gave (an HLO text, a bundle, a zipped dump, a profiler trace),
    and the timings of ``trace`` on it, opened by the gate (``analysis.inputs``) in the sandboxed
    worker (here with ``trusted``): ``module`` (a dump's module, a trace's program), else the one
    with the most kernels (or kernel time). ``bundle``: a compile made here instead of the file,
    to put the trace's timings on."""
    from analysis.service.job import upload_job

    if bundle is not None:
        name, data = f"{bundle.title}.json", bundle.to_json().encode()
    else:
        name, data = read_input(path)
    trace_name, trace_data = read_input(trace) if trace else (None, None)
    job = upload_job(name, data, trace_name, trace_data, module, prefer)
    b = run_untrusted(job, trusted=trusted)
    up = (b.source or {}).get("upload") or {}
    choices = up.get("choices") or []
    if say and not module and len(choices) > 1:
        picked = up.get("picked")
        others = [c["name"] if up.get("kind") == "trace" else c["label"] for c in choices if c["name"] != picked]
        if up.get("kind") == "trace":
            say(f"the trace ran {len(choices)} modules; using {picked}, the one with the most kernel time (others: "
                + ", ".join(others[:5]) + (", ..." if len(others) > 5 else "") + "; pick one with --module)")
        else:
            say(f"{len(choices)} modules in the dump; using {b.title} (module {picked}); others: "
                + ", ".join(others[:7]) + (" ..." if len(others) > 7 else "") + " (pick one with --module)")
    return b


def _model_job(path: str, **kw):
    from analysis.service.job import Job

    return Job(kind="file", source=_read_text(path), filename=os.path.abspath(path),
               name=os.path.basename(path)[:-3], **kw)


TRUSTED_NOTE = ("xla-explorer: note: --trusted: running {file} in this process, NOT sandboxed, with your "
                "user's rights (only for your own code)")


def run_untrusted(job, progress=None, trusted: bool = False, ahead: WorkAhead | None = None):
    """A model file is someone's code: it runs in the sandboxed worker, never in this process
    (a warning says so when the sandbox is not available here). ``trusted`` (``--trusted``):
    the user vouches for the file, which then runs here, through ``analysis.compile``, with a
    note on stderr saying so. ``ahead``: work on a draft of the bundle while it compiles
    (``compile_model``; the report's layer graphs)."""
    from analysis.service.sandbox import sandbox_status
    from analysis.service.worker import run_job

    if trusted:
        from analysis.service.worker_main import execute

        if job.kind in ("code", "file"):  # (a file read here runs nothing)
            print(TRUSTED_NOTE.format(file=job.filename), file=sys.stderr)
        return execute(job, progress, ahead=ahead)
    isolated, reason = sandbox_status()
    if not isolated:
        print(f"xla-explorer: WARNING: not isolated: {reason}", file=sys.stderr)
    return run_job(job, progress=progress, ahead=ahead).bundle


def load_any(model: str, backend: str = "auto", options: dict | None = None, progress=None,
             module: str | None = None, say=None, gpu_target: str | None = None, measure: bool = False,
             compare: bool = False, iterations: int | None = None, trusted: bool = False,
             devices: int | None = None, ahead: WorkAhead | None = None, trace: str | None = None, prefer: str | None = None,
             jax: str | None = None):
    """A Bundle from whatever MODEL names: a bundle, an HLO text, a dump or a profiler trace is
    opened by the gate in the sandboxed worker (``open_input``, with ``trace``'s timings); a
    model file is compiled (and measured) in the sandboxed worker; a gallery model here, or in a
    worker started with its devices when it runs on more than one (``devices``, else its
    ``DEVICES``). ``ahead``: what the caller will derive from a compiled bundle, done on a draft
    of it while it compiles (``compile_model``). A compiled model's bundle gets ``trace``'s
    timings through the gate too. ``jax``: the release to compile with (``runtime_of``), in a
    worker of that runtime."""
    from analysis.devices.catalog import check_devices

    if devices is not None:
        check_devices(devices, "--devices")
    if os.path.exists(model) and not model.endswith(".py"):
        if devices is not None:
            raise ExplorerError("options", "--devices is for a model that is compiled; this input is only read "
                                           "(its device count is the one it was compiled for)", model)
        if jax is not None:
            raise ExplorerError("options", "--jax is for a model that is compiled; this input is only read "
                                           "(its bundle names the jax it was compiled with)", model)
        same = trace and os.path.abspath(trace) == os.path.abspath(model)  # a trace given as MODEL brought its own
        return open_input(model, module, say, trusted, None if same else trace, prefer)
    b = _compiled(model, backend, options, progress, gpu_target, measure, compare, iterations, trusted, devices, ahead,
                  jax)
    return open_input(model, None, say, trusted, trace, bundle=b) if trace else b


def _compiled(model: str, backend: str, options, progress, gpu_target, measure: bool, compare: bool, iterations,
              trusted: bool, devices, ahead, jax: str | None = None):
    """A model file or gallery model, compiled (and measured); with ``jax``, in a worker of that
    runtime (never in this process, whose jax is its own)."""
    from analysis.devices.catalog import devices_in_source
    from analysis.service.job import Job
    from analysis.service.worker import run_job
    from sample_models import gallery_entry

    if not os.path.exists(model) and (model.endswith(".py") or os.sep in model or "." in os.path.basename(model)):
        # Looks like a file name (gallery names have no dots or slashes): say so, rather
        # than "no gallery model named 'x.hlo'".
        raise ExplorerError("load", "no such file", model)
    if model.endswith(".py") or os.sep in model:
        if jax is not None and trusted:
            raise ExplorerError("options", "--trusted runs the file in this process, with this process's jax: "
                                           "leave out --jax or --trusted", model)
        return run_untrusted(_model_job(model, backend=backend, compiler_options=options or {},
                                        gpu_target=gpu_target, measure=measure, compare_fusion=compare,
                                        iterations=iterations, devices=devices, jax=jax), progress, trusted, ahead)
    from analysis.compile import recipe
    from analysis.compile.stages import analyze_model

    if (devices or devices_in_source(gallery_entry(model).source) or 1) > 1 or jax is not None:
        # this process has one device and its own jax: the worker is started with the job's
        return run_job(Job(kind="gallery", name=model, filename=str(gallery_entry(model).path), backend=backend,
                           compiler_options=options or {}, gpu_target=gpu_target, measure=measure,
                           compare_fusion=compare, iterations=iterations, devices=devices, jax=jax),
                       progress=progress, ahead=ahead).bundle
    c = analyze_model(model, backend, options, progress, gpu_target=gpu_target, ahead=ahead)
    recipe.measured(c, measure_it=measure, compare=compare, iterations=iterations, progress=progress)
    return c.bundle


def runtime_of(args) -> str | None:
    """The jax release ``--jax`` names, its runtime made first when it is not here (a line on
    stderr says so), or None for this process's own jax (``analysis.service.runtimes``)."""
    from analysis.service import runtimes

    version = getattr(args, "jax", None)
    if version is None:
        return None
    r = runtimes.resolve(version, say=_say)
    return None if r.own else r.jax


def _options(args) -> dict | None:
    """The --option KEY=VALUE pairs of a command, parsed (None when there are none)."""
    from analysis.options import parse_options

    return parse_options(args.option) if args.option else None


def _say(msg: str) -> None:
    print(f"xla-explorer: {msg}", file=sys.stderr)


def _cmd_list(args) -> int:
    from sample_models import gallery

    for name, e in gallery().items():
        print(f"{name:22s} {e.title}")
    return 0


def _cmd_runtimes(args) -> int:
    """The jax runtimes here and the releases offered; --make and --remove one."""
    from analysis.service import runtimes

    if args.make:
        r = runtimes.resolve(args.make, say=_say)
        _say(f"ready: {r.line()}")
    if args.remove:
        r = runtimes.remove(args.remove)
        _say(f"removed the jax {r.jax} runtime ({r.prefix})")
    have = runtimes.available()
    for r in have:
        print(r.line())
    more = [v for v in runtimes.offered() if v not in {r.jax for r in have}]
    if more:
        print("made on first use: jax " + ", ".join(more))
    return 0


def _cmd_compare(args) -> int:
    """One program through two jax releases: both bundles written, the diff printed
    (``analysis.studies.compare.versions_diff``); with --measure, each side measured in
    alternated runs (A B, B A, ...) so both see the same machine."""
    from analysis.render.versions import versions_text
    from analysis.service import runtimes
    from analysis.studies.compare import measured_alternately, versions_diff

    if getattr(args, "inductor", False):
        return _compare_inductor(args)
    if len(args.jax or []) != 2:
        raise ExplorerError("options", "compare takes two releases: --jax A --jax B (e.g. --jax 0.10.2 --jax 0.12)")
    if os.path.exists(args.model) and not args.model.endswith(".py"):
        raise ExplorerError("options", "compare compiles a model (a gallery name or a .py file); this input is only read",
                            args.model)
    if args.rounds < 1:
        raise ExplorerError("options", f"--rounds must be at least 1, not {args.rounds}")
    sides = []
    for v in args.jax:
        r = runtimes.resolve(v, say=_say)
        sides.append(None if r.own else r.jax)
    if args.jax and sides[0] == sides[1] and runtimes.resolve(args.jax[0]).jax == runtimes.resolve(args.jax[1]).jax:
        raise ExplorerError("options", f"both --jax name jax {runtimes.resolve(args.jax[0]).jax}: name two releases")
    options = _options(args)

    def one(jax, measure=False):
        return _compiled(args.model, args.backend, options, None, None, measure, False, args.iters, False, None, None,
                         jax or _own_jax())

    if not args.measure:
        bundles = [one(j) for j in sides]
    else:  # alternated: A B, then B A, ...; each side's step and call are spreads over its rounds
        def measured(s: int, run: int):
            _say(f"measuring jax {args.jax[s]} (round {run} of {args.rounds})")
            return one(sides[s], measure=True)

        bundles = list(measured_alternately(measured, args.rounds))
    os.makedirs(args.out_dir, exist_ok=True)
    stem = os.path.basename(args.model)[:-3] if args.model.endswith(".py") else args.model
    for b in bundles:
        path = os.path.join(args.out_dir, f"{stem}-jax-{b.environment.get('jax', '?')}.json")
        try:
            with open(path, "w") as f:
                f.write(b.to_json(indent=1))
        except OSError as e:
            raise ExplorerError("write", e.strerror or str(e), path) from None
        _say(f"wrote {path}")
    print(versions_text(versions_diff(*bundles)))
    return 0


def _compare_inductor(args) -> int:
    """A PyTorch model through XLA and through Inductor in one sandboxed job (``Job.inductor``):
    its bundle written, the two compilers' kernels printed layer by layer
    (``analysis.studies.inductor``); with --measure, each kernel timed and the two whole calls
    alternated."""
    from analysis.render.inductor_text import inductor_text
    from analysis.service.job import Job
    from analysis.service.worker import run_job
    from analysis.studies.inductor import beside_inductor
    from sample_models import gallery_entry

    if args.jax:
        raise ExplorerError("options", "--inductor compares XLA with Inductor in this runtime: leave out --jax")
    if os.path.exists(args.model) and not args.model.endswith(".py"):
        raise ExplorerError("options", "compare compiles a model (a gallery name or a .py file); this input is only read",
                            args.model)
    kw = dict(backend="cpu", compiler_options=_options(args) or {}, measure=args.measure, iterations=args.iters,
              inductor=True)
    if args.model.endswith(".py") or os.sep in args.model:
        if not os.path.exists(args.model):
            raise ExplorerError("load", "no such file", args.model)
        b = run_untrusted(_model_job(args.model, **kw))
    else:
        b = run_job(Job(kind="gallery", name=args.model, filename=str(gallery_entry(args.model).path), **kw)).bundle
    os.makedirs(args.out_dir, exist_ok=True)
    stem = os.path.basename(args.model)[:-3] if args.model.endswith(".py") else args.model
    path = os.path.join(args.out_dir, f"{stem}-inductor.json")
    try:
        with open(path, "w") as f:
            f.write(b.to_json(indent=1))
    except OSError as e:
        raise ExplorerError("write", e.strerror or str(e), path) from None
    _say(f"wrote {path}")
    print(inductor_text(beside_inductor(b)))
    return 0


def _own_jax() -> str:
    """This process's own jax release, named as a job's: its compile then runs in a worker too,
    as the other side's does (both sides measured the same way)."""
    from analysis.service import runtimes

    return runtimes.own().jax


def _cmd_analyze(args) -> int:
    from analysis.options import parse_options
    from analysis.render.summary import summary_text

    options = parse_options(args.option)
    measure = getattr(args, "measure", False)
    compare = getattr(args, "compare_fusion", False)
    if args.iters is not None and args.iters < 1:
        raise ExplorerError("options", f"--iters must be at least 1, not {args.iters}")
    if args.gpu_target and measure:
        raise ExplorerError("options", "--gpu-target compiles for a GPU that is not here: nothing can be "
                                       "measured (leave out --measure; --compare-fusion still compares kernels and bytes)")
    trace = getattr(args, "trace", None)
    if trace and measure:
        raise ExplorerError("options", "--trace gives the timings of your own run; leave out --measure")
    if trace and not os.path.exists(trace):
        raise ExplorerError("trace", "no such file or folder", trace)
    if (measure or compare) and os.path.exists(args.model) and not args.model.endswith(".py"):
        raise ExplorerError("measure", "this input has no program to run (an HLO text, a bundle or a dump is only "
                                       "read); measure the model it came from", args.model)
    bundle = load_any(args.model, args.backend, options,
                      progress=(lambda p: print(f"[{p}]", file=sys.stderr)) if args.verbose else None,
                      module=args.module, say=_say,
                      gpu_target=args.gpu_target, measure=measure, compare=compare, iterations=args.iters,
                      trusted=args.trusted, devices=args.devices, trace=trace, jax=runtime_of(args))
    text = bundle.to_json(indent=1)
    if args.out:
        try:
            with open(args.out, "w") as f:
                f.write(text)
        except OSError as e:
            raise ExplorerError("write", e.strerror or str(e), args.out) from None
    else:
        sys.stdout.write(text + "\n")
    print(summary_text(bundle), file=sys.stderr)
    return 0


def _cmd_report(args) -> int:
    from analysis.render.report import ReportAhead, graph_exports, html_report

    say = lambda msg: print(f"xla-explorer: {msg}", file=sys.stderr)  # noqa: E731
    for target in filter(None, (args.html, args.svg_dir and os.path.join(args.svg_dir, "x"))):
        folder = os.path.dirname(os.path.abspath(target))
        if not os.path.isdir(folder) and not (target != args.html and os.path.isdir(os.path.dirname(folder))):
            raise ExplorerError("write", "no such folder", os.path.dirname(target) or ".")
    options = _options(args)
    bundle = load_any(args.model, args.backend, options, module=args.module, devices=args.devices, say=say, gpu_target=args.gpu_target,
                      trusted=args.trusted, ahead=ReportAhead(), jax=runtime_of(args))  # (made while it compiles)
    text = html_report(bundle)
    try:
        with open(args.html, "w", encoding="utf-8") as f:
            f.write(text)
    except OSError as e:
        raise ExplorerError("write", e.strerror or str(e), args.html) from None
    written = [args.html]
    if args.svg_dir:
        try:
            os.makedirs(args.svg_dir, exist_ok=True)
            for name, (_mime, data) in graph_exports(bundle).items():
                path = os.path.join(args.svg_dir, name)
                with open(path, "wb") as f:
                    f.write(data)
                written.append(path)
        except OSError as e:
            raise ExplorerError("write", e.strerror or str(e), args.svg_dir) from None
    say(f"wrote {', '.join(written)} ({len(text) / 2 ** 20:.1f} MiB report)")
    return 0


def _cmd_passes(args) -> int:
    """Print the pass pipeline: every pass that changed the module, with instruction and kernel counts."""
    from analysis.hlo import HloParseError, parse_module
    from analysis.service.job import Job
    from analysis.service.worker import run_job
    from analysis.studies.passes import counts, summarize
    from sample_models import gallery_entry

    options = _options(args)
    model = args.model
    if os.path.exists(model) and not model.endswith(".py"):
        b = load_any(model, module=args.module, say=lambda m: print(m, file=sys.stderr), prefer="passes")
        log = b.pass_log or []
        if not log:
            raise ExplorerError("load", "this input has no pass log (compile a model, or zip a dump made with "
                                        "xla_dump_hlo_pass_re=.*)", model)
    else:
        if not os.path.exists(model) and (model.endswith(".py") or os.sep in model):
            raise ExplorerError("load", "no such file", model)
        jax = runtime_of(args)
        if model.endswith(".py"):
            b = run_untrusted(_model_job(model, backend=args.backend, compiler_options=options or {},
                                         dump_passes=True, gpu_target=args.gpu_target, devices=args.devices, jax=jax),
                              trusted=args.trusted)
        elif jax is not None:  # in a worker of that runtime
            b = run_job(Job(kind="gallery", name=model, filename=str(gallery_entry(model).path), backend=args.backend,
                            compiler_options=options or {}, dump_passes=True, gpu_target=args.gpu_target,
                            devices=args.devices, jax=jax)).bundle
        else:
            from analysis.service.worker_main import execute

            b = execute(Job(kind="gallery", name=model, backend=args.backend, compiler_options=options or {},
                            dump_passes=True, gpu_target=args.gpu_target, devices=args.devices))
        log = b.pass_log or []
    if log and log[0].get("kernels") is None and any(e.get("text") for e in log):
        for e in log:  # imported dumps carry texts only
            if e.get("text"):
                try:
                    e.update(counts(parse_module(e["text"])))
                except HloParseError as err:  # one bad snapshot: listed without counts, and said
                    print(f"xla-explorer: snapshot {e.get('index')} not counted: {err}", file=sys.stderr)
    print(f"{b.title}: {len(log)} snapshots (passes that changed the module, in order)")
    print("\n".join(summarize(log)))
    return 0


def _cmd_memory(args) -> int:
    from analysis.render.memory import memory_text

    options = _options(args)
    compiles = not (os.path.exists(args.model) and not args.model.endswith(".py"))  # a bundle/HLO/dump is read
    bundle = load_any(args.model, args.backend, options, module=args.module, devices=args.devices,
                      say=_say, gpu_target=args.gpu_target,
                      compare=compiles and not args.no_compare, trusted=args.trusted, jax=runtime_of(args))
    print(memory_text(bundle, top=max(1, args.top)))
    return 0


def _cmd_why(args) -> int:
    from analysis.render.decisions import why_text

    options = _options(args)
    bundle = load_any(args.model, args.backend, options, module=args.module, devices=args.devices,
                      say=_say, gpu_target=args.gpu_target,
                      trusted=args.trusted,  # a .py model file runs in the sandboxed worker (run_untrusted)
                      jax=runtime_of(args))
    print(why_text(bundle.fusion_decisions, args.op))
    return 0


def _cmd_layers(args) -> int:
    """The model's layers (name scopes) with the ops and kernels of each, bytes and time."""
    from analysis.program.layers import layers_of_bundle
    from analysis.render.layers import layer_dict, layer_lines

    options = _options(args)
    bundle = load_any(args.model, args.backend, options, module=args.module, devices=args.devices,
                      say=_say, gpu_target=args.gpu_target,
                      measure=args.measure, trusted=args.trusted, jax=runtime_of(args))
    root = layers_of_bundle(bundle)
    if root is None:
        raise ExplorerError("load", "this input has no pre-optimization HLO: its ops have no layers", args.model)
    if args.json:
        import json

        m = bundle.metrics or {}
        print(json.dumps({"program": {"ops": m.get("compute_ops_before"), "kernels": m.get("kernels_after")},
                          "layers": layer_dict(root)}, indent=1))
        return 0
    print("\n".join(layer_lines(root, max_depth=args.depth)))
    return 0


def _cmd_code(args) -> int:
    """The code XLA generated for each kernel: its LLVM IR, assembly (PTX, ...) and their facts."""
    from analysis.render.code_text import code_listing, code_text

    bundle = load_any(args.model, args.backend, _options(args), module=args.module, devices=args.devices,
                      say=_say, gpu_target=args.gpu_target, trusted=args.trusted, jax=runtime_of(args))
    if args.json:
        import json

        print(json.dumps(code_listing(bundle, args.kernel, args.stage), indent=1))
    else:
        print(code_text(bundle, args.kernel, args.stage, facts_only=args.facts))
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="xla-explorer", description="See what XLA does to a JAX program.")
    p.add_argument("--debug", action="store_true", help="show full tracebacks")
    # --debug also after the command (`xla-explorer analyze x --debug`); SUPPRESS keeps the
    # sub-command from resetting a --debug given before it.
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help="show full tracebacks")
    # what every command that may compile accepts
    compiling = argparse.ArgumentParser(add_help=False)
    compiling.add_argument("--backend", default="auto", choices=["auto", "cpu", "gpu"])
    compiling.add_argument("--option", action="append", metavar="KEY=VALUE", help="XLA compiler option (repeatable)")
    compiling.add_argument("--module", help="for a dump zip: the module (name or id) to use")
    compiling.add_argument("--gpu-target", choices=sorted(GPU_TARGETS), default=None,
                           help="compile for this GPU without one (compile only, no autotuning; "
                                "needs the cuda extra)")
    compiling.add_argument("--devices", type=int, default=None, metavar="N",
                           help="run the program on N devices (1-8): on the CPU, N host devices of the worker "
                                "(--xla_force_host_platform_device_count); with --gpu-target, N of that GPU "
                                "(default: the file's DEVICES = N, else 1)")
    compiling.add_argument("--jax", metavar="VERSION", default=None,
                           help="compile with this jax release (0.9-0.12, e.g. 0.10.2; a minor version names its "
                                "newest), in a runtime of its own, made on first use (docs/runtimes.md)")
    compiling.add_argument("--trusted", action="store_true",
                           help="run a .py model file in this process instead of the sandboxed worker "
                                "(only for your own code: it runs with your rights; a note says so)")
    sub = p.add_subparsers(dest="cmd", required=True)
    sub.add_parser("list", parents=[common], help="list the gallery models").set_defaults(fn=_cmd_list)
    rt = sub.add_parser("runtimes", parents=[common],
                        help="the jax releases a compile can use here (--jax): present, or made on first use")
    rt.add_argument("--make", metavar="VERSION", help="make this release's runtime now (pip; minutes)")
    rt.add_argument("--remove", metavar="VERSION", help="remove a runtime made here")
    rt.set_defaults(fn=_cmd_runtimes)
    cm = sub.add_parser("compare", parents=[common],
                        help="one program through two jax releases: both bundles and the diff (kernels, fusions, "
                             "passes, code, memory, and with --measure the times)")
    cm.add_argument("model", help="gallery name or .py model file")
    cm.add_argument("--jax", action="append", metavar="VERSION", help="a release (twice: --jax A --jax B)")
    cm.add_argument("--backend", default="auto", choices=["auto", "cpu", "gpu"])
    cm.add_argument("--option", action="append", metavar="KEY=VALUE", help="XLA compiler option (repeatable)")
    cm.add_argument("--out-dir", default=".", metavar="DIR", help="where to write the two bundles (default: here)")
    cm.add_argument("--measure", action="store_true", help="time both, alternated (A B, B A, ...)")
    cm.add_argument("--rounds", type=int, default=ROUNDS, help=f"measured runs per release, alternated (default {ROUNDS})")
    cm.add_argument("--iters", type=int, default=None, help="timed iterations per run")
    cm.add_argument("--inductor", action="store_true",
                    help="a PyTorch model through XLA and through torch.compile's Inductor (CPU) in one job: "
                         "their kernels layer by layer (docs/pytorch.md)")
    cm.set_defaults(fn=_cmd_compare)
    a = sub.add_parser("analyze", parents=[common, compiling],
                       help="compile a model (or read HLO / a bundle) and write its bundle")
    a.add_argument("model", help="gallery name, .py model file, HLO text file, bundle .json, zipped XLA dump, "
                                 "or a jax.profiler trace (its folder, a zip of it, or its .xplane.pb: the HLO it "
                                 "carries, with its timings)")
    a.add_argument("--out", help="write the bundle JSON here instead of stdout")
    a.add_argument("--measure", action="store_true", help="run and time every kernel")
    a.add_argument("--trace", metavar="TRACE", help="timings from your own jax.profiler trace of this compile, "
                                                    "made on a CPU, a GPU or a TPU (its folder, a zip of it, its "
                                                    ".xplane.pb or its .trace.json.gz)")
    a.add_argument("--iters", type=int, default=None, help="timed iterations (default: ~1-3 s worth)")
    a.add_argument("--compare-fusion", action="store_true",
                   help="also compile with fusion disabled and compare kernels, bytes (and, with "
                        "--measure, time) side by side")
    a.add_argument("--sandbox", action="store_true",
                   help="kept for old scripts: a .py model file always runs in the sandboxed worker")
    a.add_argument("-v", "--verbose", action="store_true", help="print phases as they run")
    a.set_defaults(fn=_cmd_analyze)
    r = sub.add_parser("report", parents=[common, compiling],
                       help="write one self-contained HTML report (works offline) of a model, bundle or dump")
    r.add_argument("model", help="gallery name, .py model file, HLO text file, bundle .json, XLA dump .zip "
                                 "or a jax.profiler trace (the HLO it carries, with its timings)")
    r.add_argument("--html", required=True, metavar="OUT.html", help="where to write the report")
    r.add_argument("--svg-dir", metavar="DIR", help="also write both graphs as SVG and DOT files here")
    r.set_defaults(fn=_cmd_report)
    ps = sub.add_parser("passes", parents=[common, compiling],
                        help="list the XLA passes that changed the module, with instruction and kernel counts")
    ps.add_argument("model", help="gallery name, .py model file, bundle .json with a pass log or XLA dump .zip")
    ps.set_defaults(fn=_cmd_passes)
    mm = sub.add_parser("memory", parents=[common, compiling],
                        help="what the compiled program allocates: the peak, the buffers live at it, "
                             "and the same with fusion off")
    mm.add_argument("model", help="gallery name, .py model file, bundle .json or XLA dump .zip")
    mm.add_argument("--top", type=int, default=10, help="buffers to list (default 10)")
    mm.add_argument("--no-compare", action="store_true", help="skip the fusion-disabled compile")
    mm.set_defaults(fn=_cmd_memory)
    wh = sub.add_parser("why", parents=[common, compiling],
                        help="why XLA fused ops, or did not: its fusion passes' decisions, in XLA's words")
    wh.add_argument("model", help="gallery name, .py model file, bundle .json or XLA dump .zip")
    wh.add_argument("--op", help="only the decisions touching this op (pre-optimization op, kernel or log name)")
    wh.set_defaults(fn=_cmd_why)
    ly = sub.add_parser("layers", parents=[common, compiling],
                        help="the model's layers (Flax/Equinox/Keras modules or name scopes): ops, kernels, "
                             "bytes and, with --measure, time per layer")
    ly.add_argument("model", help="gallery name, .py model file, bundle .json or HLO text")
    ly.add_argument("--depth", type=int, default=6, help="levels to print (default 6)")
    ly.add_argument("--measure", action="store_true", help="run it and show the measured time per layer")
    ly.add_argument("--json", action="store_true", help="the tree as JSON, with the program's ops and kernels")
    ly.set_defaults(fn=_cmd_layers)

    cd = sub.add_parser("code", parents=[common, compiling],
                        help="the code XLA generated for each kernel (LLVM IR, assembly, PTX) and its loads and stores")
    cd.add_argument("model", help="gallery name, .py model file, bundle .json or XLA dump .zip")
    cd.add_argument("--kernel", metavar="NAME", help="only this kernel (its name in the optimized HLO)")
    cd.add_argument("--stage", action="append", metavar="STAGE",
                    help="only these stages (repeatable): llvm-ir, llvm-ir-opt, asm, ptx, sass, ptxas, triton-...")
    cd.add_argument("--facts", action="store_true", help="only each kernel's facts, not its code")
    cd.add_argument("--json", action="store_true", help="as JSON: per kernel its name, stages and facts")
    cd.set_defaults(fn=_cmd_code)
    return p


# The commands that compile a model file in the sandboxed worker (``run_untrusted``).
_COMPILING = ("analyze", "report", "passes", "memory", "why", "layers", "code")


def _worker_ahead(args):
    """The sandboxed worker a command's compile of a ``.py`` model file runs in, started before the
    command imports what it needs (``worker_process.start_ahead``): the worker's Python and JAX
    start beside those imports (0.4 s of a report's wait, docs/performance.md "Tenth pass").
    None where none is started (another command, ``--trusted``, ``--jax``, no such file)."""
    model = getattr(args, "model", None)
    if args.cmd not in _COMPILING or not isinstance(model, str) or not model.endswith(".py") \
            or not os.path.isfile(model) or getattr(args, "trusted", False) or getattr(args, "jax", None):
        return None
    from dataclasses import asdict

    from analysis.service import worker_process

    try:
        job = _model_job(model, gpu_target=args.gpu_target, devices=args.devices)
    except ExplorerError:  # (the command says so)
        return None
    return worker_process.start_ahead(asdict(job))


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    ahead = None
    try:
        ahead = _worker_ahead(args)
        return args.fn(args)
    except ExplorerError as e:
        if args.debug:
            raise
        print(f"xla-explorer: {e.one_line()}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("xla-explorer: interrupted", file=sys.stderr)
        return 130
    except Exception as e:  # noqa: BLE001 - a bug of ours: still one line, details with --debug
        from analysis.hlo import HloParseError

        if args.debug:
            raise
        if isinstance(e, HloParseError):  # a text this run did not check itself (a bundle's): where it is bad
            print(f"xla-explorer: {from_parse_error(e).one_line()}", file=sys.stderr)
            return 2
        msg = " ".join(str(e).split())[:300]
        print(f"xla-explorer: internal error: {type(e).__name__}: {msg} (run with --debug for the traceback)",
              file=sys.stderr)
        return 1
    finally:
        if ahead is not None:  # (ended if no job took it)
            from analysis.service.worker_process import spare

            spare.discard(ahead)


def run() -> None:
    """The console script (``xla-explorer``, ``python -m analysis.cli``): ``main`` on this process's
    arguments, and its exit. What the command made (a big program's bundle, its parses and
    graphs: hundreds of thousands of objects, many in reference cycles) goes into the
    collector's permanent generation first (``tuning.freeze``): the interpreter's last collection
    on its way out would walk it all for nothing (0.35 s after a 96-layer report,
    docs/performance.md "Tenth pass"). ``main`` itself, called in a process that goes on, leaves
    the collector as it was."""
    code = main()
    tuning.freeze()
    sys.exit(code)


if __name__ == "__main__":
    run()
