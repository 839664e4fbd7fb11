/* Pan and zoom for a Graphviz SVG, shared by the app's graph component and the HTML report.
 *
 *   const pane = XEGraph.pane(view, svg);   // view: the element the SVG fills
 *   pane.open({scale, min, max});           // the opening view (see below)
 *   pane.zoom(f), pane.fitAll(), pane.center(el), pane.show(els), pane.scale(), pane.moved()
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

    function size() { return [Math.max(view.clientWidth, 1), Math.max(view.clientHeight, 1)]; }
    function setVB(v) { vb = v; svg.setAttribute("viewBox", v.join(" ")); listeners.forEach((f) => f(vb)); }
    function scale() { const [W, H] = size(); return Math.min(W / vb[2], H / vb[3]); }
    function fitScale() { const [W, H] = size(); return Math.min(W / full[2], H / full[3]); }
    function at(s, cx, cy) {  // a view at ``s`` pixels per point centred on (cx, cy)
      const [W, H] = size();
      setVB([cx - W / s / 2, cy - H / s / 2, W / s, H / s]);
    }
    function fitAll() { at(fitScale(), full[0] + full[2] / 2, full[1] + full[3] / 2); }

    // node centres in viewBox space (g.graph carries Graphviz's translate)
    function centreOf(el) {
      const bb = el.getBBox(), g = svg.querySelector("g.graph");
      const c = g && g.transform.baseVal.consolidate();
      const p = svg.createSVGPoint();
      p.x = bb.x + bb.width / 2; p.y = bb.y + bb.height / 2;
      const q = c ? p.matrixTransform(c.matrix) : p;
      return { x: q.x, y: q.y, w: bb.width, h: bb.height };
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
      if (cx === undefined) { cx = vb[0] + vb[2] / 2; cy = vb[1] + vb[3] / 2; }
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
    function inView(el) {
      const c = centreOf(el);
      return c.x > vb[0] && c.x < vb[0] + vb[2] && c.y > vb[1] && c.y < vb[1] + vb[3];
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
      svg, view, full, open, fitAll, zoom, center, show, scale, fitScale, inView, centreOf,
      moved: () => moved,
      viewBox: () => vb.slice(),
      setViewBox: (v) => setVB(v.slice()),
      onChange: (f) => listeners.push(f),
    };
  }

  root.XEGraph = { pane: pane };
})(typeof window !== "undefined" ? window : this);
