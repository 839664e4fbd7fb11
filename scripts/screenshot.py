"""Screenshot the running app in headless Chromium once both graphs are drawn.

    .venv/bin/python scripts/screenshot.py http://localhost:8501 out.png [1280x800] [--full]
"""

import sys

from playwright.sync_api import sync_playwright

url, out = sys.argv[1], sys.argv[2]
size = next((a for a in sys.argv[3:] if "x" in a and not a.startswith("-")), "1280x800")
w, h = map(int, size.split("x"))
with sync_playwright() as p:
    browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=[
        "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
        "--disable-component-update", "--disable-sync"])
    page = browser.new_page(viewport={"width": w, "height": h})
    page.goto(url)
    page.wait_for_selector("iframe[title='app.views.xla_graph']", timeout=120_000)
    for fr in page.frames:
        if "xla_graph" in (fr.url or ""):
            fr.wait_for_selector("svg[data-ready='1']", timeout=120_000)
    page.wait_for_timeout(1500)
    page.screenshot(path=out, full_page="--full" in sys.argv)
    browser.close()
print(out)
