"""The pass pipeline: what each XLA pass did to the module, from per-pass HLO snapshots.

With ``xla_dump_to=DIR`` and ``xla_dump_hlo_pass_re=.*`` XLA writes one snapshot after every
pass that changed the module (and one at the start of every pipeline), named
``module_NNNN.NAME.NNNN.<pipeline>.after_<pass>[.before_<nextpass>].txt`` (the names are read
with ``analysis.inputs.dump``'s patterns, the same ones the dump import uses).

``pass_log_from_dir(DIR)`` turns such a folder into the Bundle's ``pass_log``: the snapshots in
pass order, those identical to the one before dropped (pipeline-start markers, passes that only
touched what the text does not print), each with its instruction and kernel counts and, while
all texts together stay under ``MAX_TEXT_BYTES``, its text. The rest of this module are pure
functions the pass-pipeline page and the CLI share: which passes fuse, the diff of two
snapshots, and which instructions a pass added, removed or fused. No JAX here.
"""

from __future__ import annotations

import difflib
import os
from dataclasses import dataclass, field

from analysis import linear_re
from analysis.inputs.dump import MODULE_FILE, PASS_FILE  # the dump file names, as XLA writes them
from analysis.hlo import HloParseError, Module, ShapeParseError, parse_module
from analysis.program.kernels import NO_KERNEL, kernels, launching
from analysis.options import FUSION_PASSES
from analysis.program.links import absorbed

MAX_TEXT_BYTES = 20 * 2 ** 20  # keep snapshot texts in the pass log while they total less

# Passes that fuse (the backends' fusion passes, their helpers, and anything named *fusion*); a
# pass's name may come from a user's dump (RE2: analysis.linear_re).
_FUSION_WORDS = linear_re.compile(r"(?i)fusion|fuse|dot-library-rewriter|gemm-rewriter")


def is_fusion_pass(name: str) -> bool:
    """Whether a pass fuses or wraps instructions into kernels (for highlighting in the pipeline)."""
    known = {p for ps in FUSION_PASSES.values() for p in ps}
    return name in known or bool(_FUSION_WORDS.search(name or ""))


# ----------------------------------------------------------------------------- reading a dump folder


def snapshot_files(folder: str) -> list[dict]:
    """The pass snapshots in a dump folder, in pass order: ``{index, pipeline, pass, next_pass,
    file, module_id}``. With several modules in the folder, those of the module with the most
    snapshots (the jitted program; small helper computations have few)."""
    by_module: dict[str, list[dict]] = {}
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    for base in names:
        m = MODULE_FILE.match(base)
        if not m or not base.endswith(".txt"):
            continue
        p = PASS_FILE.match(m.group(2)) if ".after_" in base else None
        if not p:
            continue
        _, index, pipeline, pass_name, next_pass = p.groups()  # by number: google-re2 looks a name up slowly
        by_module.setdefault(m.group(1), []).append(
            {"index": int(index), "pipeline": pipeline, "pass": pass_name, "next_pass": next_pass, "file": base,
             "module_id": m.group(1)})
    if not by_module:
        return []
    best = max(by_module.values(), key=len)
    return sorted(best, key=lambda e: e["index"])


def counts(module: Module) -> dict:
    """Instruction and kernel counts of one snapshot. ``kernels`` counts kernel-launching
    instructions as ``analysis.program.kernels.kernels`` finds them (before fusion: every compute op);
    ``None`` when the snapshot cannot be analyzed."""
    out = {"instructions": sum(len(c.instructions) for c in module.computations),
           "entry_instructions": len(module.entry.instructions) if module.computations else 0,
           "fusions": sum(1 for i in module.entry.instructions if i.opcode == "fusion") if module.computations else 0}
    try:
        out["kernels"] = len(launching(kernels(module)))
    except Exception as e:  # noqa: BLE001 - an intermediate module the legend cannot read must not lose the whole log
        out["kernels"] = None
        out["error"] = f"kernels not counted: {type(e).__name__}: {e}"[:300]
    return out


