/* The Streamlit page around the explorer's frame, where the page itself cannot reach: the code
 * editor (streamlit-ace, another component's frame of the same origin) gets a Debian font that
 * is there, Ctrl+Enter in it presses Compile, and the line of an error the page marked in it is
 * scrolled into view.
 *
 *   XEEditor.hook()   // called every so often: editors drawn since are hooked once each
 *
 * A page of another origin is left alone: the button's own shortcut still works outside the
 * editor. */
(function (root) {
  "use strict";

  // Ctrl+Enter in the code editor (another component's frame, same origin) presses Compile: the
  // page's own shortcut does not hear keys typed inside a frame.
  function hookEditor() {
    try {
      const doc = window.parent.document;
      doc.querySelectorAll("iframe").forEach((f) => {
        if (!(f.src || "").includes("streamlit_ace")) return;
        const d = f.contentDocument;
        if (!d || d.__xeHooked || !d.head) { showErrorLine(f); return; }
        d.__xeHooked = true;
        // the editor's font: a Debian font that is there (ace's list starts with Mac and Windows
        // fonts), its lines tall enough for the underscore, which a 16 px line box clipped away
        const st = d.createElement("style");
        st.textContent = '.ace_editor, .ace_editor .ace_text-input { font-family: "DejaVu Sans Mono", monospace !important; line-height: 1.5 !important; }';
        d.head.appendChild(st);
        // ace measures its line height when it renders; one already drawn with the old font keeps
        // 16 px lines until its size watcher fires, which a busy machine may not do for seconds
        d.querySelectorAll(".ace_editor").forEach((e) => {
          const ed = e.env && e.env.editor;
          if (ed && ed.renderer) { ed.renderer.updateFontSize(); ed.resize(true); }
        });
        d.addEventListener("keydown", (ev) => {
          if (ev.key !== "Enter" || !(ev.ctrlKey || ev.metaKey)) return;
          ev.preventDefault(); ev.stopPropagation();
          // the editor sends its text first (on change); then Compile
          setTimeout(() => { const btn = doc.querySelector(".st-key-compile_main button"); if (btn) btn.click(); }, 800);
        }, true);
        showErrorLine(f);  // after the lines are measured in the new font: a scroll made before would be off by rows
      });
    } catch (e) { /* not the same origin: the button's own shortcut still works outside the editor */ }
  }

  // The line of an error the page marked in the editor (an annotation), scrolled into view once:
  // the editor keeps its own scroll, which a rerun leaves wherever it was
  function showErrorLine(f) {
    try {
      const w = f.contentWindow, el = f.contentDocument.querySelector(".ace_editor:not(.ace_autocomplete)");
      if (!w || !w.ace || !el) return;
      const ed = w.ace.edit(el), notes = ed.getSession().getAnnotations() || [];
      const err = notes.find((a) => a.type === "error");
      const key = err ? err.row + ":" + err.text : null;
      if (!err || el.__xeShown === key) return;
      el.__xeShown = key;
      ed.scrollToLine(err.row, true, false, () => {});
    } catch (e) { /* an editor of another kind: nothing to scroll */ }
  }

  root.XEEditor = { hook: hookEditor };
})(window);
