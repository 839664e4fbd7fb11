"""The report's Code section (issue #36): the selected kernel's generated code, a stage picker
and a search, its facts, the lines XLA linked to HLO instructions marked; a click on such a line
lights the instruction in the graphs, a selection in the graphs shows its kernel's code and
scrolls to the op's lines. Reads the bundle through ``analysis.codegen.kernel_code`` only; the page's script
builds the lines as text (the code is the user's program's), never as markup.

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
            f"<div class='codebar'><label>Kernel <select id='xe-code-kernel'>{opts}</select></label> "
            "<label>Stage <select id='xe-code-stage'></select></label> "
            "<input id='xe-code-find' type='search' placeholder='find in the code' maxlength='200'> "
            "<span id='xe-code-hits' class='muted small'></span></div>"
            "<div id='xe-code-facts' class='muted small'></div><div id='xe-code-view' class='codeview'></div>"
            f"<script type='application/octet-stream' id='xe-code'>{packed}</script></section>")


CSS = """
.codebar { display:flex; gap:12px; align-items:center; flex-wrap:wrap; font-size:14px; margin:4px 0; }
.codebar select { font-size:14px; max-width:26em; }
.codeview { background:#fff; border:1px solid var(--line); border-radius:8px; max-height:560px; overflow:auto;
  font: 13px/1.45 "DejaVu Sans Mono", monospace; padding:4px 0; }
.codeview .cl { white-space:pre; padding:0 10px; display:flex; }
.codeview .cl .ln { color:#999; width:4em; text-align:right; margin-right:1em; flex:none; user-select:none; }
.codeview .cl.op { background:#F4F8FC; cursor:pointer; }
.codeview .cl.op .tx { text-decoration: underline dotted #4477AA; }
.codeview .cl.xe-hl { background:#FFF1D6; }
.codeview .cl.found .tx { background:#DCEBFF; }
"""

# Uses the report's script (XEReport: inflate, select, onSelect).
JS = r"""
(function () {
  "use strict";
  const src = document.getElementById("xe-code");
  if (!src || !window.XEReport) return;
  const R = window.XEReport;
  const kSel = document.getElementById("xe-code-kernel"), sSel = document.getElementById("xe-code-stage");
  const view = document.getElementById("xe-code-view"), facts = document.getElementById("xe-code-facts");
  const find = document.getElementById("xe-code-find"), hits = document.getElementById("xe-code-hits");
  let data = null, kernel = null, stage = null;
  R.inflate(src).then((d) => { data = d; show(kSel.value); document.body.dataset.code = "ready"; })
    .catch((e) => { view.textContent = "The code could not be read: " + e; });
  function show(name, op) {
    if (!data) return;
    kernel = name;
    if (kSel.value !== name) kSel.value = name;
    const k = data.kernels[name];
    view.textContent = ""; sSel.textContent = "";
    if (!k) { facts.textContent = data.library[name] || "No generated code for this kernel."; return; }
    facts.textContent = k.facts + (k.left_out ? " · its code is not in this report (xla-explorer code prints it)" : "");
    Object.keys(data.stages).filter((s) => s in k.stages).forEach((s) => {
      const o = document.createElement("option"); o.value = s; o.textContent = data.stages[s]; sSel.appendChild(o);
    });
    if (!(stage in k.stages)) stage = sSel.options.length ? sSel.options[0].value : null;
    sSel.value = stage || "";
    draw(op);
  }
  // {line: [op names]} of a kernel's stage: its own, or its twins' shared links in its names
  function opsOf(k, s) {
    if (k.links && s in k.links) {
      const out = {}, t = data.links[k.links[s]];
      Object.keys(t).forEach((n) => { out[n] = t[n].map((i) => k.names[+i]); });
      return out;
    }
    return (k.ops || {})[s] || {};
  }
  function draw(op) {
    const k = data.kernels[kernel];
    view.textContent = "";
    if (!k || !stage) return;
    const ops = opsOf(k, stage);
    const frag = document.createDocumentFragment();
    data.texts[k.stages[stage]].split("\n").forEach((text, i) => {
      const n = String(i + 1), names = ops[n];
      const row = document.createElement("div"); row.className = "cl" + (names ? " op" : ""); row.dataset.n = n;
      const ln = document.createElement("span"); ln.className = "ln"; ln.textContent = n;
      const tx = document.createElement("span"); tx.className = "tx"; tx.textContent = text || " ";
      row.append(ln, tx);
      if (names) { row.title = "HLO: " + names.join(", "); row.dataset.ops = JSON.stringify(names); }
      frag.appendChild(row);
    });
    view.appendChild(frag);
    if (op) scrollTo(op);
    search();
  }
  function scrollTo(op) {
    let first = null;
    view.querySelectorAll(".cl.op").forEach((row) => {
      const on = JSON.parse(row.dataset.ops).includes(op);
      row.classList.toggle("xe-hl", on);
      if (on && !first) first = row;
    });
    if (first) view.scrollTop = first.offsetTop - view.offsetTop - 40;
  }
  function search() {
    const q = find.value;
    let n = 0, first = null;
    view.querySelectorAll(".cl").forEach((row) => {
      const on = !!q && row.lastChild.textContent.includes(q);
      row.classList.toggle("found", on);
      if (on) { n++; first = first || row; }
    });
    hits.textContent = q ? n + " line" + (n === 1 ? "" : "s") : "";
    if (first) view.scrollTop = first.offsetTop - view.offsetTop - 40;
  }
  kSel.addEventListener("change", () => show(kSel.value));
  sSel.addEventListener("change", () => { stage = sSel.value; draw(); });
  find.addEventListener("input", search);
  view.addEventListener("click", (ev) => {
    const row = ev.target.closest(".cl.op");
    if (!row) return;
    const names = JSON.parse(row.dataset.ops), name = names[names.length - 1];
    R.selectOp(name, kernel);
    scrollTo(name);
  });
  // a selection in the graphs: its kernel's code, scrolled to the op's lines
  R.onSelect.push((side, nid, k) => {
    const kind = nid.split(":")[0], name = nid.slice(kind.length + 1);
    if (!k || !data) return;
    const op = (kind === "x" || kind === "op") ? name : null;
    if (k !== kernel) show(k, op); else if (op) scrollTo(op);
  });
})();
"""
