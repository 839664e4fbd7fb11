"""No string of a bundle or an upload ever runs as code in the app (issue 12, stored XSS).

A payload that announces itself on the browser console when it runs is put into every string
field of a recorded bundle (the title, the environment, the source code, the timings, the
memory view, ...) and into the texts of its HLO (every op name in the metadata); the bundle is
uploaded in a real Chromium and every tab of the explorer is opened. The console must never
show the payload's mark (the payload text itself never contains it: the mark is computed).
"""

from __future__ import annotations

import json
import os
import re

import pytest

from tests.polling import app_idle
from tests.scenarios.test_browser import OUT, _graph_frames, _upload, browser, server  # noqa: F401 - fixtures
from tests.paths import ROOT

pytestmark = pytest.mark.browser

MARK = "XSS" + "1337"
# Every way HTML can run script, none with a double quote (so it fits in an HLO string too).
PAYLOAD = ("<img src=x onerror=console.log('XSS'+1337)><script>console.log('XSS'+1337)</script>"
           "<svg/onload=console.log('XSS'+1337)><iframe srcdoc=<script>console.log('XSS'+1337)</script>></iframe>"
           "[link](javascript:console.log('XSS'+1337)) `</code><img src=y onerror=console.log('XSS'+1337)>`")


def poison(obj, skip=("stages",)):
    """Every string value in ``obj`` with the payload added (iterative; dict keys kept)."""
    todo = [obj]
    while todo:
        o = todo.pop()
        items = o.items() if isinstance(o, dict) else enumerate(o) if isinstance(o, list) else ()
        for k, v in list(items):
            if isinstance(o, dict) and k in skip:
                continue
            if isinstance(v, str):
                o[k] = v + PAYLOAD
            elif isinstance(v, (dict, list)):
                todo.append(v)
    return obj


def poison_hlo(text: str) -> str:
    return re.sub(r'op_name="([^"]*)"', lambda m: f'op_name="{m.group(1)}{PAYLOAD}"', text)


def hostile_bundle() -> dict:
    d = json.load(open(os.path.join(ROOT, "tests", "fixtures", "cpu", "mlp.bundle.json")))
    d["timings"] = {"step_median_s": 1e-4, "device": "cpu", "kernels": {
        k["name"]: {"name": k["name"], "route": k["route"], "median_s": 1e-5, "calls": 1, "library": "x"}
        for k in d["kernels"]}}
    poison(d)
    for part in ("allocations", "values"):  # an allocation's kind is one of five: anything else is
        for r in d["memory"][part]:         # refused on load (bundle_checks.check_memory)
            r["kind"] = r["kind"].removesuffix(PAYLOAD)
    d["stages"] = {k: poison_hlo(v) if k.startswith("hlo") else v + PAYLOAD for k, v in d["stages"].items()}
    return d


# Every image of the page and of its frames has loaded or failed (an onerror handler has had its
# chance to run).
IMAGES_DONE = """() => [document, ...[...document.querySelectorAll('iframe')].map(f => {
    try { return f.contentDocument; } catch (e) { return null; } })].filter(d => d)
  .every(d => [...d.images].every(i => i.complete))"""


def _shown(page) -> None:
    """The app has finished drawing what was asked for, and what it drew has loaded."""
    app_idle(page)
    page.wait_for_function(IMAGES_DONE, timeout=60_000)


def open_upload_on_every_tab(server, browser, path):
    """Upload ``path`` in a fresh page and open every tab of the explorer, each once the app has
    drawn it whole; returns the page and the list that collects every sign of the payload
    running (console mark, dialogs)."""
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    fired: list[str] = []
    page.on("console", lambda m: fired.append(m.text) if MARK in m.text else None)
    page.on("dialog", lambda d: (fired.append("dialog: " + d.message), d.dismiss()))
    page.goto(server)
    _graph_frames(page)
    page.get_by_text("Upload HLO / bundle").click()
    _upload(page, path)
    _shown(page)  # the upload's run is over: the graphs below are the upload's
    _graph_frames(page)
    for tab in ("Kernels & timings", "Text views", "Source", "Memory"):
        t = page.get_by_role("tab", name=tab)
        if t.count():
            t.first.click()
            page.wait_for_function("(name) => [...document.querySelectorAll('[role=tab]')].some("
                                   "e => e.textContent.includes(name) && e.getAttribute('aria-selected') === 'true')",
                                   arg=tab, timeout=60_000)
            _shown(page)
    return page, fired


def test_no_payload_in_any_bundle_field_runs(server, browser, tmp_path):  # noqa: F811
    path = tmp_path / "hostile.json"
    path.write_text(json.dumps(hostile_bundle()))
    page, fired = open_upload_on_every_tab(server, browser, path)
    # the payload is shown as the text it is
    assert page.get_by_text("<img src=x onerror", exact=False).count() > 0
    os.makedirs(OUT, exist_ok=True)
    page.screenshot(path=os.path.join(OUT, "xss_bundle.png"), full_page=False)
    assert fired == [], f"a payload ran: {fired[:3]}"
    page.close()


def test_no_payload_in_a_dump_zips_names_runs(server, browser, tmp_path):  # noqa: F811
    """An uploaded XLA dump zip whose module names (the file names and the HloModule line) and op
    names carry the payload: the module picker, the header and every tab show it as text."""
    import zipfile

    fx = os.path.join(ROOT, "tests", "fixtures", "decisions")
    before = open(os.path.join(fx, "mlp.cpu.before.hlo")).read()
    after = open(os.path.join(fx, "mlp.cpu.after.hlo")).read()
    # a file name may hold double quotes: the red team's iframe, whose srcdoc runs in the page's origin
    name = "jit_<iframe srcdoc=\"<script>console.log('XSS'+1337)<\\/script>\"></iframe><img src=x onerror=console.log('XSS'+1337)>"
    name = name.replace("\\/", "/").replace("/", "&#47;")  # no slash in a file name: closing tags as references
    before = re.sub(r"^HloModule [^\s,]+", "HloModule evil", poison_hlo(before), count=1, flags=re.M)
    after = re.sub(r"^HloModule [^\s,]+", "HloModule evil", poison_hlo(after), count=1, flags=re.M)
    path = tmp_path / "evil-dump.zip"
    with zipfile.ZipFile(path, "w") as z:
        for i in (1, 2):  # two modules: the picker lists both names
            z.writestr(f"dump/module_000{i}.{name}.before_optimizations.txt", before)
            z.writestr(f"dump/module_000{i}.{name}.cpu_after_optimizations.txt", after)
    page, fired = open_upload_on_every_tab(server, browser, path)
    os.makedirs(OUT, exist_ok=True)
    page.screenshot(path=os.path.join(OUT, "xss_dump.png"))
    assert fired == [], fired  # nothing ran
    assert page.get_by_text("onerror", exact=False).count() > 0  # and the names are shown, as text
