"""The generated code as the CLI prints it (``xla-explorer code``): per kernel its facts and the
texts of the stages asked for, as text or as a JSON listing. Reads the bundle through
``analysis.codegen.kernel_code`` only."""

from __future__ import annotations

from analysis.codegen.finish import code_of
from analysis.codegen import kernel_code
from analysis.errors import ExplorerError
from analysis.render.summary import empty_note


def _known_stage(stage: str) -> bool:
    return stage in kernel_code.STAGE_LABELS or stage.startswith(kernel_code.TRITON_PREFIX)


def select(bundle, kernel: str | None = None, stages: list[str] | None = None) -> tuple[list[str], list[str]]:
    """(kernels, stages) to show: every kernel with code (or library call), or ``kernel``; every
    stage of the compile, or ``stages``. Raises a one-line ``ExplorerError`` for a name that is
    not there."""
    empty = empty_note(bundle)
    if empty is not None:  # no kernel at all: why, not that the input carries no code
        raise ExplorerError("code", empty)
    if bundle.code is None:
        raise ExplorerError("code", "this input has no generated code (an HLO text, or a bundle made before "
                                    "schema 6): compile the model, or import a dump zip with its code files")
    have = kernel_code.code_stages(bundle)
    for s in stages or []:
        if not _known_stage(s):
            raise ExplorerError("code", f"unknown stage {s[:60]!r} (stages: {', '.join(kernel_code.STAGE_LABELS)})")
        if s not in have:
            raise ExplorerError("code", f"this compile has no stage {s!r} (it has: {', '.join(have) or 'none'})")
    names = kernel_code.kernel_names(bundle)
    library = [k.name for k in bundle.kernels if kernel_code.library_call(bundle, k.name)]
    if kernel is not None:
        if kernel not in names and kernel not in library:
            known = [k.name for k in bundle.kernels]
            what = "a kernel with no generated code" if kernel in known else "no kernel"
            shown = ", ".join(names[:12]) + (" ..." if len(names) > 12 else "")
            raise ExplorerError("code", f"{what} {kernel[:80]!r} (kernels with code: {shown or 'none'})")
        return [kernel], list(stages or have)
    return names + library, list(stages or have)


def code_listing(bundle, kernel: str | None = None, stages: list[str] | None = None) -> dict:
    """The JSON the CLI prints: ``stages`` of the compile, ``kernels`` (per kernel ``name``,
    ``stages`` {stage: text}, its facts, ``cut``), ``library`` (the library calls: name, target,
    library, config), ``totals`` and ``note``."""
    kernels, want = select(bundle, kernel, stages)
    out_k, out_l = [], []
    first: dict[str, str] = {}  # a text -> the first kernel listed with it
    for name in kernels:
        kc = code_of(bundle, name)
        if kc is None:
            out_l.append({"name": name, **kernel_code.library_call(bundle, name)})
            continue
        texts, same = {}, {}
        for s in want:
            if s in kc.stages:
                t = kc.stages[s]
                if t in first:  # twins share their code: listed once (a bundle of references is not multiplied)
                    same[s] = first[t]
                else:
                    first[t] = name
                    texts[s] = t
        out_k.append({"name": name, "stages": texts, "same_as": same,
                      **{k: v for k, v in kc.facts.items() if k != "stage"}, "facts_stage": kc.facts.get("stage"),
                      "cut": {s: n for s, n in kc.cut.items() if s in want}, "problems": list(kc.problems)})
    return {"stages": want, "kernels": out_k, "library": out_l, "totals": kernel_code.totals(bundle), "note": kernel_code.note(bundle)}


def facts_line(f: dict) -> str:
    """A kernel's code facts in one line (the CLI's and the report's)."""
    parts = [f"{f.get('global_loads', 0)} loads, {f.get('global_stores', 0)} stores"
             + (f" (read from the {kernel_code.stage_label(f['stage'])})" if f.get("stage") else "")]
    if f.get("vector_width"):
        parts.append(f"vectors of {f['vector_width']} bits")
    if f.get("instructions") is not None:
        parts.append(f"{f['instructions']:,} instructions")
    for k, label in (("registers", "registers"), ("spills", "spilled bytes"), ("shared_bytes", "bytes of shared memory")):
        if f.get(k) is not None:
            parts.append(f"{f[k]:,} {label}")
    return " · ".join(parts)


def code_text(bundle, kernel: str | None = None, stages: list[str] | None = None, facts_only: bool = False) -> str:
    """The code as text: a header line per kernel with its facts, then each stage's text (a text
    an earlier kernel printed is named, not printed again: twins share their code)."""
    kernels, want = select(bundle, kernel, stages)
    first: dict[str, str] = {}
    t = kernel_code.totals(bundle)
    lines = [f"{t['kernels']} kernel(s) with generated code: {t['global_loads']} loads and {t['global_stores']} "
             f"stores through their buffers in all"]
    if kernel_code.note(bundle):
        lines.append(f"note: {kernel_code.note(bundle)}")
    for name in kernels:
        kc = code_of(bundle, name)
        lines.append("")
        if kc is None:
            lib = kernel_code.library_call(bundle, name)
            lines.append(f"== {name}: a library call ({lib['library'] or '?'}: {lib['target']}); its code is the library's")
            if lib.get("config"):
                lines.append(f"   config: {lib['config']}")
            continue
        lines.append(f"== {name}: {facts_line(kc.facts)}")
        lines.extend(f"   not made: {p}" for p in kc.problems)
        if facts_only:
            continue
        for s in want:
            if s in kc.stages:
                t = kc.stages[s]
                if t in first:
                    lines.append(f"-- {kernel_code.stage_label(s)}: the same as {first[t]}'s")
                    continue
                first[t] = name
                lines.append(f"-- {kernel_code.stage_label(s)}" + (f" (cut: {kc.cut[s]:,} lines in all)" if s in kc.cut else ""))
                lines.append(t.rstrip("\n"))
    return "\n".join(lines)
