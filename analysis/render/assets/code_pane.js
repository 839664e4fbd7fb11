/* The Code pane of every graph view (the app's component beside its graphs, the HTML report's
 * Code section): the selected kernel's code at one stage (a picker of the stages the compile
 * has), its facts above it, plain-text search, and the links both ways with the graphs, as
 * Compiler Explorer links source and output. Its look is code_pane.css (the root gets the class
 * ``xe-code``).
 *
 *   const code = XECode.pane(root, hooks);   // root: the pane's element
 *   code.setData(data)        // app/code_payload.code_view's dict (or null: none sent yet); its
 *                             // ``follows``: why a compile's code is not here yet (it comes later)
 *   code.show(kernel, op)     // a kernel's code, scrolled to the first line linked to ``op``
 *   code.mark(op)             // every line linked to ``op`` marked (null: none), scrolled to the first
 *   code.kernel()             // the kernel shown
 *   code.addKernels(add, lazy) // a big compile's kernels' code, sent when first shown
 *   code.wanted()             // the kernel whose code is asked for (null when none is)
 *
 * A kernel's data: ``stages`` {stage: text}, ``ops`` {stage: {line: [instruction names]}},
 * ``pre`` {instruction: [ops before optimization]}, ``facts`` [lines], ``facts_stage``, ``cut``
 * {stage: lines in all}, ``absent`` (why its code is not here, where it is not).
 * hooks.light(kernel, fused, pre): a code line clicked: light those instructions in the
 * graphs; hooks.pick(kernel): a kernel named in the pane clicked; hooks.want(kernel): its code
 * is not here yet (a big compile's, ``lazy``): ask the server for it.
 * The code, the op names and the facts are text from a bundle (untrusted): they become text
 * nodes and spans made here (XEHelpers.el), never HTML. */
