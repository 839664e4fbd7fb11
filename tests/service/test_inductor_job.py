"""A job that asks for Inductor beside XLA (``Job.inductor``): its own cache key, the same key as
before for every job that does not ask, its phase named, its field through JSON. (The study
itself: tests/torch/.)"""

from __future__ import annotations

import importlib.metadata
import json
from dataclasses import asdict

import pytest

from analysis.bundle.core import SCHEMA_VERSION
from analysis.service import cache_keys as keys
from analysis.service.job import PHASES, Job, job_source
from analysis.service.messages import MEASURED_FIELDS
from analysis.service.store import content_key

KIND = "cpu:cpux1"


def test_an_inductor_job_is_cached_apart_and_other_jobs_keep_their_keys():
    base = Job(source="import torch\nmodel = None", name="p")
    assert keys.cache_key(base, KIND) != keys.cache_key(Job(source=base.source, name="p", inductor=True), KIND)
    # a job that does not ask is keyed as jobs were before the field existed: without it
    d = asdict(base)
    for k in ("peaks", "preview_kernels", "gpu_target", "devices", "jax", "inductor"):
        d.pop(k)
    d["source"] = job_source(base)
    versions = (importlib.metadata.version("jax"), importlib.metadata.version("jaxlib"))
    assert keys.cache_key(base, KIND) == content_key("bundle", SCHEMA_VERSION, d, *versions, KIND)


def test_the_field_travels_and_its_phase_and_answer_are_named():
    job = Job(source="x", name="p", inductor=True, measure=True)
    assert Job.from_dict(json.loads(job.to_json())).inductor is True
    assert "Inductor" in PHASES["inductor"]
    assert "inductor" in MEASURED_FIELDS  # a measured preview's answer carries it


def test_a_measured_previews_answer_brings_the_section_checked():
    from analysis.bundle.core import bundle_from_hlo
    from analysis.errors import ExplorerError
    from analysis.service.worker import measured_bundle
    from tests.program.test_kernels import CPU_HLO

    preview = bundle_from_hlo(CPU_HLO)
    section = {"torch": "2.13.0", "graphs": 1, "measured": False, "code": {},
               "kernels": [{"name": "cpp_fused_gelu_0", "kind": "cpp", "aten": ["aten::gelu"], "modules": ["act"],
                            "module": "act", "parts": [["act", "aten::gelu"]], "extra": "dropped"}]}
    job = Job(source="x", name="p", inductor=True, measure=True)
    b = measured_bundle({"timings": None, "fusion_comparison": None, "inductor": section}, job, preview)
    assert b.inductor["kernels"][0]["aten"] == ["aten::gelu"] and "extra" not in b.inductor["kernels"][0]
    bad = dict(section, kernels=[{"name": "k", "kind": "shell"}])
    with pytest.raises(ExplorerError) as e:
        measured_bundle({"timings": None, "inductor": bad}, job, preview)
    assert e.value.phase == "protocol" and "inductor.kernels[0]" in e.value.message
