/* What every graph view's script shares (the app's component, the Code pane, the HTML report):
 *
 *   XEHelpers.el(tag, text, cls)   // an element whose text is set as text, never as markup
 *   XEHelpers.inflate(base64)      // a promise of the text of base64 of zlib-deflated bytes
 *
 * Names, code and facts come from a bundle (untrusted): they go into the page through ``el``
 * (textContent), never through innerHTML. Big data travels deflated (the server's payload, the
 * report's code and layers) and is inflated with the browser's own DecompressionStream, since
 * neither page loads any code from elsewhere. */
(function (root) {
  "use strict";

  function el(tag, text, cls) {
    const e = document.createElement(tag);
    if (text !== undefined && text !== null) e.textContent = text;
    if (cls) e.className = cls;
    return e;
  }

  // The bytes by a loop into one array: tens of MB of base64 in a big program's payload, which
  // a mapping function per character makes several times slower
  function inflate(b64) {
    const bin = atob(b64), bytes = new Uint8Array(bin.length);
    for (let i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
    return new Response(new Blob([bytes]).stream().pipeThrough(new DecompressionStream("deflate"))).text();
  }

  root.XEHelpers = { el, inflate };
})(window);
