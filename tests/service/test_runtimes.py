"""Runtimes (analysis.service.runtimes): the jax releases a job can run in, found, bounded and
removed; a job compiled in another release's runtime inside the sandbox; ``--jax`` and ``compare``
on the command line. The two runtimes the suite uses are the ones ``scripts/dev.sh`` makes (``.venv``
and ``.venv/jax-0.10``): nothing here downloads a release."""

from __future__ import annotations

import os
import sys

import pytest

from analysis.cli import main as cli_main
from analysis.errors import ExplorerError
from analysis.service import runtimes
from analysis.service.cache_keys import cache_key
from analysis.service.job import Job
from analysis.service.sandbox import sandbox_status
from analysis.service.worker import run_job

OWN = runtimes.own()
OTHERS = [r for r in runtimes.available() if not r.own]
needs_two = pytest.mark.skipif(not OTHERS, reason="one jax runtime here (scripts/dev.sh test makes .venv/jax-0.10)")


@pytest.mark.parametrize("version, words", [("0.8.1", "not offered"), ("0.13.0", "not offered"),
                                            ("latest", "like 0.10.2"), ("0.10.2; rm -rf /", "like 0.10.2")])
def test_versions_not_offered_say_so_in_one_line(version, words):
    with pytest.raises(ExplorerError) as e:
        runtimes.check_version(version)
    assert words in e.value.one_line() and "\n" not in e.value.one_line()
    with pytest.raises(ExplorerError):
        Job(kind="gallery", name="mlp", jax=version)


def test_the_apps_own_runtime_is_listed_and_offered():
    assert runtimes.available()[0].jax >= min(r.jax for r in runtimes.available())
    assert OWN.jax in {r.jax for r in runtimes.available()}
    assert OWN.jax in runtimes.offered()
    assert runtimes.resolve(None).own


def _fake_env(root, version):
    """An environment as pip leaves one: bin/python and jax's and jaxlib's package metadata."""
    prefix = root / f"jax-{version}"
    site = prefix / "lib" / "python3.11" / "site-packages"
    for dist in ("jax", "jaxlib"):
        (site / f"{dist}-{version}.dist-info").mkdir(parents=True)
    (prefix / "bin").mkdir()
    os.symlink(sys.executable, prefix / "bin" / "python")
    (prefix / ".complete").write_text("")
    return prefix


def test_made_runtimes_are_listed_bounded_and_removable(tmp_path, monkeypatch):
    monkeypatch.setenv("XLA_EXPLORER_DATA", str(tmp_path))
    root = tmp_path / "runtimes"
    versions = ["0.9.0", "0.9.1", "0.11.0", "0.11.1"][:runtimes.MAX_MADE]
    for v in versions:
        _fake_env(root, v)
    (root / "jax-0.11.2").mkdir()  # a make that did not finish (no .complete): not a runtime
    made = {r.jax for r in runtimes.available() if r.made}
    assert made == set(versions)
    assert runtimes.find("0.9").jax == "0.9.1"  # a minor version names its newest
    if runtimes.find_python((3, 12)) is not None:
        with pytest.raises(ExplorerError) as e:  # refused before anything is downloaded
            runtimes.make("0.11.2")
        assert "the most kept" in str(e.value) and "runtimes --remove" in str(e.value)
    assert runtimes.remove("0.9.0").jax == "0.9.0"
    assert not (root / "jax-0.9.0").exists()
    with pytest.raises(ExplorerError) as e:
        runtimes.remove(OWN.jax)
    assert "not made here" in str(e.value)


@needs_two
def test_the_cache_key_names_the_runtime():
    other = OTHERS[0]
    mine = Job(kind="gallery", name="mlp")
    theirs = Job(kind="gallery", name="mlp", jax=other.jax)
    assert cache_key(mine, "cpu:cpux1") != cache_key(theirs, "cpu:cpux1")
    assert cache_key(theirs, "cpu:cpux1") == cache_key(Job(kind="gallery", name="mlp", jax=other.jax), "cpu:cpux1")


@needs_two
@pytest.mark.sandbox
def test_a_job_compiles_in_the_runtime_it_names_inside_the_sandbox():
    other = OTHERS[0]
    ran = run_job(Job(kind="gallery", name="mlp", jax=other.jax))
    env = ran.bundle.environment
    assert (env["jax"], env["jaxlib"]) == (other.jax, other.jaxlib)
    assert env["python"].startswith(other.python_version)
    assert env["xla"].startswith("extension ")
    assert ran.bundle.kernels and ran.bundle.metrics["kernels_after"] > 0
    assert ran.isolated == sandbox_status()[0]


@needs_two
def test_compare_writes_both_bundles_and_prints_the_diff(tmp_path, capsys):
    other = OTHERS[0]
    assert cli_main(["compare", "mlp", "--jax", other.jax, "--jax", OWN.jax, "--out-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"A: jax {other.jax} (jaxlib {other.jaxlib}")
    assert f"B: jax {OWN.jax}" in out and "kernels matched by provenance:" in out
    from analysis.bundle.core import Bundle

    for r in (other, OWN):
        b = Bundle.load(tmp_path / f"mlp-jax-{r.jax}.json")
        assert b.environment["jax"] == r.jax and b.environment["jaxlib"] == r.jaxlib


@needs_two
def test_compare_measure_alternates_the_releases_and_gives_each_its_spread(tmp_path, capsys):
    other = OTHERS[0]
    assert cli_main(["compare", "mlp", "--jax", other.jax, "--jax", OWN.jax, "--measure", "--rounds", "2",
                     "--iters", "3", "--out-dir", str(tmp_path)]) == 0
    out, err = capsys.readouterr()
    said = [ln.split("measuring ", 1)[1] for ln in err.splitlines() if "measuring jax" in ln]
    assert said == [f"jax {other.jax} (round 1 of 2)", f"jax {OWN.jax} (round 1 of 2)",
                    f"jax {OWN.jax} (round 2 of 2)", f"jax {other.jax} (round 2 of 2)"]
    from analysis.bundle.core import Bundle

    b = Bundle.load(tmp_path / f"mlp-jax-{OWN.jax}.json")
    assert b.timings["rounds"] == 2 and b.timings["step_min_s"] <= b.timings["step_median_s"] <= b.timings["step_max_s"]
    step = next(ln for ln in out.splitlines() if ln.startswith("step time: A "))
    assert step.endswith("(spread over 2 alternated runs each)")
    assert any(f"-> B is {v}" in step for v in ("faster", "slower", "within the spread"))


def test_cli_errors_name_the_flag(tmp_path, capsys):
    assert cli_main(["compare", "mlp", "--jax", OWN.jax]) == 2
    assert "two releases" in capsys.readouterr().err
    assert cli_main(["analyze", "mlp", "--jax", "0.8.1", "--out", str(tmp_path / "x.json")]) == 2
    assert "jax 0.8.1 is not offered" in capsys.readouterr().err
