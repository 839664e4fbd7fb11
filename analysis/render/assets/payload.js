/* The explorer component's payload as the server sends it (app.graph_payload), made whole in
 * the browser (graph_view.js holds what comes out):
 *
 *   XEPayload.args(a, dataKey, rev)  // a promise of the render's args, ``z`` (deflated) inflated
 *   XEPayload.unpack(a)              // a big program's ``packed`` JSON text spread into the args
 *   XEPayload.mergeGraphs(held, g)   // views laid out since, after the SVGs already held
 *
 * A big payload comes deflated (``z``: base64 of deflated JSON, app.graph_payload.packed_args)
 * and is inflated off the page's thread until the parse. A big program's links, layer maps and
 * light details come as one JSON text (the server holds them so in a fraction of the memory);
 * what the server leaves out of it is made here: the op -> kernels links (the inverse of
 * kernel -> ops, in the same order), the op -> box map (each top box's ops, in box order) and
 * the light details, sent by column (analysis.render.details.pack_light). */
(function (root) {
  "use strict";
  const SIDES = ["pre", "post"];

  // the full details sent beside the packed text win over the light ones
  function unpack(a) {
    if (typeof a.packed !== "string") return a;
    const p = JSON.parse(a.packed);
    const links = p.links || {}, layers = p.layers || null;
    if (!links.pre2k) {
      const pre2k = {};
      for (const k in links.k2pre || {}) for (const op of links.k2pre[k]) (pre2k[op] || (pre2k[op] = [])).push(k);
      links.pre2k = pre2k;
    }
    if (layers && !layers.op_box) {
      const opBox = {};
      for (const lid of layers.order || []) for (const op of ((layers.boxes || {})[lid] || {}).ops || []) opBox[op] = lid;
      layers.op_box = opBox;
    }
    a.links = links; a.layers = layers;
    a.details = Object.assign(p.light ? unpackLight(p.light) : (p.details || {}), a.details || {});
    delete a.packed;
    return a;
  }
  function unpackLight(pk) {  // the light details by column (analysis.columns' form) as objects
    if (pk.rows) return pk.rows;
    const out = {}, ids = pk.ids || [], cols = (pk.columns || {}).columns || {};
    const fields = Object.keys(cols).map((f) => [f, cols[f]]);
    for (let i = 0; i < ids.length; i++) {
      const id = ids[i], d = { name: id.slice(id.indexOf(":") + 1), light: true };
      for (const [f, c] of fields) {
        if (Array.isArray(c)) d[f] = c[i];
        else { const j = c.codes[i]; if (j >= 0) d[f] = c.values[j]; }
      }
      if (d.tail !== undefined) { d.title = d.name + d.tail; delete d.tail; }
      out[id] = d;
    }
    return out;
  }
  // graphs from the server: a side that says ``svgs_from: k`` sends only the SVGs after the k
  // this frame said it holds (``held``: the graphs it holds); null when this frame holds fewer
  // (it asks for everything)
  function mergeGraphs(held, graphs) {
    const out = {};
    for (const s of SIDES) {
      const g = graphs[s];
      if (!g || g.svgs_from === undefined) { out[s] = g; continue; }
      const had = (held && held[s] && held[s].svgs) || [];
      if (had.length < g.svgs_from) return null;
      out[s] = Object.assign({}, g, { svgs: had.slice(0, g.svgs_from).concat(g.svgs) });
      delete out[s].svgs_from;
    }
    return out;
  }
  // ``dataKey`` and ``rev``: the data the frame holds; a render of it again is not inflated twice
  async function args(a, dataKey, rev) {
    if (a.code && typeof a.code.z === "string") {  // the Code pane's, on its own
      a = Object.assign({}, a, { code: JSON.parse(await XEHelpers.inflate(a.code.z)) });
    }
    if (typeof a.z !== "string") return a;
    if (a.data_key === dataKey && a.rev === rev) {  // the data held already (Streamlit renders again)
      const same = Object.assign({}, a);
      delete same.z;
      return same;
    }
    const out = Object.assign({}, a, JSON.parse(await XEHelpers.inflate(a.z)));
    delete out.z;
    return out;
  }

  root.XEPayload = { args, unpack, mergeGraphs };
})(window);
