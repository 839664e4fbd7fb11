"""Shared fixtures. Compiling is the slow part of the suite, so every gallery model is compiled
at most once per session (per set of compiler options) and the Bundle is shared by all tests;
tests must treat the bundles they get as read-only."""

from __future__ import annotations

import importlib.util
import os
import sys

import pytest


FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")


sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "scripts"))
from record_cpu_fixtures import fixture_name  # noqa: E402  (the script that records the fixtures names them)


@pytest.fixture(scope="session", autouse=True)
def _data_outside_the_repository(tmp_path_factory):
    """No test writes into the repository: the store (and anything else under the data folder)
    goes to a temporary folder for the whole session, subprocesses included."""
    mp = pytest.MonkeyPatch()
    if not os.environ.get("XLA_EXPLORER_DATA"):
        mp.setenv("XLA_EXPLORER_DATA", str(tmp_path_factory.mktemp("xla-explorer-data")))
    yield
    from analysis.service.job_queue import reset_default_queue

    reset_default_queue()  # the app tests' queue: its worker threads end with the session
    mp.undo()


@pytest.fixture(autouse=True)
def _no_spare_worker_left_on():
    """A test that starts the app in this process (Streamlit's AppTest runs ``app/main.py``)
    turns the spare worker on for the process, as the app does: turned off after the test, so a
    later test that counts the workers its job started, or the processes left behind, sees its
    own job's alone."""
    yield
    wp = sys.modules.get("analysis.service.worker_process")
    if wp is not None and wp.spare.kept:
        wp.keep_spare(False)


def _have_jax() -> bool:
    return importlib.util.find_spec("jax") is not None


# Tests that compile through a worker (or drive the app, which does) need JAX; where JAX is not
# installed they are skipped and the rest of the suite runs on the committed fixtures. Whole
# files, or the tests of a file by name.
NEEDS_JAX = {
    "test_app.py": "*", "test_sandbox.py": "*", "test_browser.py": "*", "test_compare.py": ("test_page_", "test_a_link_"),
    "test_passes.py": ("test_page_", "test_a_link_"), "test_sweep.py": ("test_page_", "test_a_link_"),
    "test_job_queue.py": ("test_compile_job_end_to_end", "test_compile_job_with_a_garbage", "test_cpu_calibration"),
    "test_report.py": ("test_report_opens_offline", "test_cli_report_errors"),
    "test_cli.py": ("test_analyze_", "test_unknown_compile_option", "test_syntax_error", "test_missing_files",
                    "test_file_without_model", "test_gpu_target_without"),
}


def pytest_collection_modifyitems(config, items):
    if _have_jax():
        return
    skip = pytest.mark.skip(reason="compiles with JAX, which is not installed here")
    for item in items:
        rule = NEEDS_JAX.get(os.path.basename(str(item.fspath)))
        if rule == "*" or (rule and item.name.startswith(rule)):
            item.add_marker(skip)


def recorded_cpu_bundle(name: str, **compiler_options):
    """The gallery model as ``scripts/record_cpu_fixtures.py`` recorded it (``tests/fixtures/cpu``),
    or None. Stale fixtures (the model's source changed since) are refused."""
    from analysis.bundle.core import Bundle, reanalyze
    from sample_models import gallery_entry

    path = os.path.join(FIXTURES, "cpu", fixture_name(name, compiler_options))
    if not os.path.exists(path):
        return None
    b = Bundle.load(path)
    if b.source.get("code") != gallery_entry(name).source:
        pytest.fail(f"{path} is stale: re-record with scripts/record_cpu_fixtures.py")
    return reanalyze(b)  # the compile is recorded; the analysis is this version's


def _sharded(name: str) -> bool:
    """A gallery model that runs on more than one device (its ``DEVICES = N``)."""
    from analysis.devices.catalog import devices_in_source
    from sample_models import gallery

    return (devices_in_source(gallery()[name].source) or 1) > 1


@pytest.fixture(scope="session")
def gallery_bundle():
    """``gallery_bundle(name, **compiler_options)`` -> the Bundle of that gallery model compiled
    on CPU, cached for the session. Without JAX, the recorded compile from ``tests/fixtures/cpu``
    (a test whose compile was not recorded is skipped)."""
    cache: dict = {}
    live = _have_jax()

    def get(name: str, **compiler_options):
        key = (name, tuple(sorted(compiler_options.items())))
        if key not in cache:
            if live and _sharded(name):  # on its devices: in a worker started with them (this process has one)
                from analysis.service.job import Job
                from analysis.service.worker import run_job
                from sample_models import gallery

                cache[key] = run_job(Job(kind="gallery", name=name, filename=str(gallery()[name].path), backend="cpu",
                                         compiler_options=compiler_options)).bundle
            elif live:
                from analysis.compile.stages import analyze_model

                cache[key] = analyze_model(name, "cpu", compiler_options or None).bundle
            else:
                cache[key] = recorded_cpu_bundle(name, **compiler_options)
                if cache[key] is None:
                    pytest.skip(f"no JAX here and no recorded CPU compile of {name} {compiler_options or ''}")
        return cache[key]

    return get


@pytest.fixture(scope="session")
def source_bundle():
    """``source_bundle(source, name)`` -> the Bundle of a model given as source text (as if
    pasted), compiled on CPU once per session."""
    pytest.importorskip("jax")
    from analysis.compile.load import load_source
    from analysis.compile.stages import compile_model

    cache: dict = {}

    def get(source: str, name: str = "pasted"):
        if source not in cache:
            cache[source] = compile_model(load_source(source, f"<{name}>", name), "cpu").bundle
        return cache[source]

    return get


@pytest.fixture
def address_bar():
    """``address_bar(at)`` -> an AppTest's query parameters as plain strings (AppTest may hold
    each value as a one-item list)."""
    def read(at) -> dict[str, str]:
        return {k: (v[0] if isinstance(v, list) else v) for k, v in at.query_params.items()}

    return read
