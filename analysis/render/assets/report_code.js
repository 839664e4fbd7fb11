/* The report's Code section (analysis/render/report_code.py): the Code pane of the app's graphs
 * (code_pane.js) over the report's code data, linked with the report's graphs (report.js's
 * XEReport): a kernel selected in the graphs (or picked in the section's list) shows its code
 * and marks the lines linked to the instruction selected; a marked line clicked lights its
 * instructions in the graphs. The code is the user's program's: the pane makes it text. */
(function () {
  "use strict";
  const src = document.getElementById("xe-code"), box = document.getElementById("xe-code-pane");
  if (!src || !box || !window.XEReport) return;
  const R = window.XEReport, kSel = document.getElementById("xe-code-kernel");
  let pane = null;
  R.inflate(src).then((d) => {
    pane = XECode.pane(box, {
      light: (kernel, fused, pre) => R.selectOp(fused, kernel, pre),
      pick: (k) => R.select("post", "k:" + k),
      want: () => {},  // the report carries every kernel's code it has room for
    });
    pane.setData(paneData(d));
    show(kSel.value, null);
    document.body.dataset.code = "ready";
  }).catch((e) => { box.textContent = "The code could not be read: " + e; });

  function show(name, op) {
    if (kSel.value !== name) kSel.value = name;
    pane.show(name, op);
  }

  // The report's data in the pane's form. The report carries each text once (a stack's layers
  // share their kernels' code) and a kernel names its texts by index, and the lines linked as
  // its twins' are by the twins' links and its own names by number: a kernel is made whole when
  // the pane first reads it.
  function paneData(d) {
    const kernels = {};
    Object.keys(d.kernels).forEach((name) => {
      Object.defineProperty(kernels, name, { enumerable: true, configurable: true, get() {
        const v = kernelOf(d, d.kernels[name]);
        Object.defineProperty(kernels, name, { value: v, enumerable: true, writable: true, configurable: true });
        return v;
      } });
    });
    return { stages: Object.keys(d.stages).map((s) => [s, d.stages[s]]), kernels, library: d.library };
  }
  function kernelOf(d, k) {
    const stages = {}, ops = Object.assign({}, k.ops || {});
    Object.keys(k.stages).forEach((s) => { stages[s] = d.texts[k.stages[s]]; });
    Object.keys(k.links || {}).forEach((s) => {
      const t = d.links[k.links[s]], out = {};
      Object.keys(t).forEach((n) => { out[n] = t[n].map((i) => k.names[+i]); });
      ops[s] = out;
    });
    return { stages, ops, facts: [k.facts], cut: k.cut || {},
             absent: k.left_out ? "Its code is not in this report (xla-explorer code prints it)." : undefined };
  }

  kSel.addEventListener("change", () => show(kSel.value, null));
  // a selection in the graphs: its kernel's code, scrolled to the op's lines and those marked
  R.onSelect.push((side, nid, k) => {
    if (!pane) return;
    const kind = nid.split(":")[0], name = nid.slice(kind.length + 1);
    const op = k && (kind === "x" || kind === "op") ? name : null;
    if (k && k !== pane.kernel()) show(k, op);
    pane.mark(op);
  });
})();
