"""Shared fixtures. Compiling is the slow part of the suite, so every gallery model is compiled
at most once per session (per set of compiler options) and the Bundle is shared by all tests;
tests must treat the bundles they get as read-only."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def gallery_bundle():
    """``gallery_bundle(name, **compiler_options)`` -> the Bundle of that gallery model compiled
    on CPU, cached for the session."""
    pytest.importorskip("jax")
    from analysis.compile.stages import analyze_model

    cache: dict = {}

    def get(name: str, **compiler_options):
        key = (name, tuple(sorted(compiler_options.items())))
        if key not in cache:
            cache[key] = analyze_model(name, "cpu", compiler_options or None).bundle
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
