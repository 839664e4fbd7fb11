"""What a viewer shows about each node of the two graphs, computed once per compile.

``node_details(bundle)`` gives every node id of the pre- and post-optimization graphs
(``op:NAME``, ``k:NAME``, ``p:NAME``) a plain dict: a title, the instruction's text, its shape
and layout, facts about the kernel, the ops it does (or the kernels an op ended in) and the
source lines. ``source_lines(bundle)`` tags each line of the model's source with the kernels
its ops ended in. A browser can then show the details of a click without asking a server.
All links come from ``analysis.program.links`` (the one definition of op <-> kernel links). The values
are data, never HTML: whoever draws them escapes them.
"""

from __future__ import annotations

from analysis import columns
from analysis.bundle.core import Bundle
from analysis.measures import KernelTime, kernel_times
from analysis.program.kernels import ROUTE_COLORS, ROUTE_LABELS, epilogue_text, tile_text
from analysis.program.links import kernel_ops, op_kernels
from analysis.program.provenance import walk_compute
from analysis.render.format import human_bytes, human_flops, human_seconds
from analysis.program.kernels import launching

TEXT_LIMIT = 900  # characters of an instruction's text kept for the panel
FUSED_LIMIT = 60  # fused instructions listed

# How provenance matched an op, in words; the weaker matches are flagged in lists.
HOW_WORDS = {"metadata": "its metadata", "op_name": "its op name",
             "shape": "opcode and shape (the kernel has no metadata)",
             "user": "the op that uses it", "operand": "the op it reads",
             "scope": "name scope: computed inside this library call",
             "epilogue": "the library call's epilogue: it does this op after its matmul or convolution, "
                         "in the same kernel (docs/numbers.md, fusion coverage)"}
HOW_HINTED = {"shape", "user", "operand", "scope"}
EPILOGUE_HINT = "fused: in its epilogue"


def how_hint(how: str | None) -> str:
    """What a list of a kernel's ops says beside one: how a weak match was made (the op that uses
    it, the op it reads, ...), or that the op is fused into a library call's epilogue; "" for an
    op matched by its own metadata."""
    if how == "epilogue":
        return EPILOGUE_HINT
    return HOW_WORDS[how] if how in HOW_HINTED else ""


def _cut(text: str, limit: int = TEXT_LIMIT) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _shape(inst) -> str:
    try:
        return f"{inst.shape_text} — {inst.shape.describe_layout()}"
    except Exception:  # noqa: BLE001 - an odd shape is shown as written
        return inst.shape_text


def op_lines(b: Bundle) -> dict[str, list[int]]:
    """Pre-optimization op -> the lines of the user's own source it came from."""
    pre = b.module("hlo_before")
    if pre is None:
        return {}
    user_file = b.source.get("file")
    out: dict[str, list[int]] = {}
    for inst, key in walk_compute(pre):
        if key and key[2] and (not user_file or not key[1] or key[1] == user_file):
            lst = out.setdefault(inst.name, [])
            if key[2] not in lst:
                lst.append(key[2])
    return out


def source_lines(b: Bundle) -> list[dict]:
    """Each line of the source: ``{"n", "text", "ops": [...], "kernels": [[name, route colour]]}``."""
    code = b.source.get("code")
    if not code:
        return []
    by_line: dict[int, list[str]] = {}
    for op, lines in op_lines(b).items():
        for ln in lines:
            by_line.setdefault(ln, []).append(op)
    prov = b.provenance
    kinds = {k.name: k for k in b.kernels}
    out = []
    for n, text in enumerate(code.splitlines(), 1):
        ops = by_line.get(n, [])
        ks = list(dict.fromkeys(kn for op in ops for kn in op_kernels(prov, op)))
        out.append({"n": n, "text": text, "ops": ops,
                    "kernels": [[kn, ROUTE_COLORS.get(kinds[kn].route, "#777777") if kn in kinds else "#777777"]
                                for kn in ks]})
    return out


def measured_kernels(b: Bundle) -> dict[str, KernelTime]:
    """``analysis.measures.kernel_times`` of the bundle, made once per timings (every node's
    details read it)."""
    return b.derived("kernel_times", (b.timings,), lambda: kernel_times(b.timings))


def time_fact(kt: KernelTime) -> str:
    """A measured kernel's time in words (``analysis.measures.KernelTime``): its part of the step
    with its share and the step it is a share of (so the three agree on the screen that shows
    them), and its own time where that differs as written."""
    text = f"measured {human_seconds(kt.time_s)} ({kt.share:.1%} of the {human_seconds(kt.step_s)} step)"
    if kt.own_shown(human_seconds):
        text += (f"; {human_seconds(kt.own_s)} with the kernels it runs" if kt.inclusive else
                 f"; ran {human_seconds(kt.own_s)} in all, other kernels running beside it")
    return text


