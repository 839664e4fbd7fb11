/* Pan and zoom for a Graphviz SVG, shared by the app's graph component and the HTML report.
 *
 *   const pane = XEGraph.pane(view, svg);   // view: the element the SVG fills
 *   pane.open({scale, min, max});           // the opening view (see below)
 *   pane.zoom(f), pane.fitAll(), pane.center(el), pane.show(els), pane.scale(), pane.moved()
 *   pane.inView(el), pane.whole()           // an element whole in the view; the whole drawing
 *   const mini = XEGraph.minimap(pane);      // an overview in the pane's corner; mini.refresh()
 *
 * Coordinates: the SVG's viewBox is in points (Graphviz user units); ``scale()`` is how many
 * screen pixels one point takes now, so a label of F points is F * scale() pixels tall.
 * Nothing here knows about kernels or ops: the callers decide what a click means. */
(function (root) {
  "use strict";

  function pane(view, svg, opts) {
    opts = opts || {};
    const t = svg.getAttribute("viewBox");
    const full = t ? t.split(/[\s,]+/).map(Number) : [0, 0, 800, 600];
    svg.removeAttribute("width");
    svg.removeAttribute("height");
    svg.setAttribute("preserveAspectRatio", "xMidYMid meet");
    svg.style.width = "100%";
    svg.style.height = "100%";
    svg.style.display = "block";
    let vb = full.slice(), drag = null, moved = false;
    const listeners = [];

    // The pane's size, read when it changes (a ResizeObserver), not on every call: reading
    // clientWidth right after a click changed classes forces the browser to lay out the whole
    // page first (190 ms a click on a 6,000-node graph)
    let wh = null;
    function measure() { wh = [Math.max(view.clientWidth, 1), Math.max(view.clientHeight, 1)]; }
    if (typeof ResizeObserver === "function") new ResizeObserver(measure).observe(view);
    function size() { if (!wh || typeof ResizeObserver !== "function") measure(); return wh; }
    function setVB(v) { vb = v; svg.setAttribute("viewBox", v.join(" ")); listeners.forEach((f) => f(vb)); }
    function scale() { const [W, H] = size(); return Math.min(W / vb[2], H / vb[3]); }
    function fitScale() { const [W, H] = size(); return Math.min(W / full[2], H / full[3]); }
    function at(s, cx, cy) {  // a view at ``s`` pixels per point centred on (cx, cy)
      const [W, H] = size();
      setVB([cx - W / s / 2, cy - H / s / 2, W / s, H / s]);
    }
    // "Fit": the whole drawing (Graphviz's canvas is the box of its nodes, clusters and edge
    // labels); zooming in from there goes to nodes (``anchor``), and the minimap shows where
    function fitAll() { at(fitScale(), full[0] + full[2] / 2, full[1] + full[3] / 2); }
    // what the pane really shows (the viewBox is fitted into the pane with its aspect kept)
    function visible() {
      const [W, H] = size(), s = scale();
      return [vb[0] + (vb[2] - W / s) / 2, vb[1] + (vb[3] - H / s) / 2, W / s, H / s];
    }
    let centres = null;  // node centres, measured once per drawing (the SVG does not move)
    function nodeCentres() {
      if (!centres) centres = Array.from(svg.querySelectorAll("g.node")).map((n) => centreOf(n));
      return centres;
    }
    // the node to zoom about: the one nearest the middle of the view, so zooming in from a view
    // of a long diagonal graph lands on nodes, not on the empty canvas beside them
    function anchor() {
      const v = visible(), cx = v[0] + v[2] / 2, cy = v[1] + v[3] / 2;
      let best = null, d = Infinity;
      nodeCentres().forEach((c) => { const e = (c.x - cx) ** 2 + (c.y - cy) ** 2; if (e < d) { d = e; best = c; } });
      return best;
    }

    // node centres in viewBox space (g.graph carries Graphviz's translate), measured once per
    // element: the drawing does not move, and getBBox after a class change forces a layout
    const centreCache = new WeakMap();
    let graphMatrix;
    function centreOf(el) {
      let got = centreCache.get(el);
      if (got) return got;
      if (graphMatrix === undefined) {
        const g = svg.querySelector("g.graph"), c = g && g.transform.baseVal.consolidate();
        graphMatrix = c ? c.matrix : null;
      }
      const bb = el.getBBox();
      const p = svg.createSVGPoint();
      p.x = bb.x + bb.width / 2; p.y = bb.y + bb.height / 2;
      const q = graphMatrix ? p.matrixTransform(graphMatrix) : p;
      got = { x: q.x, y: q.y, w: bb.width, h: bb.height };
      centreCache.set(el, got);
      return got;
    }
    function boxOf(els) {
      let x0 = Infinity, y0 = Infinity, x1 = -Infinity, y1 = -Infinity;
      els.forEach((el) => {
        const c = centreOf(el);
        x0 = Math.min(x0, c.x - c.w / 2); x1 = Math.max(x1, c.x + c.w / 2);
        y0 = Math.min(y0, c.y - c.h / 2); y1 = Math.max(y1, c.y + c.h / 2);
      });
      return isFinite(x0) ? [x0, y0, x1 - x0, y1 - y0] : null;
    }

    /* The opening view: at ``o.scale`` pixels per point when given (so two panes open at the
     * same scale), else the whole graph fitted, but never below ``o.min`` (labels stay legible)
     * nor above ``o.max``. What does not fit at that scale shows its top, centred on where
     * most ops and kernels are (inputs and wide edges would pull a plain centre off them). */
    function open(o) {
      o = o || {};
      let s = o.scale || fitScale();
      if (o.min) s = Math.max(s, o.min);
      if (o.max) s = Math.min(s, o.max);
      const [W, H] = size(), w = W / s, h = H / s;
      if (w >= full[2] - 0.5 && h >= full[3] - 0.5) { at(s, full[0] + full[2] / 2, full[1] + full[3] / 2); return s; }
      const xs = [];
      svg.querySelectorAll("g.node").forEach((n) => {
        if (o.skip && o.skip(n)) return;
        const c = centreOf(n);
        if (c.y < full[1] + h) xs.push(c.x);
      });
      xs.sort((a, b) => a - b);
      let cx = xs.length ? xs[Math.floor(xs.length / 2)] : full[0] + full[2] / 2;
      if (w >= full[2]) cx = full[0] + full[2] / 2;
      else cx = Math.min(Math.max(cx, full[0] + w / 2), full[0] + full[2] - w / 2);
      const cy = h >= full[3] ? full[1] + full[3] / 2 : full[1] + h / 2;
      at(s, cx, cy);
      return s;
    }
    function zoom(f, cx, cy) {
      if (cx === undefined) {
        const a = f < 1 ? anchor() : null;
        if (a) setVB([a.x - vb[2] / 2, a.y - vb[3] / 2, vb[2], vb[3]]);
        cx = vb[0] + vb[2] / 2; cy = vb[1] + vb[3] / 2;
      }
      setVB([cx - (cx - vb[0]) * f, cy - (cy - vb[1]) * f, vb[2] * f, vb[3] * f]);
    }
    function center(el) { const c = centreOf(el); setVB([c.x - vb[2] / 2, c.y - vb[3] / 2, vb[2], vb[3]]); }
    function show(els, minScale) {  // every element in view, zooming out only as far as needed
      const b = boxOf(els);
      if (!b) return;
      const [W, H] = size();
      let s = Math.min(scale(), W / (b[2] * 1.15 + 1), H / (b[3] * 1.15 + 1));
      if (minScale) s = Math.max(s, minScale);
      at(s, b[0] + b[2] / 2, b[1] + b[3] / 2);
    }
    // the element whole in the view (its centre, for one bigger than the view): a node cut at
    // the pane's edge is not "in view", and is brought into it
    function inView(el) {
      const c = centreOf(el), v = visible();
      const w = c.w < v[2] ? c.w / 2 : 0, h = c.h < v[3] ? c.h / 2 : 0;
      return c.x - w >= v[0] && c.x + w <= v[0] + v[2] && c.y - h >= v[1] && c.y + h <= v[1] + v[3];
    }
    // the whole drawing in view
    function whole() {
      const v = visible();
      return v[0] <= full[0] + 1 && v[1] <= full[1] + 1 && v[0] + v[2] >= full[0] + full[2] - 1
        && v[1] + v[3] >= full[1] + full[3] - 1;
    }
    function toSvg(ev) {
      const r = view.getBoundingClientRect(), s = scale(), [W, H] = size();
      const ox = vb[0] + (vb[2] - W / s) / 2, oy = vb[1] + (vb[3] - H / s) / 2;
      return [ox + (ev.clientX - r.left) / s, oy + (ev.clientY - r.top) / s];
    }

    view.addEventListener("wheel", (ev) => {
      ev.preventDefault();
      const p = toSvg(ev);
      zoom(ev.deltaY > 0 ? 1.15 : 1 / 1.15, p[0], p[1]);
    }, { passive: false });
    view.addEventListener("pointerdown", (ev) => {
      if (ev.button !== 0) return;
      drag = [ev.clientX, ev.clientY, vb.slice()]; moved = false;
      view.classList.add("drag");
    });
    window.addEventListener("pointermove", (ev) => {
      if (!drag) return;
      const dx = ev.clientX - drag[0], dy = ev.clientY - drag[1];
      if (Math.abs(dx) + Math.abs(dy) > 3) moved = true;
      if (!moved) return;
      const s = scale();
      setVB([drag[2][0] - dx / s, drag[2][1] - dy / s, drag[2][2], drag[2][3]]);
    });
    window.addEventListener("pointerup", () => { drag = null; view.classList.remove("drag"); });

    return {
      svg, view, full, open, fitAll, zoom, center, show, scale, fitScale, inView, whole, centreOf, visible,
      moved: () => moved,
      viewBox: () => vb.slice(),
      setViewBox: (v) => setVB(v.slice()),
      onChange: (f) => listeners.push(f),
    };
  }

  /* An overview of the whole graph in the pane's bottom-right corner: every node a small box
   * (selected and linked ones orange, search hits blue), the part in view outlined; a click or
   * drag there moves the view. Hidden while the whole graph is in view, and while off
   * (``mini.enable(false)``; it covers the corner of the graph). */
  function minimap(p, opts) {
    opts = opts || {};
    let enabled = opts.enabled !== false;
    const MAXW = opts.width || 170, MAXH = opts.height || 130;
    const cv = document.createElement("canvas");
    cv.className = "xe-mini";
    cv.title = "Overview: click or drag to move the view";
    cv.style.cssText = "position:absolute; right:6px; bottom:6px; border:1px solid #bbb; border-radius:4px;"
      + "background:rgba(255,255,255,0.93); cursor:crosshair; box-shadow:0 1px 3px rgba(0,0,0,0.15);";
    p.view.appendChild(cv);
    // one scale for both axes, except that a very tall (or wide) graph is stretched to at least
    // 44 px across: a 140-op chain is 60 times taller than wide, and would be a hairline
    const f = p.full, k = Math.min(MAXW / f[2], MAXH / f[3]);
    const w = Math.max(44, Math.round(f[2] * k)), h = Math.max(44, Math.round(f[3] * k));
    const kx = w / f[2], ky = h / f[3];
    const dpr = window.devicePixelRatio || 1;
    cv.width = w * dpr; cv.height = h * dpr; cv.style.width = w + "px"; cv.style.height = h + "px";
    const ctx = cv.getContext("2d");
    let boxes = null, queued = false, drag = false;
    function paint() {
      queued = false;
      if (!boxes) boxes = Array.from(p.svg.querySelectorAll("g.node")).map((n) => [p.centreOf(n), n]);
      const v = p.visible();
      const whole = v[0] <= f[0] + 1 && v[1] <= f[1] + 1 && v[0] + v[2] >= f[0] + f[2] - 1 && v[1] + v[3] >= f[1] + f[3] - 1;
      cv.style.display = whole || !enabled ? "none" : "";
      if (whole || !enabled) return;
      ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
      ctx.clearRect(0, 0, w, h);
      const lit = [];
      boxes.forEach(([c, n]) => {
        const cl = n.classList, x = (c.x - c.w / 2 - f[0]) * kx, y = (c.y - c.h / 2 - f[1]) * ky;
        const r = [x, y, Math.max(1.5, c.w * kx), Math.max(1.5, c.h * ky)];
        if (cl.contains("hl") || cl.contains("me")) lit.push([r, "#FF7F0E"]);
        else if (cl.contains("found")) lit.push([r, "#1565C0"]);
        else { ctx.fillStyle = "#A7B1BC"; ctx.fillRect(r[0], r[1], r[2], r[3]); }
      });
      lit.forEach(([r, col]) => { ctx.fillStyle = col; ctx.fillRect(r[0] - 1, r[1] - 1, r[2] + 2, r[3] + 2); });
      ctx.strokeStyle = "#D62728"; ctx.lineWidth = 1.5;
      ctx.strokeRect((v[0] - f[0]) * kx, (v[1] - f[1]) * ky, Math.max(3, v[2] * kx), Math.max(3, v[3] * ky));
    }
    function refresh() { if (!queued) { queued = true; requestAnimationFrame(paint); } }
    function move(ev) {
      const r = cv.getBoundingClientRect(), vb = p.viewBox();
      const x = f[0] + (ev.clientX - r.left) / kx, y = f[1] + (ev.clientY - r.top) / ky;
      p.setViewBox([x - vb[2] / 2, y - vb[3] / 2, vb[2], vb[3]]);
    }
    cv.addEventListener("pointerdown", (ev) => {
      ev.stopPropagation(); ev.preventDefault(); drag = true; move(ev);
      if (cv.setPointerCapture) try { cv.setPointerCapture(ev.pointerId); } catch (e) { /* a synthetic event */ }
    });
    cv.addEventListener("pointermove", (ev) => { if (drag) move(ev); });
    cv.addEventListener("pointerup", () => { drag = false; });
    cv.addEventListener("click", (ev) => ev.stopPropagation());
    p.onChange(refresh);
    refresh();
    return { canvas: cv, refresh: refresh, enable: (on) => { enabled = !!on; refresh(); }, nodes: () => p.svg.querySelectorAll("g.node").length };
  }

  root.XEGraph = { pane: pane, minimap: minimap };
})(typeof window !== "undefined" ? window : this);
