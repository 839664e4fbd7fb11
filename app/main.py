"""XLA Explorer — the Streamlit entry point: ``streamlit run app/main.py``.

It only names the pages; the explorer (graphs side by side, details, kernels, texts) is
``app/explorer.py``, the others are in ``app/sections/`` (not ``pages/``: Streamlit would also
serve a ``pages/`` folder on its own, bypassing this navigation). Every page reads Bundles and sends
compiles to the worker; none imports JAX.
"""

from __future__ import annotations

import os

HERE = os.path.dirname(os.path.abspath(__file__))

import streamlit as st  # noqa: E402

from app import lecture_ui  # noqa: E402
from app.guard import start_memory_janitor  # noqa: E402

start_memory_janitor()  # a closed tab's memory goes back to the machine (app.guard)
from app.runner import start_spare_worker  # noqa: E402

start_spare_worker()  # the next job's worker started ahead (analysis.service.worker_process.keep_spare)
st.set_page_config(page_title="XLA Explorer", layout="wide")
PAGES = {  # app.lecture.PAGES names them: a lecture's step opens one of these
    "explorer": st.Page(os.path.join(HERE, "explorer.py"), title="Explorer", default=True),
    "passes": st.Page(os.path.join(HERE, "sections", "pass_pipeline.py"), title="Pass pipeline",
                      url_path="Pass_pipeline"),
    "compare": st.Page(os.path.join(HERE, "sections", "compare.py"), title="Compare", url_path="Compare"),
    "sweep": st.Page(os.path.join(HERE, "sections", "shape_sweep.py"), title="Shape sweep", url_path="Shape_sweep"),
}
nav = st.navigation(list(PAGES.values()))
lecture_ui.open_from_link(PAGES, nav)  # a link's lecture=, once per session: its step opened
lecture_ui.bar(PAGES)  # while a lecture is on: step k of n, its caption, Back / Next (the arrow keys)
nav.run()