def kernel_facts(b: Bundle, k) -> list[str]:
    facts = [f"moves ~{human_bytes(k.bytes)}", f"{human_flops(k.flops)} (from shapes)"]
    if k.epilogue:  # the ops it absorbed are fused into it: they count in fusion coverage
        facts.insert(0, epilogue_text(k))
    if k.triton_config:
        facts.append("Triton " + tile_text(k.triton_config, full=True))
    if k.context:
        facts.append(f"runs inside {k.context}")
    kt = measured_kernels(b).get(k.name)
    if kt is not None:
        facts.append(time_fact(kt))
    return facts


def _indexes(b: Bundle) -> tuple[dict, dict, dict]:
    """Pre-optimization op name -> its instruction, -> its source lines, and compute op name ->
    its instruction; made once per bundle (a big program's views ask for their nodes' details
    one view at a time)."""
    pre = b.module("hlo_before")

    def make():
        insts: dict = {}
        ops: dict = {}
        if pre is not None:
            for c in pre.computations:
                for inst in c.instructions:
                    insts.setdefault(inst.name, inst)
            for inst, _ in walk_compute(pre):
                ops.setdefault(inst.name, inst)
        return insts, op_lines(b), ops

    return b.derived("details_index", (pre, b.provenance, b.source.get("file")), make)


def _add_text(d: dict, inst, light: bool) -> dict:
    if light:
        d["light"] = True  # the rest comes with the view that draws it, or with a click on it
    else:
        d.update(text=_cut(inst.text), shape=_shape(inst))
    return d


def _op(b: Bundle, inst, lines_of: dict, light: bool) -> dict:
    d = {"side": "pre", "name": inst.name, "title": f"{inst.name} — {inst.opcode}",
         "op_name": inst.metadata.op_name or "", "lines": lines_of.get(inst.name, [])}
    if not light:  # (a light one: the browser has the kernels from the links)
        prov = b.provenance
        how = prov.how.get(inst.name) if prov else None
        d.update(kernels=op_kernels(prov, inst.name), how=HOW_WORDS.get(how, how or ""))
    return _add_text(d, inst, light)


def _param(inst, side: str, light: bool) -> dict:
    title = f"{inst.metadata.op_name or inst.name} — parameter" if side == "pre" else f"{inst.name} — parameter"
    return _add_text({"side": side, "name": inst.name, "title": title, "lines": []}, inst, light)


def _kernel(b: Bundle, k, post, pre_insts: dict, light: bool) -> dict | None:
    comp = post.by_name.get(k.computation)
    inst = comp.by_name.get(k.name) if comp is not None else None
    if inst is None:
        return None
    prov, user_file = b.provenance, b.source.get("file")
    lines = sorted({ln for f, ln in k.source_lines if b.source.get("code") and (not user_file or f == user_file)})
    d = {"side": "post", "name": k.name,
         "title": f"{k.name} — {inst.opcode} · {ROUTE_LABELS[k.route]}" + (f" ({k.library})" if k.library else ""),
         "route": k.route, "color": ROUTE_COLORS.get(k.route, "#777777"),
         "n_fused": len([o for o in k.fused_opcodes if o != "parameter"]), "lines": lines}
    if light:
        d["light"] = True
        return d
    ops = kernel_ops(prov, k)
    rows = []
    for op in ops[:FUSED_LIMIT]:
        pi = pre_insts.get(op)
        hint = how_hint(prov.how.get(op)) if prov else ""
        rows.append([op, pi.opcode if pi is not None else "", (pi.metadata.op_name if pi is not None else ""), hint])
    fused_text = ""
    if k.opcode == "fusion" and inst.called_computations:
        fc = post.by_name.get(inst.called_computations[0])
        if fc is not None:
            fused_text = _cut("\n".join(i.text for i in fc.instructions), 4000)
    d.update(text=_cut(inst.text), shape=_shape(inst), facts=kernel_facts(b, k), ops=rows, n_ops=len(ops),
             fused_text=fused_text, fused_added=fused_added(k, [pre_insts.get(op) for op in ops]))
    return d


