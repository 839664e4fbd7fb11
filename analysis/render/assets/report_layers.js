/* A big program's layers in the HTML report (analysis/render/report_layers.py): opening a layer
 * in the page clones its template (one SVG per distinct layout) and writes its names in, as
 * text, never as markup (names come from the user's program). Uses the report's script
 * (report.js's XEReport: wire a view, the panes, select, mark) and graph.js. */
(function () {
  "use strict";
  const src = document.getElementById("xe-layers");
  if (!src || !window.XEReport) return;
  window.XEReport.inflate(src).then(start)
    .catch((e) => { document.querySelectorAll(".layerbar").forEach((b) => { b.append(" The layers could not be read: " + e); }); });
  function start(data) {
  const R = window.XEReport;
  const XL = "http://www.w3.org/1999/xlink";
  const base = {}, titles = {};
  ["pre", "post"].forEach((side) => {
    const v = document.querySelector("#graph-" + side + " .view[data-layers]");
    if (v && R.panes[side]) { base[side] = R.panes[side]; titles[side] = v.closest(".pane").querySelector(".subtitle").textContent; }
  });
  let open = null;
  // a node not drawn in the view shown is found in the box that holds it
  R.boxOf = (side, id) => {
    const kind = id.split(":")[0], name = id.slice(kind.length + 1);
    const m = side === "pre" ? data.op_box : data.kernel_box;
    return (kind === "op" || kind === "k" || kind === "f") ? (m[name] || null) : null;
  };
  function build(side, lid) {
    const d = data.sides[side], v = d && d.views[lid];
    if (!v) return null;
    const view = document.createElement("div");
    view.className = "view layer-view";
    view.dataset.prefix = side;
    const tpl = d.templates[v[0]];
    if (!tpl.startsWith("<svg")) {  // Graphviz could not lay it out: its reason, as text
      const p = document.createElement("pre"); p.className = "err";
      p.textContent = new DOMParser().parseFromString(tpl, "text/html").body.textContent;
      view.appendChild(p);
      return view;
    }
    const svg = document.importNode(new DOMParser().parseFromString(tpl, "image/svg+xml").documentElement, true);
    const at = {};
    svg.querySelectorAll("g.node, g.cluster").forEach((g) => { at[g.id] = g; });
    const names = v[1];
    names.ids.forEach((real, i) => {
      const g = at[i < names.nodes ? "n" + i : "c" + (i - names.nodes)];
      if (!g) return;
      g.id = side + "-" + real;
      const t = g.querySelector("title");
      if (t) t.textContent = real;
      g.querySelectorAll("a").forEach((a) => a.setAttributeNS(XL, "title", names.tips[i]));
      g.querySelectorAll("g[id]").forEach((a) => { a.id = side + "-a_" + real; });
      const texts = g.querySelectorAll("text"), lines = names.lines[i];
      if (texts.length === lines.length) texts.forEach((x, j) => { x.textContent = lines[j]; });
    });
    svg.querySelectorAll("g.edge > title").forEach((t) => { t.textContent = ""; });
    view.appendChild(svg);
    return view;
  }
  function show(lid) {
    ["pre", "post"].forEach((side) => {
      const b = base[side];
      if (!b) return;
      const pane = b.view.closest(".pane");
      pane.querySelectorAll(".layer-view").forEach((x) => x.remove());
      const view = lid ? build(side, lid) : null;
      const sub = pane.querySelector(".subtitle");
      if (view) {
        b.view.style.display = "none";
        b.view.after(view);
        R.panes[side] = R.wire(view);
        sub.textContent = data.sides[side].views[lid][2];
      } else {
        b.view.style.display = "";
        R.panes[side] = b;
        sub.textContent = titles[side];
      }
    });
    open = lid || null;
    const sel = document.getElementById("xe-layer");
    if (sel) sel.value = open || "";
    const back = document.getElementById("xe-all-layers");
    if (back) back.disabled = !open;
  }
  R.openLayer = show;
  document.querySelectorAll("#graphs .pane").forEach((pane) => pane.addEventListener("dblclick", (ev) => {
    const g = ev.target.closest("g.node");
    const side = pane.id.replace("graph-", "");
    if (!g || !g.id.startsWith(side + "-L:")) return;
    const lid = g.id.slice(side.length + 1);
    if (lid in data.names && lid !== open) show(lid);
  }));
  const sel = document.getElementById("xe-layer");
  if (sel) sel.addEventListener("change", () => show(sel.value));
  const back = document.getElementById("xe-all-layers");
  if (back) back.addEventListener("click", () => show(null));
  // a kernel picked in the table: its layer opened first, then it is selected (the report's own handler)
  document.querySelectorAll("a.kname").forEach((a) => a.addEventListener("click", () => {
    const lid = data.kernel_box[a.dataset.node];
    if (lid && lid !== open) show(lid);
  }));
  document.body.dataset.layers = "ready";  // for a test: the layers can be opened
  }
})();