def build_pass_log(entries: list[dict], read_text, max_text_bytes: int = MAX_TEXT_BYTES) -> list[dict]:
    """The pass log from snapshot entries (``snapshot_files`` order) and ``read_text(entry)``.

    Keeps the first snapshot (the module as the pipeline received it) and every later one whose
    text differs from the one kept before it. Each entry gets ``instructions``,
    ``entry_instructions``, ``fusions``, ``kernels`` (``None`` if the snapshot does not parse),
    ``bytes`` (text size) and ``text`` (``None`` once the kept texts would pass
    ``max_text_bytes``)."""
    out: list[dict] = []
    prev: str | None = None
    total = 0
    for e in entries:
        text = read_text(e)
        if text is None or text == prev:
            continue
        prev = text
        row = {k: e.get(k) for k in ("index", "pipeline", "pass", "next_pass", "file")}
        try:
            row.update(counts(parse_module(text)))
        except (HloParseError, ShapeParseError) as e:  # keep the entry, without counts, and say why
            row.update({"instructions": None, "entry_instructions": None, "fusions": None, "kernels": None,
                        "error": f"snapshot does not parse: {e}"[:300]})
        row["bytes"] = len(text)
        total += len(text)
        row["text"] = text if total <= max_text_bytes else None
        out.append(row)
    if total > max_text_bytes:  # all or nothing: a diff needs both neighbours
        for row in out:
            row["text"] = None
    return out


def pass_log_from_dir(folder: str, max_text_bytes: int = MAX_TEXT_BYTES) -> list[dict]:
    """The Bundle's ``pass_log`` from an ``xla_dump_to`` folder (see ``build_pass_log``)."""

    def read(e: dict) -> str | None:
        try:
            with open(os.path.join(folder, e["file"]), encoding="utf-8", errors="replace") as f:
                return f.read()
        except OSError:
            return None

    return build_pass_log(snapshot_files(folder), read, max_text_bytes)


# ----------------------------------------------------------------------------- what a pass did


def label(entry: dict) -> str:
    """``pipeline / pass`` for lists and axes."""
    return f"{entry.get('pipeline', '?')} / {entry.get('pass', '?')}"


def snapshot_diff(before: str, after: str, context: int = 2, max_lines: int = 4000) -> str:
    """A unified diff of two snapshots (``before`` -> ``after``), at most ``max_lines`` lines."""
    lines = list(difflib.unified_diff(before.splitlines(), after.splitlines(), "before the pass",
                                      "after the pass", n=context, lineterm=""))
    if len(lines) > max_lines:
        lines = lines[:max_lines] + [f"... ({len(lines) - max_lines} more diff lines)"]
    return "\n".join(lines)


@dataclass
class PassChange:
    """What one pass did to the module's instructions (by name, all computations)."""

    added: list[str] = field(default_factory=list)  # entry instructions new after the pass
    removed: list[str] = field(default_factory=list)  # entry instructions gone after the pass
    fused: dict[str, list[str]] = field(default_factory=dict)  # new fusion -> removed instructions it took in
    added_anywhere: int = 0  # new names in all computations (fused computations included)
    removed_anywhere: int = 0


def pass_change(before: Module, after: Module) -> PassChange:
    """Instructions of the entry computation the pass added and removed, and for each new
    fusion the removed instructions it absorbed: the one definition of what a kernel does
    (``analysis.program.links``: provenance between the two modules, by instruction)."""
    b_entry = {i.name: i for i in before.entry.instructions}
    a_entry = {i.name: i for i in after.entry.instructions}
    ch = PassChange(added=[n for n in a_entry if n not in b_entry], removed=[n for n in b_entry if n not in a_entry])
    b_all = {i.name for i in before.instructions()}
    a_all = {i.name for i in after.instructions()}
    ch.added_anywhere, ch.removed_anywhere = len(a_all - b_all), len(b_all - a_all)
    new_fusions = [n for n in ch.added if a_entry[n].opcode == "fusion"]
    removed = set(ch.removed)
    for n, ops in absorbed(before, after, new_fusions).items():
        got = [r for r in ops if r in removed and b_entry[r].opcode not in NO_KERNEL | {"parameter"}]
        if got:
            ch.fused[n] = got
    return ch


def summarize(log: list[dict]) -> list[str]:
    """One line per pass for the CLI: index, pipeline/pass, instructions, kernels (with change)."""
    out = []
    prev_k = None
    for e in log:
        k = e.get("kernels")
        delta = f" ({k - prev_k:+d})" if k is not None and prev_k is not None and k != prev_k else ""
        mark = "  <- fusion" if is_fusion_pass(e.get("pass", "")) and delta else ""
        out.append(f"{e.get('index', 0):4d}  {label(e)[:64]:64s} {e.get('instructions') or '-':>6} instr "
                   f"{k if k is not None else '-':>5} kernels{delta}{mark}")
        if k is not None:
            prev_k = k
    return out