def fused_added(k, pre_ops) -> str:
    """What a fusion's computation holds besides the program's ops it does, by opcode ("bitcast
    ×2, broadcast"): why its instruction count and its op count differ (docs/numbers.md)."""
    from collections import Counter

    have = Counter(o for o in k.fused_opcodes if o != "parameter")
    have.subtract(Counter(i.opcode for i in pre_ops if i is not None))
    extra = sorted(((op, n) for op, n in have.items() if n > 0), key=lambda x: (-x[1], x[0]))
    return ", ".join(op + (f" ×{n}" if n > 1 else "") for op, n in extra[:6]) + (", …" if len(extra) > 6 else "")


def _entry_param(module, name: str):
    inst = module.entry.by_name.get(name) if module is not None else None
    return inst if inst is not None and inst.opcode == "parameter" else None


def node_details(b: Bundle, ids=None, light: bool = False) -> dict[str, dict]:
    """Node id -> details (see the module docstring); only the ids in ``ids`` when given
    (looked up, not searched for: a big program asks for a view's nodes at a time).

    ``light``: what a search, the source highlight and a first look need (side, name, title,
    op name, lines), without the kernels an op ended in (the links have them) and the texts
    that make up most of the size (the instruction, its shape, the fused computation, the ops
    a kernel does). A big program's payload has these for every node and the full details for
    the nodes it draws."""
    pre_insts, lines_of, compute = _indexes(b)
    pre, post = b.module("hlo_before"), b.module("hlo_after")
    out: dict[str, dict] = {}
    if ids is not None:
        for nid in ids:
            kind, _, name = nid.partition(":") if isinstance(nid, str) else ("", "", "")
            d = None
            if kind == "op" and name in compute:
                d = _op(b, compute[name], lines_of, light)
            elif kind == "k" and post is not None:
                k = b.kernel(name)
                d = _kernel(b, k, post, pre_insts, light) if k is not None else None
            elif kind == "p":
                inst = _entry_param(pre, name)
                side = "pre"
                if inst is None:
                    inst, side = _entry_param(post, name), "post"
                d = _param(inst, side, light) if inst is not None else None
            if d is not None:
                out[nid] = d
        return out
    for name, inst in compute.items():
        out[f"op:{name}"] = _op(b, inst, lines_of, light)
    if pre is not None:
        for inst in pre.entry.instructions:
            if inst.opcode == "parameter":
                out[f"p:{inst.name}"] = _param(inst, "pre", light)
    if post is not None:
        for k in b.kernels:
            d = _kernel(b, k, post, pre_insts, light)
            if d is not None:
                out[f"k:{k.name}"] = d
        for inst in post.entry.instructions:
            if inst.opcode == "parameter" and f"p:{inst.name}" not in out:
                out[f"p:{inst.name}"] = _param(inst, "post", light)
    return out


def lecture_order(b: Bundle) -> list[str]:
    """The kernels to step through in a lecture: the biggest first (measured time, else bytes)."""
    t = measured_kernels(b)
    ks = [k for k in launching(b.kernels) if k.route != "control"]
    return [k.name for k in sorted(ks, key=lambda k: (-(t[k.name].time_s if k.name in t else 0), -k.bytes))]


def pack_light(light: dict[str, dict]) -> dict:
    """Light details (``node_details(light=True)``) by column, for a big program's payload: one
    per node, whose JSON as one object each is mostly the field names, the name again (it is
    the id's) and its title's name (docs/performance.md). Here ``name`` is left out
    where it is the id's (``op:NAME``), ``light`` where it is true, and a title that starts with
    the name is only its tail (" — add"); the rest by column (``analysis.columns``: a repeated
    value once). ``unpack_light`` (and the graph component's ``unpackLight``) make them back."""
    ids, rows = [], []
    for nid, d in light.items():
        r = dict(d)
        name = r.get("name")
        if isinstance(name, str) and nid.partition(":")[2] == name:
            del r["name"]
            t = r.get("title")
            if isinstance(t, str) and t.startswith(name):
                r["tail"] = t[len(name):]
                del r["title"]
        if r.get("light") is True:
            del r["light"]
        ids.append(nid)
        rows.append(r)
    cols = columns.encode(rows)
    if cols is None:  # values too big to share where some rows lack them: sent as they are
        return {"ids": [], "columns": None, "rows": light}
    return {"ids": ids, "columns": cols, "rows": None}


def unpack_light(packed: dict) -> dict[str, dict]:
    """The light details ``pack_light`` packed (the graph component does the same)."""
    if packed.get("rows") is not None:
        return packed["rows"]
    out = {}
    for nid, r in zip(packed["ids"], columns.decode(packed["columns"])):
        d = {"name": nid.partition(":")[2], **r} if "name" not in r else dict(r)
        if "tail" in d:
            d["title"] = d["name"] + d.pop("tail")
        d.setdefault("light", True)
        out[nid] = d
    return out
