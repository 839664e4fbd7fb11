"""What a projector shows, read from a real browser page: the smallest text on screen and what
is cut or wrapped, in the page and in every frame of it (Streamlit's components are iframes of
the same origin). Used by the presentation-mode browser tests of every page."""

from __future__ import annotations

# One pass over the page: every visible piece of text inside the window (HTML text by its
# font size, SVG text by its font size times the zoom it is drawn at: a graph's or a chart's),
# and the elements whose text does not fit: cut (wider than their box, with the overflow
# hidden or an ellipsis) or a button's label broken over two lines.
SCAN = """(limit) => {
  const W = window.innerWidth, H = window.innerHeight;
  const small = [], cut = [];
  function frameOffset(doc) {
    let x = 0, y = 0, w = doc.defaultView;
    while (w && w.frameElement) { const r = w.frameElement.getBoundingClientRect(); x += r.left; y += r.top; w = w.parent; }
    return [x, y];
  }
  function onScreen(r, off, clip) {
    const left = r.left + off[0], top = r.top + off[1];
    return r.width > 0 && r.height > 0 && left < Math.min(W, clip.right) && left + r.width > Math.max(0, clip.left)
      && top < Math.min(H, clip.bottom) && top + r.height > Math.max(0, clip.top);
  }
  function scan(doc, clip) {
    const off = frameOffset(doc), win = doc.defaultView;
    const walker = doc.createTreeWalker(doc.body || doc, NodeFilter.SHOW_TEXT);
    const seen = new Set();
    for (let n = walker.nextNode(); n; n = walker.nextNode()) {
      const text = n.textContent.trim(); if (!text) continue;
      const el = n.parentElement; if (!el || seen.has(el)) continue;
      seen.add(el);
      const cs = win.getComputedStyle(el);
      if (cs.visibility === "hidden" || cs.display === "none" || parseFloat(cs.opacity) === 0) continue;
      const range = doc.createRange(); range.selectNodeContents(n);
      const r = range.getBoundingClientRect();
      if (!onScreen(r, off, clip)) continue;
      let px = parseFloat(cs.fontSize);
      if (el instanceof win.SVGElement && el.getScreenCTM) {  // its font size as drawn: times the zoom
        const m = el.getScreenCTM();
        if (m) px *= Math.sqrt(m.a * m.a + m.b * m.b);
      }
      if (px < limit - 0.25) small.push([Math.round(px * 10) / 10, text.slice(0, 40), el.tagName]);
    }
    doc.querySelectorAll("*").forEach((el) => {
      if (el instanceof win.SVGElement) return;
      const cs = win.getComputedStyle(el);
      if (cs.display === "none" || cs.visibility === "hidden" || !el.textContent.trim()) return;
      const r = el.getBoundingClientRect();
      if (!onScreen(r, off, clip)) return;
      const own = [...el.childNodes].some((c) => c.nodeType === 3 && c.textContent.trim());
      if (!own) return;
      const hides = cs.overflowX === "hidden" || cs.overflowX === "clip" || cs.textOverflow === "ellipsis";
      if (hides && el.scrollWidth > el.clientWidth + 1) cut.push(["cut", el.textContent.trim().slice(0, 40), el.tagName]);
      if (el.tagName === "BUTTON") {
        const lh = parseFloat(cs.lineHeight) || parseFloat(cs.fontSize) * 1.3;
        const range = doc.createRange(); range.selectNodeContents(el);
        const lines = new Set([...range.getClientRects()].map((q) => Math.round(q.top)));
        if (lines.size > 1 && r.height > 1.8 * lh) cut.push(["wrapped", el.textContent.trim().slice(0, 40), "BUTTON"]);
      }
    });
    doc.querySelectorAll("iframe").forEach((f) => {
      let d = null; try { d = f.contentDocument; } catch (e) { return; }
      if (!d || !d.body) return;
      const fr = f.getBoundingClientRect(), o = frameOffset(doc);
      scan(d, {left: fr.left + o[0], top: fr.top + o[1], right: fr.right + o[0], bottom: fr.bottom + o[1]});
    });
  }
  scan(document, {left: 0, top: 0, right: W, bottom: H});
  return {small, cut};
}"""


def scan(page, limit: float = 14) -> dict:
    """``{"small": [[px, text, tag], ...], "cut": [[how, text, tag], ...]}`` of what is on the
    screen now: text under ``limit`` pixels, and text cut or wrapped where it must not be."""
    return page.evaluate(SCAN, limit)