(function (root) {
  "use strict";

  const el = XEHelpers.el;
  function escapeRe(s) { return s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"); }

  // The spellings of an HLO name in generated code: as it is (LLVM IR keeps "add.3"), and with
  // the dots and dashes that a symbol cannot hold as underscores
  function spellings(name) {
    const out = [name];
    const u = name.replace(/[.\-]/g, "_");
    if (u !== name) out.push(u);
    return out;
  }

  function pane(box, hooks) {
    let data = null, shown = null, stage = null, lines = [], rows = [], hitRows = [], hitAt = -1, picked = null, lit = [];
    let want = null, wantOp = null;  // a kernel shown whose code is on its way
    const head = el("div", undefined, "chead");
    const pick = el("select"); pick.id = "cstage"; pick.title = "The stage of the code: what XLA emitted, step by step";
    const find = el("input"); find.type = "search"; find.id = "cq"; find.placeholder = "Find in the code";
    find.title = "Plain text, any case; Enter steps through the lines";
    const hits = el("span", "", "chits");
    head.appendChild(pick); head.appendChild(find); head.appendChild(hits);
    const title = el("h3"), facts = el("ul", undefined, "cfacts"), note = el("div", "", "cnote");
    const body = el("div", undefined, "cbody");
    box.classList.add("xe-code");
    [head, title, facts, note, body].forEach((e) => box.appendChild(e));

    // another stage (kept for the next kernel): scrolled to the kernel's function in it
    pick.addEventListener("change", () => { stage = pick.value; draw(firstLineOf(kernelData(shown), shown)); });
    find.addEventListener("input", () => search(find.value));
    find.addEventListener("keydown", (ev) => {
      if (ev.key === "Enter") { ev.preventDefault(); step(ev.shiftKey ? -1 : 1); }
      ev.stopPropagation();  // the graphs' keys ([, ], w, /) are not for this box
    });

    function kernelData(name) { return data && data.kernels ? data.kernels[name] || null : null; }

    function setData(d) {
      data = d;
      if (shown !== null) show(shown, wantOp); else show(null, null);
    }
    function lazy(name) { return !!(data && name && (data.lazy || []).includes(name)); }
    function addKernels(add, stillLazy) {
      if (!data) return;
      Object.assign(data.kernels, add || {});
      data.lazy = Array.isArray(stillLazy) ? stillLazy : (data.lazy || []).filter((n) => !(n in (add || {})));
      if (want && !lazy(want)) show(want, wantOp);
    }

    // the first line linked to ``op`` (an instruction of the kernel, or an op before
    // optimization it stands for) at the stage shown: the instruction itself first, then the
    // instructions that stand for the fewest ops (a constant stands for every op of its line)
    function firstLineOf(kd, op) {
      if (!op || !kd) return null;
      const links = (kd.ops || {})[stage] || {};
      const pre = kd.pre || {};
      let best = null;
      for (const n in links) {
        const ops = links[n];
        let rank = ops.includes(op) ? 0 : Infinity;
        ops.forEach((o) => { const p = pre[o] || []; if (p.includes(op)) rank = Math.min(rank, p.length); });
        if (rank === Infinity) continue;
        if (best === null || rank < best[0] || (rank === best[0] && +n < best[1])) best = [rank, +n];
      }
      return best ? best[1] : functionLine(kd, op);
    }
    // where no line is linked to it (a stage whose lines the compile side did not link): the
    // line that starts the function of that name (PTX ``.entry NAME(``, LLVM ``define ... @NAME(``,
    // an assembly label ``NAME:``)
    function functionLine(kd, op) {
      const names = spellings(op).map(escapeRe).join("|");
      const start = new RegExp("^\\s*(?:\\.visible\\s+)?(?:\\.entry|\\.func)\\s+(?:" + names + ")\\s*\\(|^define\\b[^@]*@\"?(?:"
        + names + ")\"?\\s*\\(|^(?:" + names + "):\\s*$");
      const ls = (kd.stages[stage] || "").split("\n");
      const i = ls.findIndex((t) => start.test(t));
      return i >= 0 ? i + 1 : null;
    }

    function show(name, op) {
      shown = name;
      title.textContent = ""; facts.textContent = ""; note.textContent = ""; body.textContent = "";
      pick.textContent = ""; pick.style.display = "none"; find.style.display = "none"; hits.textContent = "";
      lines = []; rows = []; hitRows = []; hitAt = -1; picked = null; lit = [];
      box.dataset.kernel = name || "";
      if (!data) { note.textContent = "Loading the generated code…"; return; }
      if (!name) { want = null; intro(); return; }
      title.textContent = name;
      if (lazy(name)) {  // asked of the server; shown when it is here (addKernels)
        want = name; wantOp = op;
        note.textContent = "Loading the code of " + name + "…";
        hooks.want(name);
        return;
      }
      want = null; wantOp = null;
      if (data.follows) { note.textContent = data.follows; return; }  // a compile's code that comes later: why
      const kd = kernelData(name);
      if (!kd) {
        const lib = (data.library || {})[name];
        note.textContent = lib || "XLA generated no code of its own for " + name
          + " (it launches no kernel of its own, or this compile kept none of its code).";
        return;
      }
      (kd.facts || []).forEach((f) => facts.appendChild(el("li", f)));
      if (data.note) facts.appendChild(el("li", data.note, "hint"));  // e.g. SASS not made, and why
      const mine = (data.stages || []).filter((s) => kd.stages && kd.stages[s[0]] !== undefined);
      mine.forEach(([s, label]) => { const o = el("option", label); o.value = s; pick.appendChild(o); });
      if (!mine.length) { note.textContent = kd.absent || "No code for " + name + " in this compile."; return; }
      // the stage picked before, else the one the facts were read from (PTX on a GPU), else the first
      if (!stage || !mine.some((s) => s[0] === stage)) {
        stage = mine.some((s) => s[0] === kd.facts_stage) ? kd.facts_stage : mine[0][0];
      }
      pick.value = stage; pick.style.display = ""; find.style.display = "";
      draw(firstLineOf(kd, op));
    }

    function intro() {
      note.appendChild(document.createTextNode("Click a kernel or an op in the graphs: the code XLA generated for its kernel shows here, "
        + "each line that computes an HLO instruction marked; click such a line to light the instruction in the graphs."));
      if (data.follows) { note.appendChild(el("div", data.follows, "hint")); return; }  // (it comes later)
      const names = Object.keys(data.kernels || {}).concat(data.lazy || []);
      if (data.note) note.appendChild(el("div", data.note, "hint"));
      if (!names.length) { note.appendChild(el("div", "This compile carries no generated code.", "hint")); return; }
      const ul = el("ul", undefined, "clist");
      names.slice(0, 40).forEach((k) => {
        const li = el("li"), a = el("a", k);
        a.onclick = () => hooks.pick(k);
        li.appendChild(a); ul.appendChild(li);
      });
      if (names.length > 40) ul.appendChild(el("li", "… " + (names.length - 40) + " more", "hint"));
      note.appendChild(ul);
    }

    // one line: its number, then its text as text nodes, the linked HLO names as spans where
    // the text spells them, and after it, tagged, those it does not (XLA:CPU names its LLVM
    // values %12, not after the instruction: a line is linked by what it does, analysis.codegen.links)
    function lineRow(n, text, ops, names) {
      const row = el("div", undefined, "cl"); row.dataset.line = String(n);
      row.appendChild(el("span", String(n), "no"));
      const spelled = new Set();
      if (ops && names) {
        let at = 0, m;
        names.lastIndex = 0;
        while ((m = names.exec(text)) !== null) {
          if (m.index > at) row.appendChild(document.createTextNode(text.slice(at, m.index)));
          row.appendChild(el("span", m[0], "op"));
          spelled.add(m[0]);
          at = m.index + m[0].length;
          if (m[0].length === 0) names.lastIndex += 1;
        }
        if (at < text.length) row.appendChild(document.createTextNode(text.slice(at)));
      } else {
        row.appendChild(document.createTextNode(text || " "));
      }
      const tagged = (ops || []).filter((o) => !spellings(o).some((s) => spelled.has(s)));
      tagged.slice(0, 3).forEach((o) => row.appendChild(el("span", o, "otag")));
      if (tagged.length > 3) row.appendChild(el("span", "+" + (tagged.length - 3), "otag more"));
      if (ops) {
        row.classList.add("linked");
        row.title = "computes " + ops.join(", ") + " (click: light it in the graphs)";
        row.onclick = () => lightLine(row, ops);
      }
      return row;
    }

    function lightLine(row, ops) {
      if (picked) picked.classList.remove("on");
      picked = row; row.classList.add("on");
      const kd = kernelData(shown) || {};
      const pre = [...new Set(ops.flatMap((o) => (kd.pre || {})[o] || []))];
      hooks.light(shown, ops, pre);
    }

    function draw(scrollTo) {
      const kd = kernelData(shown);
      body.textContent = ""; rows = []; picked = null; lit = [];
      if (!kd) return;
      const text = kd.stages[stage] || "";
      lines = text.split("\n");
      const links = (kd.ops || {})[stage] || {};
      const frag = document.createDocumentFragment();
      lines.forEach((t, i) => {
        const ops = links[String(i + 1)] || null;
        let names = null;
        if (ops && ops.length) {
          const alts = [...new Set(ops.flatMap(spellings))].sort((a, b) => b.length - a.length).map(escapeRe);
          // a name, not a part of a longer one (add.3 is not inside add.31)
          names = new RegExp("(?<![\\w.$-])(?:" + alts.join("|") + ")(?![\\w$]|\\.\\d)", "g");
        }
        const row = lineRow(i + 1, t, ops && ops.length ? ops : null, names);
        rows.push(row); frag.appendChild(row);
      });
      body.appendChild(frag);
      const cut = (kd.cut || {})[stage];
      if (cut) note.textContent = "Only the first lines of " + cut.toLocaleString() + " are kept (the last line says where it was cut).";
      else note.textContent = "";
      search(find.value);
      if (scrollTo) scrollToLine(scrollTo);
      else body.scrollTop = 0;
    }

    function scrollToLine(n) {
      const row = rows[n - 1]; if (!row) return;
      body.scrollTop = Math.max(0, row.offsetTop - body.offsetTop - body.clientHeight / 3);
      row.classList.add("at");
      setTimeout(() => row.classList.remove("at"), 1500);
    }

    // the lines of the stage shown linked to the instruction ``op`` itself, marked (what a
    // selection in the report's graphs shows); the view scrolled to the first
    function mark(op) {
      lit.forEach((r) => r.classList.remove("lit"));
      lit = [];
      const kd = kernelData(shown);
      if (!op || !kd) return;
      const links = (kd.ops || {})[stage] || {};
      rows.forEach((r, i) => { const ops = links[String(i + 1)]; if (ops && ops.includes(op)) lit.push(r); });
      lit.forEach((r) => r.classList.add("lit"));
      if (lit.length) scrollToLine(+lit[0].dataset.line);
    }

    function search(q) {
      hitRows.forEach((r) => r.classList.remove("found"));
      hitRows = []; hitAt = -1;
      q = (q || "").trim().toLowerCase();
      if (!q) { hits.textContent = ""; return; }
      lines.forEach((t, i) => { if (t.toLowerCase().includes(q)) { hitRows.push(rows[i]); rows[i].classList.add("found"); } });
      hits.textContent = hitRows.length ? hitRows.length + " line" + (hitRows.length === 1 ? "" : "s") : "no match";
      if (hitRows.length) step(1);
    }
    function step(d) {
      if (!hitRows.length) return;
      hitAt = (hitAt + d + hitRows.length) % hitRows.length;
      scrollToLine(+hitRows[hitAt].dataset.line);
      hits.textContent = (hitAt + 1) + " of " + hitRows.length;
    }

    return { setData, show, mark, addKernels, wanted: () => want, kernel: () => shown,
             has: (k) => !!kernelData(k) || lazy(k) || !!(data && (data.library || {})[k]) };
  }

  root.XECode = { pane };
})(window);
