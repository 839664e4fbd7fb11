/* The explorer's graphs component (index.html): its two graphs, their details and the source,
 * the Code pane beside them (code_pane.js), and the one-graph and two-graph views of Compare and
 * the pass pipeline. Everything a click needs (both graphs in a few layouts, the op <-> kernel
 * links, the details of every node, the source lines with their kernels) arrives once per
 * compile; selection, search, focus, expand/collapse and zoom then happen here, and the server
 * only hears which node is selected (for the address bar and the panels that need Python). A big
 * program's payload holds only the view it opens with: another view is asked for ({want}) and
 * arrives with the next render. Once the frame has told the server which data it holds
 * ({have}), reruns send a stub instead of the payload; a frame that lost it asks again ({need}).
 *
 * Protocol (no build step, no network): "streamlit:componentReady" -> "streamlit:render" with
 * args (made whole by payload.js) -> "streamlit:setComponentValue" / "streamlit:setFrameHeight".
 * Pan and zoom are graph.js's, shared with the HTML report. Text from a bundle goes into the page
 * as text (XEHelpers.el), never as markup. */
(function () {
  "use strict";
  const SIDES = ["pre", "post"];
  let A = null, dataKey = null, variant = "default", colour = "route", sel = null, lastServerSel = null, clicks = 0;
  let rev = null;  // the server's revision of the data held (views laid out on request raise it)
  // What the explorer sends the server carries which data it holds: while that is the server's
  // latest, the server sends a stub instead of the whole payload on every rerun (a big program's
  // payload is tens of MB, and a rerun follows every click).
  function tellServer(value) {
    // with how many SVGs each side holds: after a view laid out on request, only the new ones come
    if (dataKey !== null && rev !== null) value.have = [dataKey, rev, heldSvgs()];
    value.code_open = codeShown();
    if (codePane.wanted()) value.code_want = codePane.wanted();  // until its code is here, every message asks for it
    send("streamlit:setComponentValue", { value: value, dataType: "json" });
  }
  function heldSvgs() {
    const out = {};
    SIDES.forEach((s) => { const g = A && A.graphs && A.graphs[s]; out[s] = g ? g.svgs.length : 0; });
    return out;
  }
  const panes = {};
  let adj = {}, found = [], foundAt = -1, lectureAt = -1, height = 600;

  function send(type, data) { window.parent.postMessage(Object.assign({ isStreamlitMessage: true, type: type }, data || {}), "*"); }
  const $ = (id) => document.getElementById(id);
  function legendItem(it) {  // a swatch and its label, kept on one line
    const item = txt("span", undefined, "it"), sw = txt("span", undefined, "sw");
    sw.style.background = it.fill || "white";
    if (it.border) sw.style.border = it.border;
    item.appendChild(sw); item.appendChild(document.createTextNode(it.label));
    return item;
  }
  const txt = XEHelpers.el;  // text as text, never markup

  // ---------------------------------------------------------------- layout and drawing
  function fitHeight(asked) {
    let h = (A && A.height) || asked || 600;
    try {  // fill the browser window below where the component starts
      const fr = window.frameElement, top = fr.getBoundingClientRect().top + (window.parent.scrollY || 0);
      const scroller = window.parent.document.querySelector("[data-testid='stMain']") || window.parent.document.scrollingElement;
      const y = fr.getBoundingClientRect().top + (scroller ? scroller.scrollTop : 0);
      h = Math.max(380, window.parent.innerHeight - Math.max(y, 0) - 12 || top);
    } catch (e) { /* no access to the page: the height the server asked for */ }
    height = h;
    $("main").style.height = (h - $("bar").offsetHeight - 6) + "px";
    send("streamlit:setFrameHeight", { height: h });
  }

  // kernels filled by their share of the step (colours from the server's scale); route as the border
  function paintTime(svg) {
    const T = (colour === "memory" ? A.memfill : A.time) || {};
    svg.querySelectorAll("g.node").forEach((n) => {
      const k = n.id.startsWith("k:") ? n.id.slice(2) : null;
      if (!k || !T[k]) return;
      const shape = n.querySelector("polygon, path"); if (!shape) return;
      if (!shape.dataset.route) shape.dataset.route = shape.getAttribute("stroke") || "";
      shape.setAttribute("stroke", T[k][2]); shape.setAttribute("stroke-width", "2.5");
      shape.setAttribute("fill", T[k][0]);
      n.querySelectorAll("text").forEach((t) => t.setAttribute("fill", T[k][1]));
    });
  }

  function draw(side, keepView) {
    const g = A.graphs[side], view = $("view-" + side);
    const svgText = g ? g.svgs[svgIndex(g)] : null;
    drawnAt[side] = g ? svgIndex(g) : null;
    $("title-" + side).textContent = g ? ((g.titles || {})[variant] || g.title) : (side === "pre" ? "before optimization" : "after optimization");
    $("title-" + side).title = $("title-" + side).textContent;
    const lg = $("legend-" + side); lg.innerHTML = "";
    const post = side === "post";  // only the optimized graph's kernels are recoloured
    if (g) (post && colour === "time" && g.time_legend ? g.time_legend
            : post && colour === "memory" && g.memory_legend ? g.memory_legend : g.legend).forEach((it) => {
      lg.appendChild(legendItem(it));
    });
    const old = panes[side] ? panes[side].viewBox() : null;
    view.innerHTML = "";
    if (!g) { view.appendChild(txt("p", A.missing[side] || "nothing to draw")).style.cssText = "padding:1em;color:#888"; panes[side] = null; return; }
    view.innerHTML = svgText;
    const svg = view.querySelector("svg");
    if (!svg) { panes[side] = null; return; }
    panes[side] = XEGraph.pane(view, svg);
    panes[side].mini = XEGraph.minimap(panes[side], { enabled: mapShown(svg) });
    partNote(side);
    svg.querySelectorAll("title").forEach((t) => { if (t.parentNode.classList.contains("graph")) t.remove(); });
    adj[side] = edges(svg);
    attach(side, svg);
    if ((colour === "time" || colour === "memory") && side === "post") paintTime(svg);
    if (keepView && old) panes[side].setViewBox(old);
    svg.setAttribute("data-ready", "1");
    // the id index the first click needs, built while the page is idle
    (window.requestIdleCallback || ((f) => setTimeout(f, 200)))(() => nodeOf(side, ""));
  }

  // the SVG a side draws: in presentation mode the view's drawing for a projector (dense, laid out
  // for one graph's pane: app.graph_payload.add_present) once it is here, else the view's own
  function svgIndex(g) {
    if (presenting() && g.present && g.present[variant] !== undefined) return g.present[variant];
    return g.variants[variant] !== undefined ? g.variants[variant] : g.variants["default"];
  }
  const drawnAt = {};  // the SVG each side draws now
  function presenting() { return document.body.classList.contains("present"); }

  // ---------------------------------------------------------------- one graph at a time (presentation)
  // A projector shows one graph at a time, the width of both panes: Before or After (a
  // selection shows its own side; the other side's linked nodes are lit when it is shown), or
  // Both side by side as outside presentation mode.
  let solo = "pre";
  function applySolo() {
    const on = presenting();
    document.body.classList.toggle("solo-pre", on && solo === "pre");
    document.body.classList.toggle("solo-post", on && solo === "post");
    $("soloS").style.display = on ? "" : "none";
    [["soloPre", "pre"], ["soloPost", "post"], ["soloBoth", "both"]].forEach(([b, v]) => $(b).classList.toggle("on", solo === v));
  }
  function shown(side) { return !presenting() || solo === "both" || solo === side; }
  function setSolo(side) {
    if (solo === side) return;
    solo = side; applySolo();
    const s = sel; sel = null;
    redraw(false);
    if (s) { if (s.side === "line") selectLine(s.line, false); else select(s.side, s.id, false); }
  }
  // in presentation mode, a view without its projector's drawing yet is asked of the server once
  const presentAsked = new Set();
  function askPresent() {
    if (!presenting() || !A || !A.graphs) return;
    const have = SIDES.some((s) => A.graphs[s] && A.graphs[s].present && A.graphs[s].present[variant] !== undefined);
    if (have || presentAsked.has(variant) || !laidOut(variant)) return;
    presentAsked.add(variant); clicks += 1;
    tellServer({ want: "present:" + variant, n: clicks });
  }

  function edges(svg) {
    const out = {};
    svg.querySelectorAll("g.edge").forEach((e) => {
      const t = e.querySelector("title"); if (!t) return;
      const [a, b] = t.textContent.split("->");
      e.dataset.a = a; e.dataset.b = b;
      (out[a] = out[a] || []).push(b); (out[b] = out[b] || []).push(a);
    });
    return out;
  }

  // both sides open at one scale: the smaller of the two fits, never below the legible minimum
  function openViews(min) {
    const fits = SIDES.filter((s) => panes[s] && shown(s)).map((s) => panes[s].fitScale());
    const s = Math.min.apply(null, fits.concat([(A && A.max_scale) || 1.6]));
    min = min || (A && A.min_scale) || 1.0;
    SIDES.forEach((side) => { if (panes[side]) panes[side].open({ scale: s, min: min, skip: (n) => /^(p|c):/.test(n.id) }); });
  }
  // "Fit": each graph whole; in presentation mode never below the legible minimum (every label
  // 14 px or more): a graph too big for its pane at that size shows its top, and says so (partNote)
  let singleMin = null;
  function fitPanes() {
    if (!document.body.classList.contains("present")) { SIDES.forEach((s) => panes[s] && panes[s].fitAll()); return; }
    openViews(singleMin || (A && A.min_scale));
  }
  // what a pane shows when its graph is not whole: "Part of the graph", and how to see the rest
  function partNote(side) {
    const p = panes[side]; if (!p) return;
    const note = txt("div", "Part of the graph at a readable size: drag to move, − to see more", "part");
    p.view.appendChild(note);
    const update = () => note.classList.toggle("on", !p.whole());
    p.onChange(update);
    update();
  }

  // ---------------------------------------------------------------- why (not) fused
  // A.why: each pre-optimization edge across a kernel boundary that has a decision, as
  // [producer, consumer, row, decision, pass, reason index], and the reasons as [XLA's words,
  // gloss] (analysis.render.decisions.edge_why). Shown as text only, never HTML.
  let whyIx = null;
  function whyIndex() {
    if (whyIx) return whyIx;
    whyIx = { byEdge: new Map(), byOp: new Map() };
    ((A.why || {}).edges || []).forEach((e) => {
      whyIx.byEdge.set("op:" + e[0] + "->op:" + e[1], e);
      [e[0], e[1]].forEach((op) => { if (!whyIx.byOp.has(op)) whyIx.byOp.set(op, []); whyIx.byOp.get(op).push(e); });
    });
    return whyIx;
  }
  function whyOfEdge(g) { return whyIndex().byEdge.get(g.dataset.a + "->" + g.dataset.b) || null; }
  function reasonOf(e) { return ((A.why || {}).reasons || [])[e[5]] || ["", ""]; }
  function refusedFirst(list) { return list.slice().sort((x, y) => (y[3] === "not fused") - (x[3] === "not fused")); }
  // the decisions about the ops of a selection (an op, or a kernel's ops), refusals first
  function whyOfSel(r) {
    if (!r) return [];
    const ix = whyIndex(), seen = new Set(), out = [];
    (r.ops || []).forEach((op) => (ix.byOp.get(op) || []).forEach((e) => { if (!seen.has(e)) { seen.add(e); out.push(e); } }));
    return refusedFirst(out);
  }
  function attachWhy(svg) {
    if (!((A.why || {}).edges || []).length) return;
    svg.querySelectorAll("g.edge").forEach((g) => {
      const e = whyOfEdge(g); if (!e) return;
      g.classList.add("why");
      const path = g.querySelector("path");
      if (path) {  // a wide invisible stroke over the thin one: the edge is easy to hit
        const hit = path.cloneNode(false); hit.setAttribute("class", "hit"); hit.removeAttribute("stroke-dasharray");
        path.parentNode.insertBefore(hit, path.nextSibling);
      }
      g.addEventListener("click", (ev) => {
        ev.stopPropagation(); ev.preventDefault();
        if (panes.pre && panes.pre.moved()) return;
        showWhy(e, true);
      });
    });
  }
  let whyAt = -1;
  function showWhy(e, fromClick) {
    const [prod, cons, row, decision, pass] = e, [words, gl] = reasonOf(e);
    clearMarks();
    mark("pre", ["op:" + prod, "op:" + cons], "me");
    const ks = [...new Set([].concat((A.links.pre2k || {})[prod] || [], (A.links.pre2k || {})[cons] || []))];
    mark("post", ks.flatMap((k) => ["k:" + k, "f:" + k]), "hl");
    SIDES.forEach((s) => { if (panes[s]) panes[s].svg.classList.add("sel"); });
    document.querySelectorAll("g.edge.picked").forEach((g) => g.classList.remove("picked"));
    const v = $("view-pre"), svg = v && v.querySelector("svg");
    if (svg) svg.querySelectorAll("g.edge.why").forEach((g) => { if (whyOfEdge(g) === e) { g.classList.add("picked"); marked.push(g); } });
    const box = $("details"); box.innerHTML = ""; box.classList.add("why");
    box.dataset.name = prod + " -> " + cons;
    const refused = decision === "not fused";
    box.appendChild(txt("h3", refused ? "Why not fused" : "Why: " + decision));
    const pair = txt("div", undefined, "pair");
    pair.appendChild(link(prod, "pre", "op:" + prod)); pair.appendChild(document.createTextNode(refused ? "  ✕  " : "  →  "));
    pair.appendChild(link(cons, "pre", "op:" + cons));
    box.appendChild(pair);
    box.appendChild(section("XLA's words (" + (pass || "fusion pass") + ")"));
    box.appendChild(txt("div", words || "(XLA printed no reason)", "words"));
    box.appendChild(section("In plain words"));
    box.appendChild(txt("div", gl || "no explanation is written for this reason yet", "gloss"));
    if (ks.length) {
      box.appendChild(section("Their kernels"));
      const ul = txt("ul"); ks.forEach((k) => { const li = txt("li"); li.appendChild(link(k, "post", "k:" + k)); ul.appendChild(li); });
      box.appendChild(ul);
    }
    const a = txt("a", "Row #" + row + " of the Fusion decisions table"); a.className = "rowlink";
    a.onclick = () => { clicks += 1; tellServer({ row: row, n: clicks }); scrollToRow(); };
    box.appendChild(a);
    if (fromClick && panes.pre) {  // the two ops in view
      const el = nodeOf("pre", "op:" + prod) || nodeOf("pre", "op:" + cons);
      if (el && !panes.pre.inView(el)) panes.pre.center(el);
    }
  }
  // the page shows the row once it has rerun: scrolled to it then (polled for a while)
  function scrollToRow() {
    let tries = 0;
    const t = setInterval(() => {
      tries += 1;
      let el = null;
      try { el = window.parent.document.querySelector(".st-key-fd_focus_box"); } catch (e) { clearInterval(t); return; }
      if (el) { el.scrollIntoView({ block: "center" }); clearInterval(t); } else if (tries > 40) clearInterval(t);
    }, 250);
  }
  // key w on a selected node: its decisions one after another (refusals first)
  function whyKey() {
    const list = whyOfSel(sel);
    if (!list.length) return;
    whyAt = (whyAt + 1) % list.length;
    const keep = sel;
    showWhy(list[whyAt], true);
    sel = keep;
  }

  function attach(side, svg) {
    if (side === "pre") attachWhy(svg);
    svg.querySelectorAll("g.node, g.cluster").forEach((g) => {
      g.addEventListener("click", (ev) => {
        ev.stopPropagation();
        if (panes[side] && panes[side].moved()) return;
        select(side, g.id, true);
      });
      g.addEventListener("dblclick", (ev) => {
        ev.stopPropagation();
        if (g.id.startsWith("L:") && hasVariant("layers:" + g.id.slice(2))) openLayer(g.id.slice(2));
        else if (/^(k|f|s):/.test(g.id)) setVariant("expanded", true);
      });
    });
  }

  // ---------------------------------------------------------------- selection
  // id -> element of each drawn SVG, built once per drawing: a layer's click looks up hundreds
  // of ids (its kernels and their fused ops), most of them not drawn, and a querySelector for
  // each one walked the whole view
  const idIndex = new WeakMap();
  function nodeOf(side, id) {
    const v = $("view-" + side), svg = v && v.querySelector("svg");
    if (!svg) return v ? v.querySelector("[id='" + CSS.escape(id) + "']") : null;
    let ix = idIndex.get(svg);
    if (!ix) {
      ix = new Map();
      svg.querySelectorAll("g[id]").forEach((e) => { if (!ix.has(e.id)) ix.set(e.id, e); });
      idIndex.set(svg, ix);
    }
    return ix.get(id) || null;
  }
  function kernelOfFused(name) { for (const k in A.links.fused) if (A.links.fused[k].includes(name)) return k; return null; }

  // node id -> {side, name, kernel, ops}
  function resolve(side, id) {
    const kind = id.split(":")[0], name = id.slice(kind.length + 1);
    if (kind === "L") {  // a model layer: its ops on one side, its kernels on the other
      const box = ((A.layers || {}).boxes || {})[id];
      return box ? { side, name: box.path, id, kernels: box.kernels, ops: box.ops, layer: true } : null;
    }
    if (side === "post") {
      let k = (kind === "k" || kind === "f") ? name : kind === "x" ? kernelOfFused(name) : null;
      if (kind === "p") return { side, name, id: "p:" + name, kernels: [], ops: [] };
      if (!k) return null;
      return { side, name: k, id: "k:" + k, kernels: [k], ops: A.links.k2pre[k] || [] };
    }
    if (kind === "op") return { side, name, id, kernels: A.links.pre2k[name] || [], ops: [name] };
    if (kind === "p") return { side, name, id, kernels: [], ops: [] };
    if (kind === "s") { setVariant("expanded", true); return null; }
    return null;
  }

  // the overview: on by itself for a graph of more than MAP_NODES nodes, or as the Map button says
  const MAP_NODES = 150;
  let mapOn = null;
  function mapShown(svg) { return mapOn === null ? svg.querySelectorAll("g.node").length > MAP_NODES : mapOn; }
  function refreshMinis() { SIDES.forEach((s) => { if (panes[s] && panes[s].mini) panes[s].mini.refresh(); }); }
  let marked = [];  // what mark() lit, so clearing does not search the whole page for it
  function clearMarks() {
    marked.forEach((e) => e.classList.remove("hl", "me", "picked"));
    marked = [];
    SIDES.forEach((s) => { if (panes[s]) panes[s].svg.classList.remove("sel"); });
    refreshMinis();
  }

  function mark(side, ids, cls) {
    refreshMinis();
    const els = [];
    ids.forEach((id) => { const e = nodeOf(side, id); if (e) { e.classList.add(cls); els.push(e); marked.push(e); } });
    return els;
  }

  function select(side, id, fromClick) {
    if (id && presenting() && solo !== "both" && (side === "pre" || side === "post") && side !== solo) { solo = side; applySolo(); sel = null; redraw(false); }
    const r = id ? resolve(side, id) : null;
    clearMarks();
    sel = r;
    if (!r) { showDetails(null); followCode(null, null, null); if (fromClick) tell(); applyFocus(); return; }
    const ks = r.kernels.flatMap((k) => ["k:" + k, "f:" + k].concat((A.links.fused[k] || []).map((x) => "x:" + x)));
    const postEls = mark("post", ks, "hl"), preEls = mark("pre", r.ops.map((o) => "op:" + o), "hl");
    mark(side, [r.id, side === "post" ? "f:" + r.name : r.id], "me");
    if (A.layers) {  // the highlight reaches into collapsed layers: their boxes light up
      const L = A.layers, other = side === "pre" ? "post" : "pre";
      if (r.layer) mark(other, [r.id], "me").forEach((e) => (other === "post" ? postEls : preEls).push(e));
      const notMe = (id) => id && id !== r.id;  // a sub-layer or an op lights the box it is in
      mark("pre", [...new Set(r.ops.map((o) => L.op_box[o]).filter(notMe))], "hl").forEach((e) => preEls.push(e));
      mark("post", [...new Set(r.kernels.map((k) => L.kernel_box[k]).filter(notMe))], "hl").forEach((e) => postEls.push(e));
    }
    SIDES.forEach((s) => { if (panes[s]) panes[s].svg.classList.add("sel"); });
    // bring what lit up on the other side into view, zoom and pan kept where it already shows
    const other = side === "pre" ? "post" : "pre", els = other === "post" ? postEls : preEls;
    if (panes[other] && els.length && !els.some((e) => panes[other].inView(e))) panes[other].center(els[0]);
    if (!fromClick && panes[side]) { const me = nodeOf(side, r.id) || nodeOf(side, "f:" + r.name); if (me && !panes[side].inView(me)) panes[side].center(me); }
    // the source lines it came from
    document.querySelectorAll("#source div.ln.hl").forEach((e) => e.classList.remove("hl"));
    const d = A.details[r.id] || {};
    (d.lines || []).forEach((n) => { const e = $("src-" + n); if (e) e.classList.add("hl"); });
    showDetails(r);
    applyFocus();
    followCode(side, id, r);
    if (fromClick) tell();
  }

  function selectLine(n, fromClick) {
    clearMarks();
    const line = (A.source || [])[n - 1]; if (!line) return;
    sel = { side: "line", line: n, name: null, kernels: line.kernels.map((k) => k[0]), ops: line.ops };
    mark("pre", line.ops.map((o) => "op:" + o), "hl");
    const ks = mark("post", sel.kernels.flatMap((k) => ["k:" + k, "f:" + k]), "hl");
    SIDES.forEach((s) => { if (panes[s]) panes[s].svg.classList.add("sel"); });
    document.querySelectorAll("#source div.ln.hl").forEach((e) => e.classList.remove("hl"));
    $("src-" + n).classList.add("hl");
    if (ks.length && panes.post && !ks.some((e) => panes.post.inView(e))) panes.post.center(ks[0]);
    showLineDetails(n, line);
    followCode("line", null, sel);
    if (fromClick === false) return;
    clicks += 1;
    sentByMe(JSON.stringify({ line: n }));
    tellServer({ sel: { line: n }, n: clicks });
  }

  // Until the server has heard of our latest click, a render still carrying a selection from
  // before it (Streamlit may redraw the frame meanwhile) must not undo it: what the server held
  // before, and every selection sent since, are ignored until the latest one comes back.
  let ownSent = null, ownLatest = null;
  function sentByMe(v) {
    if (ownSent === null) ownSent = new Set([lastServerSel]);
    ownSent.add(v); ownLatest = v; lastServerSel = v;
  }
  function staleRender(want) {
    if (ownSent === null) return false;
    if (want === ownLatest) { ownSent = null; ownLatest = null; lastServerSel = want; return true; }
    return ownSent.has(want);
  }
  function tell() {
    clicks += 1;
    const v = sel && !sel.layer ? { side: sel.side, name: sel.name } : {};
    sentByMe(JSON.stringify(v));
    tellServer({ sel: v, n: clicks });
  }

  function applyFocus() {
    const on = $("focus").checked;
    $("focusL").classList.toggle("on", on);
    SIDES.forEach((side) => {
      const p = panes[side]; if (!p) return;
      p.svg.classList.remove("focus");
      p.svg.querySelectorAll(".near").forEach((e) => e.classList.remove("near"));
      if (!on || !sel) return;
      const seeds = Array.from(p.svg.querySelectorAll("g.node.hl, g.node.me")).map((e) => e.id);
      p.svg.querySelectorAll("g.cluster.hl g.node").forEach((e) => seeds.push(e.id));
      if (!seeds.length) return;
      const near = new Set(seeds); let frontier = seeds;
      for (let i = 0; i < 2; i++) {
        const next = [];
        frontier.forEach((n) => (adj[side][n] || []).forEach((m) => { if (!near.has(m)) { near.add(m); next.push(m); } }));
        frontier = next;
      }
      const els = [];
      near.forEach((id) => { const e = nodeOf(side, id); if (e) { e.classList.add("near"); els.push(e); } });
      p.svg.querySelectorAll("g.edge").forEach((e) => { if (near.has(e.dataset.a) && near.has(e.dataset.b)) e.classList.add("near"); });
      p.svg.classList.add("focus");
      p.show(els);
    });
  }

  // ---------------------------------------------------------------- details (text only, never HTML)
  function link(text, side, id) { const a = txt("a", text); a.onclick = () => select(side, id, true); return a; }
  function section(title) { const b = txt("div"); b.appendChild(txt("b", title)); return b; }
  const HINT = "Click a node in either graph: a kernel lights up the ops it does, an op the kernel it ended in. "
    + "Keys: [ and ] step through the kernels, biggest first; / searches.";
  function showDetails(r) {
    const box = $("details"); box.innerHTML = ""; box.classList.remove("why"); whyAt = -1;
    if (!r) {
      (A.cards || []).forEach((c) => {
        const d = txt("div", undefined, "card");
        d.appendChild(txt("div", c.label, "clabel")); d.appendChild(txt("div", c.value, "cvalue"));
        if (c.delta) d.appendChild(txt("div", c.delta, "cdelta"));
        box.appendChild(d);
      });
      box.appendChild(txt("p", HINT, "hint"));
      return;
    }
    const d = A.details[r.id] || {};
    box.appendChild(txt("h3", d.title || r.name));
    box.dataset.name = r.name;
    if (d.facts) { const ul = txt("ul"); d.facts.forEach((f) => ul.appendChild(txt("li", f))); box.appendChild(ul); }
    if (d.shape) box.appendChild(txt("div", "Shape " + d.shape, "muted"));
    if (r.layer) {
      const inside = "layers:" + d.name, open = hasVariant(inside);
      const a = txt("a", variant === inside ? "Collapse it again (all layers)" : open ? "Open this layer in place" : "");
      if (variant === inside) a.onclick = () => setVariant("layers", true);
      else if (open) a.onclick = () => openLayer(d.name);
      if (a.textContent) box.appendChild(a);
      box.appendChild(section(r.kernels.length + " kernel" + (r.kernels.length === 1 ? "" : "s") + " of its own"));
      const ul = txt("ul");
      r.kernels.slice(0, 14).forEach((k) => { const li = txt("li"); li.appendChild(link(k, "post", "k:" + k)); ul.appendChild(li); });
      if (r.kernels.length > 14) ul.appendChild(txt("li", "… " + (r.kernels.length - 14) + " more", "muted"));
      box.appendChild(ul);
      const sh = ((A.layers.boxes || {})[r.id] || {}).shared || [];
      if (sh.length) {
        box.appendChild(section("Shared with other layers"));
        const u2 = txt("ul"); sh.forEach((k) => { const li = txt("li"); li.appendChild(link(k, "post", "k:" + k)); u2.appendChild(li); });
        box.appendChild(u2);
      }
    }
    if (r.side === "post" && d.ops) {
      box.appendChild(section(d.n_ops + " op" + (d.n_ops === 1 ? "" : "s") + " of the program"
        + (d.n_fused && d.n_fused !== d.n_ops ? " · its fused computation holds " + d.n_fused + " instructions"
           + (d.fused_added ? " (XLA added " + d.fused_added + ")" : "") : "")));
      const ul = txt("ul");
      d.ops.forEach((o) => { const li = txt("li"); li.appendChild(link(o[0], "pre", "op:" + o[0])); li.appendChild(document.createTextNode(" " + o[1] + (o[2] ? " — " + o[2] : ""))); if (o[3]) li.appendChild(txt("span", " (" + o[3] + ")", "hint")); ul.appendChild(li); });
      if (d.n_ops > d.ops.length) ul.appendChild(txt("li", "… " + (d.n_ops - d.ops.length) + " more", "muted"));
      box.appendChild(ul);
    } else if (r.side === "pre" && (d.kernels || d.light)) {
      const kernels = d.kernels || r.kernels;
      box.appendChild(section("Ended in " + kernels.length + " kernel" + (kernels.length === 1 ? "" : "s") + (d.how ? " (matched by " + d.how + ")" : "")));
      const ul = txt("ul");
      kernels.forEach((k) => { const li = txt("li"); li.appendChild(link(k, "post", "k:" + k)); ul.appendChild(li); });
      if (!kernels.length) ul.appendChild(txt("li", "optimized away (folded or eliminated)", "hint"));
      box.appendChild(ul);
      if (d.op_name) box.appendChild(txt("div", d.op_name, "muted"));
    }
    const decs = r.layer ? [] : whyOfSel(r);
    if (decs.length) {  // XLA's decisions at this op's (or kernel's) boundary: each opens the why panel
      box.appendChild(section("Fusion decisions (key w)"));
      const ul = txt("ul"), mine = new Set(r.ops || []);
      decs.slice(0, 12).forEach((e) => {
        const other = mine.has(e[0]) && !mine.has(e[1]) ? e[1] : mine.has(e[1]) && !mine.has(e[0]) ? e[0] : e[0] + " -> " + e[1];
        const li = txt("li", undefined, "dec"), [words] = reasonOf(e);
        const a = txt("a", (e[3] === "not fused" ? "not fused with " : e[3] + " with ") + other);
        a.onclick = () => showWhy(e, true);
        li.appendChild(a); li.appendChild(document.createTextNode(" because " + (words || "XLA printed no reason")));
        ul.appendChild(li);
      });
      if (decs.length > 12) ul.appendChild(txt("li", "… " + (decs.length - 12) + " more", "muted"));
      box.appendChild(ul);
    }
    if (d.lines && d.lines.length) {
      box.appendChild(section("Source line" + (d.lines.length > 1 ? "s " : " ") + d.lines.join(", ")));
      const pre = txt("pre"); pre.textContent = d.lines.slice(0, 6).map((n) => n + "  " + (((A.source || [])[n - 1] || {}).text || "").trim()).join("\n");
      box.appendChild(pre);
    }
    if (d.light) box.appendChild(txt("p", "Loading its instruction, shape and fused ops…", "hint"));  // on their way from the server
    if (d.text) { box.appendChild(section("Instruction")); box.appendChild(txt("pre", d.text)); }
    if (d.fused_text) { box.appendChild(section("Fused computation")); box.appendChild(txt("pre", d.fused_text)); }
  }
  function showLineDetails(n, line) {
    const box = $("details"); box.innerHTML = "";
    box.appendChild(txt("h3", "Source line " + n));
    box.appendChild(txt("pre", line.text));
    box.appendChild(section(line.ops.length + " op(s) before optimization, now inside " + line.kernels.length + " kernel(s)"));
    const ul = txt("ul");
    line.kernels.forEach((k) => { const li = txt("li"); li.appendChild(link(k[0], "post", "k:" + k[0])); ul.appendChild(li); });
    box.appendChild(ul);
  }

  // ---------------------------------------------------------------- the Code pane (code_pane.js)
  // The code comes only when the pane is first opened ({want: "code"}, app.graph_payload.add_code):
  // the first graph never waits for it. The pane follows the selection; a line of it clicked
  // lights the instructions it computes in both graphs.
  const codePane = XECode.pane($("code"), {
    light: lightCode,
    pick: (k) => { select("post", "k:" + k, false); tell(); },
    want: () => { clicks += 1; tellServer({ want: "code", n: clicks }); },
  });
  function codeShown() { return $("code").classList.contains("shown"); }
  function openCode(on, ask) {
    $("code").classList.toggle("shown", on); $("codeB").classList.toggle("on", on);
    if (on) { codePane.setData(A.code || null); followCode(sel && sel.side, sel && sel.id, sel); }
    if (ask) { clicks += 1; tellServer({ want: "code", n: clicks }); }
  }
  // the kernel whose code the selection shows, and the instruction to scroll to
  function followCode(side, id, r) {
    if (!codeShown() || !A.code) return;
    if (!r || r.layer) { codePane.show(null, null); return; }
    if (side === "line") { codePane.show(r.kernels.find((k) => codePane.has(k)) || r.kernels[0] || null, null); return; }
    // a kernel: scrolled to its function (the line linked to the kernel itself); a fused instruction: to its line
    if (side === "post") { codePane.show(r.name, id && id.startsWith("x:") ? id.slice(2) : r.name); return; }
    codePane.show(r.kernels.find((k) => codePane.has(k)) || r.kernels[0] || null, r.name);
  }
  function lightCode(kernel, fused, pre) {
    clearMarks();
    const postEls = mark("post", fused.map((x) => "x:" + x), "me");
    mark("post", ["k:" + kernel, "f:" + kernel], "hl").forEach((e) => postEls.push(e));
    const preEls = mark("pre", pre.map((o) => "op:" + o), "me");
    if (A.layers) {  // inside collapsed layers: their boxes light up
      const L = A.layers;
      mark("pre", [...new Set(pre.map((o) => L.op_box[o]).filter(Boolean))], "hl").forEach((e) => preEls.push(e));
      mark("post", [L.kernel_box[kernel]].filter(Boolean), "hl").forEach((e) => postEls.push(e));
    }
    SIDES.forEach((s) => { if (panes[s]) panes[s].svg.classList.add("sel"); });
    // a line clicked asks where its instruction is: each graph centred on it (the first one lit)
    [["post", postEls], ["pre", preEls]].forEach(([s, els]) => { if (panes[s] && els.length) panes[s].center(els[0]); });
  }

  // ---------------------------------------------------------------- source pane
  function drawSource() {
    const box = $("source"); box.innerHTML = "";
    (A.source || []).forEach((l) => {
      const row = txt("div", undefined, "ln"); row.id = "src-" + l.n;
      row.appendChild(txt("span", String(l.n), "no"));
      row.appendChild(document.createTextNode(l.text || " "));
      l.kernels.slice(0, 4).forEach((k) => {
        const t = txt("span", k[0], "tag"); t.style.borderColor = k[1]; t.title = "kernel " + k[0];
        t.onclick = (ev) => { ev.stopPropagation(); select("post", "k:" + k[0], true); };
        t.onmouseenter = () => mark("post", ["k:" + k[0], "f:" + k[0]], "found");
        t.onmouseleave = () => document.querySelectorAll(".found").forEach((e) => e.classList.remove("found"));
        row.appendChild(t);
      });
      if (l.kernels.length > 4) row.appendChild(txt("span", "+" + (l.kernels.length - 4), "muted"));
      if (l.ops.length) row.onclick = () => selectLine(l.n);
      box.appendChild(row);
    });
    $("srcB").style.display = (A.source || []).length ? "" : "none";
  }

  // ---------------------------------------------------------------- search
  function search(q) {
    document.querySelectorAll(".found").forEach((e) => e.classList.remove("found"));
    found = []; foundAt = -1; $("suggest").innerHTML = "";
    q = (q || "").trim().toLowerCase();
    if (!q) { $("hits").textContent = ""; return; }
    const m = q.match(/^(?:line\s*)?(\d+)$/);
    if (m && A.source && A.source[+m[1] - 1]) { selectLine(+m[1]); $("hits").textContent = "line " + m[1]; return; }
    const parts = q.split("/").filter(Boolean);
    for (const id in A.details) {
      const d = A.details[id];
      const hay = (d.name + " " + (d.op_name || "") + " " + (d.title || "")).toLowerCase();
      const ok = hay.includes(q) || (parts.length > 1 && parts.every((p) => hay.includes(p)));
      if (!ok) continue;
      if (d.side === "layer") {  // a layer is found whether or not its box is drawn now
        const els = SIDES.map((s) => nodeOf(s, id)).filter(Boolean);
        els.forEach((e) => e.classList.add("found"));
        found.push([els.length && !nodeOf("pre", id) ? "post" : "pre", id]);
        continue;
      }
      const el = nodeOf(d.side, id) || (d.side === "post" ? nodeOf("post", "f:" + d.name) : null);
      if (el) { el.classList.add("found"); found.push([d.side, id]); }
    }
    refreshMinis();
    $("hits").textContent = found.length ? found.length + " match" + (found.length === 1 ? "" : "es") + " · Enter" : "no match";
    if (!found.length) suggest(q);
  }
  function suggest(q) {  // the closest names and scopes, so a typo or a wrong path still leads somewhere
    const words = new Set();
    for (const id in A.details) {
      const d = A.details[id];
      (d.op_name || "").split("/").forEach((w) => { const c = w.replace(/^(jit|pjit|jvp|vmap|transpose)\((.*)\)$/, "$2"); if (c) words.add(c); });
      words.add(d.name);
    }
    const last = q.split("/").filter(Boolean).pop() || q;
    const score = (w) => { w = w.toLowerCase(); let s = 0; for (let i = 0; i < Math.min(w.length, last.length); i++) if (w[i] === last[i]) s++; else break; return s + (w.includes(last.slice(0, 3)) ? 1 : 0); };
    const best = Array.from(words).map((w) => [score(w), w]).filter((x) => x[0] > 0).sort((a, b) => b[0] - a[0] || a[1].length - b[1].length).slice(0, 4);
    if (!best.length) return;
    $("suggest").appendChild(document.createTextNode("try:"));
    best.forEach(([, w]) => { const a = txt("a", w); a.onclick = () => { $("q").value = w; search(w); }; $("suggest").appendChild(a); });
  }
  function nextFound(step) {
    if (!found.length) return;
    foundAt = (foundAt + step + found.length) % found.length;
    const [side, id] = found[foundAt];
    select(side, id, true);
    // the match in view in its own pane (the other side's follow in select), centred
    const me = nodeOf(side, id) || (side === "post" ? nodeOf("post", "f:" + id.slice(id.indexOf(":") + 1)) : null);
    if (me && panes[side] && !panes[side].inView(me)) panes[side].center(me);
    $("hits").textContent = (foundAt + 1) + " of " + found.length;
  }

  // ---------------------------------------------------------------- lecture: the kernels, biggest first
  function stepKernel(d) {
    const L = A.lecture || []; if (!L.length) return;
    lectureAt = (lectureAt + d + L.length) % L.length;
    select("post", "k:" + L[lectureAt], false);
    const me = nodeOf("post", "k:" + L[lectureAt]) || nodeOf("post", "f:" + L[lectureAt]);
    if (me && panes.post) panes.post.center(me);
    tell();
  }

  function laidOut(name) { return SIDES.some((s) => A.graphs[s] && A.graphs[s].variants[name] !== undefined); }
  function hasVariant(name) { return laidOut(name) || (A.lazy || []).includes(name); }
  // A view not laid out yet (a big program lays out only the one it opens with) is asked of
  // the server, which lays it out once and sends it with the next render; then it is shown.
  let pending = null;
  function setVariant(name, keepView, then) {
    if (!laidOut(name) && (A.lazy || []).includes(name)) {
      pending = { name, keepView, then };
      const what = name === "expanded" ? "every op and fused instruction" : name === "collapsed" ? "every kernel, scopes collapsed"
        : name === "default" ? "every op" : "layer " + name.slice(7);
      SIDES.forEach((s) => { const v = $("view-" + s); if (v && A.graphs[s]) { v.innerHTML = ""; v.appendChild(txt("p", "Laying out " + what + "…", "wait")); } });
      clicks += 1;
      tellServer({ want: name, n: clicks });
      return;
    }
    pending = null;
    variant = name; redraw(keepView);
    if (then) then();
  }
  function openLayer(path) {  // one layer opened in place, the others still boxes; centred on it
    setVariant("layers:" + path, true, () => centreLayer(path));
  }
  function centreLayer(path) {
    const box = (A.layers.boxes || {})["L:" + path] || {};
    SIDES.forEach((s) => {
      if (!panes[s]) return;
      const ids = s === "pre" ? (box.ops || []).map((o) => "op:" + o) : (box.kernels || []).flatMap((k) => ["k:" + k, "f:" + k]);
      const el = ids.map((i) => nodeOf(s, i)).find(Boolean);
      if (el && !panes[s].inView(el)) panes[s].center(el);
    });
  }
  function redraw(keepView) {
    SIDES.forEach((s) => draw(s, keepView));
    $("layersB").classList.toggle("on", variant.startsWith("layers"));
    $("mapB").classList.toggle("on", SIDES.some((s) => panes[s] && panes[s].mini && mapShown(panes[s].svg)));
    ["expand", "collapse", "layout"].forEach((b) => $(b).classList.toggle("on", { expand: "expanded", collapse: "collapsed", layout: "default" }[b] === variant));
    $("timeC").classList.toggle("on", colour === "time");
    $("memC").classList.toggle("on", colour === "memory");
    if (!keepView) openViews();
    askPresent();
    if (sel) { const s = sel; if (s.side === "line") selectLine(s.line, false); else select(s.side, s.id, false); }
    search($("q").value);
  }

  $("q").addEventListener("input", () => search($("q").value));
  $("q").addEventListener("keydown", (ev) => { if (ev.key === "Enter") { ev.preventDefault(); nextFound(ev.shiftKey ? -1 : 1); } });
  $("focus").addEventListener("change", applyFocus);
  $("expand").onclick = () => setVariant("expanded", false);
  $("collapse").onclick = () => setVariant("collapsed", false);
  $("layout").onclick = () => setVariant("default", false);
  $("layersB").onclick = () => setVariant(variant.startsWith("layers") ? "default" : "layers", false);
  $("fit").onclick = fitPanes;
  $("soloPre").onclick = () => setSolo("pre");
  $("soloPost").onclick = () => setSolo("post");
  $("soloBoth").onclick = () => setSolo("both");
  $("mapB").onclick = () => {
    const shown = SIDES.some((s) => panes[s] && panes[s].mini && mapShown(panes[s].svg));
    mapOn = !shown;
    SIDES.forEach((s) => { if (panes[s] && panes[s].mini) panes[s].mini.enable(mapOn); });
    $("mapB").classList.toggle("on", mapOn);
  };
  $("zin").onclick = () => SIDES.forEach((s) => panes[s] && panes[s].zoom(0.75));
  $("zout").onclick = () => SIDES.forEach((s) => panes[s] && panes[s].zoom(1 / 0.75));
  $("timeC").onclick = () => { colour = colour === "time" ? "route" : "time"; redraw(true); };
  $("memC").onclick = () => { colour = colour === "memory" ? "route" : "memory"; redraw(true); };
  // the panes get narrower with the source beside them: opened again at the legible scale
  // (keeping the view would shrink every label below it)
  $("srcB").onclick = () => { $("source").classList.toggle("shown"); $("srcB").classList.toggle("on"); redraw(false); };
  // opened or closed: the panes get narrower or wider, so opened again at the legible scale
  // (redrawn once the panes have their new size: the pane's size is read by a ResizeObserver, after layout)
  $("codeB").onclick = () => { openCode(!codeShown(), true); requestAnimationFrame(() => requestAnimationFrame(() => redraw(false))); };
  $("prevK").onclick = () => stepKernel(-1);
  $("nextK").onclick = () => stepKernel(1);
  // The keys work wherever the focus is: on the page around the frame too (same origin), but
  // never while typing in a text field there or here
  function typing(t) {
    return !!t && (t.tagName === "INPUT" || t.tagName === "TEXTAREA" || t.tagName === "SELECT" || t.isContentEditable);
  }
  function hookPageKeys() {
    try {
      const doc = window.parent.document;
      if (doc.__xeKeys) doc.removeEventListener("keydown", doc.__xeKeys, true);
      const mine = (ev) => {
        // a frame the page has dropped (another page, a rerun that replaced it) hears no more keys
        if (!window.frameElement || !window.frameElement.isConnected) { doc.removeEventListener("keydown", mine, true); return; }
        if (ev.ctrlKey || ev.metaKey || ev.altKey || typing(ev.target) || !A || document.body.classList.contains("single")) return;
        if (["]", "[", "w"].includes(ev.key)) onKey(ev);
      };
      doc.__xeKeys = mine;
      doc.addEventListener("keydown", mine, true);
    } catch (e) { /* not the same origin: the keys work with the focus in the graphs */ }
  }
  hookPageKeys();
  document.addEventListener("keydown", (ev) => onKey(ev));
  function onKey(ev) {
    if (typing(ev.target)) return;
    if (document.body.classList.contains("pair")) { if (ev.key === "Escape") pairSelect("pre", null, true); return; }
    if (ev.key === "]" || ev.key === "n") stepKernel(1);
    else if (ev.key === "[" || ev.key === "p") stepKernel(-1);
    else if (ev.key === "w") whyKey();
    else if (ev.key === "/") { ev.preventDefault(); $("q").focus(); }
    else if (ev.key === "Escape") select(null, null, true);
  }

  // ---------------------------------------------------------------- one graph (Compare, Pass pipeline)
  // The page draws the selection into the SVG; a click is reported as {id, n}. The view (zoom
  // and pan) is kept while ``view_key`` stays the same, so a click does not reset it.
  let singleView = null, singleSvg = null;
  function renderSingle(args) {
    document.body.classList.add("single");
    document.body.classList.toggle("present", !!args.present);
    ["pane-post", "details", "source"].forEach((id) => { $(id).style.display = "none"; });
    Array.from($("bar").children).forEach((e) => { if (!["fit", "zin", "zout"].includes(e.id)) e.style.display = "none"; });
    $("title-pre").textContent = args.title || "";
    const lg = $("legend-pre"); lg.innerHTML = "";
    (args.legend || []).forEach((it) => {
      lg.appendChild(legendItem(it));
    });
    const h = args.height || 600;
    singleMin = args.min_scale || 0.85;
    $("main").style.height = h + "px";
    if (args.svg !== singleSvg) {
      const keep = panes.pre && singleView && singleView[0] === args.view_key ? panes.pre.viewBox() : null;
      singleSvg = args.svg;
      const view = $("view-pre");
      view.innerHTML = args.svg || "<p style='padding:1em;color:#888'>nothing to draw</p>";
      const svg = view.querySelector("svg");
      panes.pre = svg ? XEGraph.pane(view, svg) : null;
      if (panes.pre) { panes.pre.mini = XEGraph.minimap(panes.pre, { enabled: mapShown(svg) }); partNote("pre"); }
      if (svg) {
        svg.querySelectorAll("g.node, g.cluster").forEach((g) => g.addEventListener("click", (ev) => {
          ev.stopPropagation();
          if (panes.pre.moved()) return;
          clicks += 1;
          send("streamlit:setComponentValue", { value: { id: g.id, n: clicks }, dataType: "json" });
        }));
        if (keep) panes.pre.setViewBox(keep);
        else panes.pre.open({ min: args.min_scale || 0.85, skip: (n) => /^(p|c):/.test(n.id) });
        svg.setAttribute("data-ready", "1");
      }
    }
    if (panes.pre && args.focus && (!singleView || singleView[1] !== args.focus)) {
      const el = nodeOf("pre", args.focus);
      if (el && !panes.pre.inView(el)) panes.pre.center(el);
    }
    singleView = [args.view_key, args.focus];
    send("streamlit:setFrameHeight", { height: h + $("bar").offsetHeight + 12 });
  }

  // ---------------------------------------------------------------- two graphs linked (Compare)
  // A on the left (pane "pre"), B on the right (pane "post"). args.related[side][kernel] = the
  // kernels of the other side doing that kernel's ops (analysis.program.links, by instruction), and
  // args.fused[side][kernel] = its fused instruction names. A click lights up both sides here,
  // at once, and then tells the server {sel: {side: "a"|"b", name}, n} for the panels and link.
  let pairKey = null, pairSel = null;
  let pairSized = "", pairObserver = null, pairTouched = false;
  const PAIR = { pre: "a", post: "b" }, PANE = { a: "pre", b: "post" };
  function pairKernel(side, id) {
    const kind = id.split(":")[0], name = id.slice(kind.length + 1);
    if (kind === "k" || kind === "f") return name;
    if (kind === "x") { const f = (A.fused || {})[PAIR[side]] || {}; for (const k in f) if (f[k].includes(name)) return k; }
    return null;
  }
  function pairSelect(side, name, fromClick) {
    clearMarks();
    pairSel = name ? { side: PAIR[side], name } : null;
    if (name) {
      const other = side === "pre" ? "post" : "pre";
      const ks = ((A.related || {})[PAIR[side]] || {})[name] || [];
      mark(side, ["k:" + name, "f:" + name], "me");
      const els = mark(other, ks.flatMap((k) => ["k:" + k, "f:" + k]), "hl");
      SIDES.forEach((s) => { if (panes[s]) panes[s].svg.classList.add("sel"); });
      if (panes[other] && els.length && !els.some((e) => panes[other].inView(e))) panes[other].center(els[0]);
      if (!fromClick && panes[side]) { const me = nodeOf(side, "k:" + name) || nodeOf(side, "f:" + name); if (me && !panes[side].inView(me)) panes[side].center(me); }
    }
    if (!fromClick) return;
    clicks += 1;
    // until the server has heard of this click, a render still carrying its older selection
    // (Streamlit may redraw the frame meanwhile) must not undo it
    sentByMe(JSON.stringify(pairSel || {}));
    send("streamlit:setComponentValue", { value: { sel: pairSel || {}, n: clicks }, dataType: "json" });
  }
  // the two graphs get the window's height (less the page's header and the sticky legend above
  // them), so scrolled to, they fill the screen
  function pairHeight(args) {
    let h = args.height || 620;
    try { h = Math.max(380, window.parent.innerHeight - 150 - $("bar").offsetHeight); } catch (e) { /* the height asked for */ }
    return h;
  }
  function renderPair(args) {
    document.body.classList.add("pair");
    document.body.classList.toggle("present", !!args.present);
    ["details", "source"].forEach((id) => { $(id).style.display = "none"; });
    Array.from($("bar").children).forEach((e) => { if (!["fit", "zin", "zout"].includes(e.id)) e.style.display = "none"; });
    const h = pairHeight(args);
    $("main").style.height = h + "px";
    if (args.data_key !== pairKey) {
      pairKey = args.data_key; A = args;
      SIDES.forEach((side) => {
        const g = args.pair[PAIR[side]] || {}, view = $("view-" + side);
        $("title-" + side).textContent = g.title || ""; $("title-" + side).title = g.title || "";
        const lg = $("legend-" + side); lg.innerHTML = "";
        (g.legend || []).forEach((it) => {
          lg.appendChild(legendItem(it));
        });
        view.innerHTML = g.svg || "";
        if (!g.svg) { view.appendChild(txt("p", g.missing || "nothing to draw")).style.cssText = "padding:1em;color:#888"; }
        const svg = view.querySelector("svg");
        panes[side] = svg ? XEGraph.pane(view, svg) : null;
        if (!svg) return;
        panes[side].mini = XEGraph.minimap(panes[side], { enabled: mapShown(svg) });
        partNote(side);
        svg.querySelectorAll("title").forEach((t) => { if (t.parentNode.classList.contains("graph")) t.remove(); });
        svg.querySelectorAll("g.node, g.cluster").forEach((n) => n.addEventListener("click", (ev) => {
          ev.stopPropagation();
          if (panes[side].moved()) return;
          const k = pairKernel(side, n.id);
          pairSelect(side, k && !(pairSel && pairSel.name === k && pairSel.side === PAIR[side]) ? k : null, true);
        }));
        svg.addEventListener("click", () => { if (!panes[side].moved()) pairSelect(side, null, true); });
      });
      openViews();
      SIDES.forEach((side) => { if (panes[side]) panes[side].svg.setAttribute("data-ready", "1"); });
      lastServerSel = null; ownSent = null;
      // Below the fold, the frame may be laid out only later (or at another size): open the
      // views again at their real size, until the user has zoomed, panned or clicked
      pairSized = SIDES.map((s) => { const v = $("view-" + s); return v.clientWidth + "x" + v.clientHeight; }).join(",");
      if (!pairObserver && window.ResizeObserver) {
        pairObserver = new ResizeObserver(() => {
          const now = SIDES.map((s) => { const v = $("view-" + s); return v.clientWidth + "x" + v.clientHeight; }).join(",");
          if (now === pairSized || pairTouched || !SIDES.some((s) => panes[s])) return;
          pairSized = now;
          openViews();
          if (pairSel) pairSelect(PANE[pairSel.side], pairSel.name, false);
        });
        SIDES.forEach((s) => pairObserver.observe($("view-" + s)));
        ["wheel", "mousedown", "touchstart"].forEach((ev) => $("main").addEventListener(ev, () => { pairTouched = true; }, { passive: true }));
        ["fit", "zin", "zout"].forEach((id) => $(id).addEventListener("click", () => { pairTouched = true; }));
      }
    }
    const want = JSON.stringify(args.selected || {});
    if (staleRender(want)) { /* our own click, or a render from before it */ }
    else if (want !== lastServerSel) {
      ownSent = null; lastServerSel = want;
      const s = args.selected || {};
      pairSelect(PANE[s.side] || "pre", s.name && PANE[s.side] ? s.name : null, false);
    }
    send("streamlit:setFrameHeight", { height: h + $("bar").offsetHeight + 12 });
    window.__xe_ready = Date.now();
  }

  // What is above the frame in the page can change height after the graphs are drawn (the run
  // that draws them first, its title and notices laid out after the frame has its data; a
  // notice that goes): the frame is refitted to the window below it, and the graphs opened
  // again at that size until the user has zoomed, panned or clicked in them.
  let placeWatch = null, viewTouched = false;
  function watchPlace() {
    if (placeWatch) return;
    try {
      const P = window.parent, doc = P.document;
      const block = doc.querySelector("[data-testid='stMainBlockContainer']") || doc.querySelector("[data-testid='stMain']");
      if (!block || !P.ResizeObserver) return;
      placeWatch = new P.ResizeObserver(() => {
        if (!A || document.body.classList.contains("pair")) return;
        const was = height;
        fitHeight();
        if (Math.abs(height - was) > 1 && !viewTouched) openViews();
      });
      placeWatch.observe(block);
      ["wheel", "mousedown", "touchstart", "keydown"].forEach((ev) => $("main").addEventListener(ev, () => { viewTouched = true; }, { passive: true }));
    } catch (e) { /* no access to the page: the height the server asked for */ }
  }

  // A session's first compile: the frame is made while the worker compiles, so that its page
  // and scripts are loaded when the graphs come (app/explorer.py); until then it holds their
  // place, the bar hidden, each pane saying what comes there.
  function renderWaiting(args) {
    if (A) return;  // (never over graphs drawn)
    window.__xe_waited = Date.now();  // (a test sees the graphs drawn in this same frame)
    document.body.classList.add("waiting");
    $("bar").style.visibility = "hidden";
    SIDES.forEach((s) => {
      const v = $("view-" + s);
      v.textContent = "";
      v.appendChild(txt("p", s === "pre" ? "The graph before optimization comes here once XLA has compiled."
        : "The optimized graph (its kernels) comes here once XLA has compiled.", "wait"));
    });
    $("details").textContent = "";
    $("details").appendChild(txt("p", HINT, "hint"));
    fitHeight(args.height);
  }
  function endWaiting() {
    if (!document.body.classList.contains("waiting")) return;
    document.body.classList.remove("waiting");
    $("bar").style.visibility = "";
    SIDES.forEach((s) => { $("view-" + s).textContent = ""; });
  }

  function render(args) {
    if (args.waiting) { renderWaiting(args); return; }
    endWaiting();
    if (args.single) { renderSingle(args); return; }
    if (args.pair) { renderPair(args); return; }
    const key = args.data_key;
    if (args.stub && (key !== dataKey || (args.rev !== rev && !args.graphs))) {
      // the server thinks this frame holds data it does not (a new frame): ask for all of it
      clicks += 1; rev = null;
      send("streamlit:setComponentValue", { value: { need: true, n: clicks }, dataType: "json" });
      return;
    }
    const first = key !== dataKey;
    rev = args.rev;
    if (first) {
      A = XEPayload.unpack(args); dataKey = key; whyIx = null; variant = A.open_variant || "default"; sel = null; lectureAt = -1; lastServerSel = null; ownSent = null; pending = null;
      $("layersB").style.display = A.layers ? "" : "none";
      document.body.classList.toggle("present", !!A.present);
      applySolo();
      $("timeC").style.display = A.timed ? "" : "none";
      $("memC").style.display = A.memfill && Object.keys(A.memfill).length ? "" : "none";
      if (A.show_source && !$("source").classList.contains("shown")) { $("source").classList.add("shown"); $("srcB").classList.add("on"); }
      if (A.show_code || codeShown()) openCode(true, !A.code);
      fitHeight();
      drawSource();
      redraw(false);
      showDetails(null);
      watchPlace();
    } else {
      A.height = args.height;
      if (!!args.present !== presenting()) {  // the Presentation toggle, on the data held
        A.present = !!args.present; document.body.classList.toggle("present", A.present); applySolo();
        if (!args.graphs) { fitHeight(); redraw(false); }
      }
      // views laid out since (asked for by setVariant): shown once they are here
      if (args.graphs) {
        const merged = XEPayload.mergeGraphs(A.graphs, args.graphs);
        if (merged === null) {  // the SVGs it builds on are not here: ask for all of it
          clicks += 1; rev = null;
          send("streamlit:setComponentValue", { value: { need: true, n: clicks }, dataType: "json" });
          return;
        }
        A.graphs = merged; A.lazy = args.lazy;
      }
      // a big program's full details of the nodes drawn since (or just selected), from a stub or
      // with the whole data again (a frame that has not told the server what it holds): shown at once
      if (args.code && typeof args.code === "object" && args.code.kernels_add) {  // a big compile's kernels' code
        if (A.code) codePane.addKernels(args.code.kernels_add, args.code.lazy);
      } else if (args.code && typeof args.code === "object") {  // the Code pane's data, asked for when it opened
        A.code = args.code; codePane.setData(A.code); followCode(sel && sel.side, sel && sel.id, sel);
      }
      const add = args.stub ? args.details_add : args.details;
      if (add && typeof add === "object") {
        Object.assign(A.details, add);
        if (sel && sel.id && add[sel.id]) showDetails(sel);
      }
      if (pending && laidOut(pending.name)) { const p = pending; setVariant(p.name, p.keepView, p.then); }
      else if (args.graphs && SIDES.some((s) => A.graphs[s] && drawnAt[s] !== svgIndex(A.graphs[s]))) redraw(false);  // a projector's drawing came
    }
    // a selection the server asks for (a link, a table row): applied when it changes
    const want = JSON.stringify(args.selected || {});
    if (staleRender(want)) { /* our own click, or a render from before it */ }
    else if (want !== lastServerSel) {
      ownSent = null; lastServerSel = want;
      const s = args.selected || {};
      if (s.line) selectLine(s.line, false);
      else if (s.name) select(s.side, (s.side === "pre" ? "op:" : "k:") + s.name, false);
      else if (!first) select(null, null, false);
    }
    if (first) {
      window.__xe_ready = Date.now();
      // the page waits for this to draw what is below the graphs (app/explorer.py)
      if (args.tell_drawn) { clicks += 1; tellServer({ drawn: true, n: clicks }); }
    }
  }

  // Renders are taken in order, each after the one before it is unpacked (payload.js)
  let renders = Promise.resolve();
  window.addEventListener("message", (ev) => {
    if (!(ev.data && ev.data.type === "streamlit:render")) return;
    const a = ev.data.args || {};
    renders = renders.then(() => XEPayload.args(a, dataKey, rev)).then(render).catch((e) => {
      SIDES.forEach((s) => { const v = $("view-" + s); if (v && !A) v.textContent = "The graphs could not be unpacked in this browser: " + e; });
    });
  });
  setInterval(() => { if (A) XEEditor.hook(); }, 1500);  // editor_hooks.js
  window.addEventListener("resize", () => {
    if (!A) return;
    if (!document.body.classList.contains("pair")) { fitHeight(); return; }
    const h = pairHeight(A);
    $("main").style.height = h + "px";
    send("streamlit:setFrameHeight", { height: h + $("bar").offsetHeight + 12 });
  });
  send("streamlit:componentReady", { apiVersion: 1 });
})();

