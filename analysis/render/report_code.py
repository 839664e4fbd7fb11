"""The report's Code section (issue #36): the selected kernel's generated code, a stage picker
and a search, its facts, the lines XLA linked to HLO instructions marked; a click on such a line
lights the instruction in the graphs, a selection in the graphs shows its kernel's code and
scrolls to the op's lines. Reads the bundle through ``analysis.codegen.kernel_code`` only. The
section is the app's Code pane (``assets/code_pane.js`` and ``code_pane.css``, the files the
app's graphs component serves) over this data (``assets/report_code.js``), so the pane builds the
lines as text (the code is the user's program's), never as markup.

The code travels as one JSON text deflated in base64 (``xe-code``), inflated by the page when
it first shows code; each distinct text once (the layers of a stack share their kernels'
functions, so their texts), a kernel's stages naming theirs by index. The report carries at most
``MAX_REPORT_CODE_CHARS`` of distinct text (a kernel past that says so, and ``xla-explorer code``
prints it from the bundle)."""

from __future__ import annotations

import base64
import json
import zlib

from analysis.codegen.finish import code_of
from analysis.codegen import kernel_code
from analysis.render.code_text import facts_line

MAX_REPORT_CODE_CHARS = 8_000_000  # of code texts in one report, before deflating


def code_data(bundle) -> dict | None:
    """What the page's script gets: ``stages`` {stage: label}, in pipeline order; ``texts``
    [each distinct code text once]; ``links`` [each twins' links once: {line: [op numbers]}];
    ``kernels`` {name: {"facts": line, "stages": {stage: index in texts}, "ops": {stage: {line:
    [op names]}}, "links": {stage: index in links}, "names": [op names by number], "cut":
    {stage: total lines}}} (a stage's lines under ``ops`` or, named by number, under ``links``);
    ``library`` {name: what it calls}. None without code."""
    if not kernel_code.has_code(bundle):
        return None
    from analysis.codegen.links import RenamedLinks

    budget = MAX_REPORT_CODE_CHARS
    kernels = {}
    texts: list[str] = []
    index: dict[str, int] = {}
    links: list[dict] = []  # the twins' shared links, each once (``RenamedLinks.template``)
    link_index: dict[int, int] = {}
    for name in kernel_code.kernel_names(bundle):
        if budget <= 0:  # the report is full: the kernel's loads and stores, its code not made at all
            kernels[name] = {"facts": facts_line(kernel_code.facts_as_read(bundle, name) or kernel_code.empty_facts()),
                             "stages": {}, "ops": {}, "cut": {}, "left_out": True}
            continue
        kc = code_of(bundle, name)
        size = sum(len(t) for t in kc.stages.values() if t not in index)  # what it adds
        left_out = size > budget
        budget -= size  # (a kernel too big for what is left closes the report to the kernels after it)
        stages, ops, shared, names = {}, {}, {}, None
        if not left_out:
            for s, t in kc.stages.items():
                if t not in index:
                    index[t] = len(texts)
                    texts.append(t)
                stages[s] = index[t]
            for s, lines in kc.ops.items():
                if isinstance(lines, RenamedLinks) and (names is None or lines.names is names):
                    names = lines.names
                    i = link_index.get(id(lines.template))
                    if i is None:
                        i = link_index[id(lines.template)] = len(links)
                        links.append(lines.template)
                    shared[s] = i
                else:
                    ops[s] = dict(lines)  # (its line numbers become JSON's strings)
        kernels[name] = {"facts": facts_line(kc.facts), "stages": stages, "ops": ops, "cut": kc.cut,
                         "left_out": left_out, **({"links": shared, "names": names} if shared else {})}
    library = {}
    for k in bundle.kernels:
        lib = kernel_code.library_call(bundle, k.name)
        if lib:
            library[k.name] = (f"a library call ({lib['library'] or '?'}: {lib['target']}): its code is the library's"
                               + (f"; config {lib['config']}" if lib.get("config") else ""))
    return {"stages": {s: kernel_code.stage_label(s) for s in kernel_code.code_stages(bundle)}, "texts": texts, "links": links,
            "kernels": kernels, "library": library}


def code_section(bundle, esc) -> str:
    """The section's HTML and its data (empty without code)."""
    data = code_data(bundle)
    if data is None:
        return ""
    t = kernel_code.totals(bundle)
    names = list(data["kernels"]) + list(data["library"])
    if not names:
        return ""
    opts = "".join(f"<option value='{esc(n)}'>{esc(n)}</option>" for n in names)
    note = f" {esc(kernel_code.note(bundle))}" if kernel_code.note(bundle) else ""
    # zlib's level 1, as the app's payload: a third of level 6's time for a few percent more bytes
    packed = base64.b64encode(zlib.compress(json.dumps(data, separators=(",", ":")).encode(), 1)).decode("ascii")
    return (f"<section id='code'><h2>Generated code</h2><p class='muted small'>{t['kernels']} kernel"
            f"{'s' if t['kernels'] != 1 else ''} with generated code: {t['global_loads']} loads and "
            f"{t['global_stores']} stores through their buffers in all (counted in the code, not executed).{note} "
            "Click a kernel in the graph (or pick it here); marked lines are linked to an HLO instruction: "
            "click one to light it in the graphs.</p>"
            f"<div class='codebar'><label>Kernel <select id='xe-code-kernel'>{opts}</select></label></div>"
            "<div id='xe-code-pane'></div>"
            f"<script type='application/octet-stream' id='xe-code'>{packed}</script></section>")
