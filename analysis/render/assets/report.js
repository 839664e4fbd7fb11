/* The HTML report's own script (analysis/render/report.py): pan and zoom of each graph view
 * (assets/graph.js), a click selects and lights up what is linked on the other side and in the
 * kernel table, the downloads. ``window.XEReport`` is what the page's other parts use
 * (report_layers.js: a big program's layers; report_code.js: the generated code). */
(function () {
  "use strict";
  const links = JSON.parse(document.getElementById("xe-links").textContent || "{}");
  const PX = 96 / 72;
  function save(name, mime, text) {
    const a = document.createElement("a");
    a.href = URL.createObjectURL(new Blob([text], { type: mime }));
    a.download = name; document.body.appendChild(a); a.click();
    setTimeout(() => { URL.revokeObjectURL(a.href); a.remove(); }, 500);
  }
  // a deflated script's text (report.py's ``deflated``: the DOT texts, the bundle's JSON)
  const inflated = (id) => XEHelpers.inflate(document.getElementById(id).textContent.trim());
  const panes = {};  // each side's view shown (a big program's layer opened replaces it: report_layers)
  function wire(view) {
    const svg = view.querySelector("svg");
    const prefix = view.dataset.prefix;
    if (!svg) return null;
    const pane = XEGraph.pane(view, svg);  // pan and zoom: assets/graph.js, shared with the app
    // the overview in the corner, for a big graph bigger than the view
    XEGraph.minimap(pane, { enabled: svg.querySelectorAll("g.node").length > 150 });
    // legible: the whole graph if it fits so, else its top at 75 %, centred on ops and kernels
    const skip = (n) => !/^(k|x|op):/.test(n.id.slice(prefix.length + 1));
    // (a layer's own graph, often small, no bigger than 1.25 times its natural size)
    const most = view.classList.contains("layer-view") ? 1.25 * PX : undefined;
    const initial = () => pane.open({ min: 0.75 * PX, max: most, skip: skip });
    const fitAll = pane.fitAll, center = pane.center;
    const zoomBy = (f) => pane.zoom(f);
    view.addEventListener("click", (ev) => {
      if (pane.moved()) return;
      const g = ev.target.closest("g.node, g.cluster");
      if (!g) return;
      const id = g.id.slice(prefix.length + 1);
      select(prefix, id);
    });
    initial();
    window.addEventListener("resize", () => { if (panes[prefix] && panes[prefix].view === view) initial(); });
    return { svg, center, initial, view, fitAll, zoomBy };
  }
  document.querySelectorAll(".view").forEach((view) => {
    const prefix = view.dataset.prefix, first = wire(view);
    if (!first) return;
    panes[prefix] = first;
    // the pane's tools act on the view it shows
    view.closest(".pane").querySelectorAll(".tools button").forEach((b) => b.addEventListener("click", () => {
      const act = b.dataset.act, p = panes[prefix];
      if (act === "fit") p.fitAll();
      else if (act === "in") p.zoomBy(1 / 1.3);
      else if (act === "out") p.zoomBy(1.3);
      else if (act === "svg") save(prefix + ".svg", "image/svg+xml", new XMLSerializer().serializeToString(p.svg));
      else if (act === "dot") inflated(b.dataset.src).then((t) => save(prefix + ".dot", "text/vnd.graphviz", t));
    }));
  });
  // what the page's other parts use (report_layers, report_code): ``inflate`` a deflated JSON
  // script (base64 of zlib, helpers.js)
  const api = { panes, wire, boxOf: null, onSelect: [], select: (side, nid) => select(side, nid), selectOp,
    inflate: (el) => XEHelpers.inflate(el.textContent.trim()).then(JSON.parse) };
  window.XEReport = api;
  // instructions of the optimized module (a code line's, report_code.js) lit, else their
  // kernel; before optimization the ops of their names and those they stand for (``pre``)
  function selectOp(names, kernel, pre) {
    clear();
    const f = mark("post", names.flatMap((n) => ["x:" + n, "k:" + n])) || mark("post", ["k:" + kernel, "f:" + kernel]);
    if (f && panes.post) panes.post.center(f);
    const p = mark("pre", [...new Set(names.concat(pre || []))].map((n) => "op:" + n));
    if (p && panes.pre) panes.pre.center(p);
  }
  function el(prefix, id) {  // in the view shown
    const p = panes[prefix];
    return p ? p.svg.querySelector('[id="' + CSS.escape(prefix + "-" + id) + '"]') : null;
  }
  function clear() { document.querySelectorAll(".xe-hl").forEach((e) => e.classList.remove("xe-hl")); }
  function mark(prefix, ids) {
    let first = null;
    ids.forEach((id) => {
      let e = el(prefix, id);
      const box = !e && api.boxOf ? api.boxOf(prefix, id) : null;  // in a layer's box, collapsed
      if (box) e = el(prefix, box);
      if (e) { e.classList.add("xe-hl"); first = first || e; }
    });
    return first;
  }
  function select(side, nid) {
    clear();
    const kind = nid.split(":")[0], name = nid.slice(kind.length + 1);
    let kernel = null, pre = [];
    if (side === "post") {
      kernel = (kind === "k" || kind === "f") ? name : null;
      if (kind === "x") for (const k in links.fused) if (links.fused[k].includes(name)) kernel = k;
      if (kernel) pre = links.k2pre[kernel] || [];
    } else if (kind === "op") {
      pre = [name]; const ks = links.pre2k[name] || []; kernel = ks[0] || null;
      mark("post", ks.flatMap((k) => ["k:" + k, "f:" + k]));
    }
    mark(side, [nid]);
    if (kind === "L") mark(side === "pre" ? "post" : "pre", [nid]);  // a layer's box: the same layer on the other side
    if (kernel) {
      const f = mark("post", ["k:" + kernel, "f:" + kernel]);
      if (side !== "post" && f && panes.post) panes.post.center(f);
      const row = document.getElementById("kernel-" + kernel);
      if (row) row.classList.add("xe-hl");
      // its bars, boxes and points in the charts (analysis/render/chart_svg.py)
      document.querySelectorAll('.xe-chart [data-kernel="' + CSS.escape(kernel) + '"]').forEach((e) => e.classList.add("xe-hl"));
    }
    const p = mark("pre", pre.map((n) => "op:" + n));
    if (side !== "pre" && p && panes.pre) panes.pre.center(p);
    api.onSelect.forEach((f) => f(side, nid, kernel));
  }
  document.querySelectorAll("a.kname").forEach((a) => a.addEventListener("click", () => {
    setTimeout(() => { select("post", "k:" + a.dataset.node); const f = el("post", "k:" + a.dataset.node) || el("post", "f:" + a.dataset.node); if (f && panes.post) panes.post.center(f); }, 0);
  }));
  // a chart's mark that stands for a kernel selects it, as its name in the table does
  document.querySelectorAll("svg.xe-chart").forEach((c) => c.addEventListener("click", (ev) => {
    const m = ev.target.closest("[data-kernel]");
    if (!m) return;
    select("post", "k:" + m.dataset.kernel);
    const f = el("post", "k:" + m.dataset.kernel) || el("post", "f:" + m.dataset.kernel);
    if (f && panes.post) panes.post.center(f);
  }));
  const dl = document.getElementById("dl-bundle");
  if (dl) dl.addEventListener("click", () => {
    const s = document.getElementById("xe-bundle");
    inflated("xe-bundle").then((t) => save(s.dataset.name, "application/json", t));
  });
})();
