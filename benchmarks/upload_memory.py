"""The app server's memory around a big upload: resident memory before, right after a ~30 MB
HLO upload is drawn, and after the tab is closed (a real Streamlit server and a real Chromium).

    .venv/bin/python benchmarks/upload_memory.py [MB]

The upload limit (``upload_mb``, default 32) bounds what one upload can cost; this shows what
it costs and whether it is given back.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def big_hlo(mb: float) -> str:
    """A module of independent elementwise chains, about ``mb`` MB of text."""
    lines = ["HloModule big, is_scheduled=true", "", "ENTRY %main (p: f32[64]) -> f32[64] {",
             "  %p = f32[64]{0} parameter(0)"]
    i, size = 0, 0
    while size < mb * 2 ** 20:
        line = f'  %n{i} = f32[64]{{0}} negate(%{"p" if i == 0 else f"n{i - 1}"}), metadata={{op_name="jit(f)/layer{i // 100}/neg"}}'
        lines.append(line)
        size += len(line) + 1
        i += 1
    lines.append(f"  ROOT %r = f32[64]{{0}} exponential(%n{i - 1})")
    lines.append("}")
    return "\n".join(lines) + "\n"


def main() -> None:
    from playwright.sync_api import sync_playwright

    mb = float(sys.argv[1]) if len(sys.argv) > 1 else 30
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    data = tempfile.mkdtemp(prefix="xla-upload-")
    server = subprocess.Popen([sys.executable, "-m", "streamlit", "run", os.path.join(ROOT, "app", "main.py"),
                               "--server.headless", "true", "--server.port", str(port),
                               "--browser.gatherUsageStats", "false"], cwd=ROOT,
                              env={**os.environ, "XLA_EXPLORER_DATA": data},
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    path = os.path.join(data, "big.hlo")
    with open(path, "w") as f:
        f.write(big_hlo(mb))
    try:
        with sync_playwright() as p:
            b = p.chromium.launch(executable_path="/usr/bin/chromium",
                                  args=["--no-sandbox", "--disable-gpu", "--disable-background-networking"])
            page = b.new_page(viewport={"width": 1280, "height": 800})
            page.goto(f"http://127.0.0.1:{port}/", timeout=120_000)
            page.wait_for_selector("iframe", timeout=240_000)
            time.sleep(3)
            before = rss_mb(server.pid)
            page.get_by_text("Upload HLO / bundle").click()
            page.locator("input[type=file]").set_input_files(path)
            page.get_by_role("button", name="Open").click()
            page.wait_for_function("() => [...document.querySelectorAll('h3')].some(h => h.textContent.startsWith('big'))"
                                   " || document.body.innerText.includes('error at big.hlo')", timeout=600_000)
            time.sleep(3)
            during = rss_mb(server.pid)
            shown = "drawn" if page.locator("h3", has_text="big").count() else "refused with an error"
            page.close()
            b.close()
        # Streamlit drops a closed session's state server.disconnectedSessionTTL (60 s,
        # .streamlit/config.toml) after its websocket goes; the janitor (app.guard) then hands
        # the freed pages back within JANITOR_S
        after_ttl = []
        for wait in (30, 60, 60):
            time.sleep(wait)
            after_ttl.append(rss_mb(server.pid))
        after = after_ttl[-1]
    finally:
        server.terminate()
        server.wait(timeout=30)
    print(f"upload of {os.path.getsize(path) / 2 ** 20:.1f} MB HLO ({shown}): server RSS {before:.0f} MB before, "
          f"{during:.0f} MB with it open; after the tab closed: {after_ttl[0]:.0f} MB at 30 s, {after_ttl[1]:.0f} MB "
          f"at 90 s, {after:.0f} MB at 150 s")


if __name__ == "__main__":
    main()
