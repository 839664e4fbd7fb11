"""analysis.service.job: a job is frozen, of one of the known kinds, and carries its kind's own
typed payload only (a sweep's lengths, an opened file's trace and module), the same after a
round trip through the JSON the worker reads."""

from __future__ import annotations

import base64
import dataclasses
import json

import pytest

from analysis.errors import ExplorerError
from analysis.service.job import Job, Opened, Sweep, upload_job


def _round_trip(job: Job) -> Job:
    return Job.from_dict(json.loads(job.to_json()))


def test_a_sweep_job_carries_its_lengths_typed_and_they_survive_json():
    job = Job(kind="sweep", source="src", sweep={"lengths": [4, 8], "repeats": 3})
    assert job.sweep == Sweep(lengths=[4, 8], buckets=[], repeats=3)
    assert _round_trip(job) == job


def test_an_open_job_carries_the_trace_and_module_it_was_given():
    job = upload_job("dump.zip", b"\x00zip", trace_name="t.json.gz", trace=b"trace bytes", module="jit_f")
    assert base64.b64decode(job.source) == b"\x00zip" and job.filename == "dump.zip"
    assert job.upload == Opened(trace=base64.b64encode(b"trace bytes").decode(), trace_name="t.json.gz",
                                module="jit_f", prefer=None)
    assert _round_trip(job) == job
    other = dataclasses.replace(job, upload=dataclasses.replace(job.upload, module="jit_g"))
    assert other.upload.module == "jit_g" and job.upload.module == "jit_f"


@pytest.mark.parametrize("fields, says", [
    (dict(kind="compile"), "no kind of job 'compile'"),
    (dict(kind="code", sweep={"lengths": [4]}), "a code job has no sweep"),
    (dict(kind="gallery", upload={"module": "m"}), "a gallery job has no upload"),
    (dict(kind="sweep", sweep=[4, 8]), "sweep must be an object"),
    (dict(kind="open", upload={"trace": "", "path": "/etc/passwd"}), "upload has no field 'path'"),
])
def test_a_job_of_no_kind_or_with_another_kinds_payload_is_refused_in_one_line(fields, says):
    with pytest.raises(ExplorerError) as e:
        Job.from_dict(fields)
    assert e.value.phase == "options" and says in e.value.one_line() and "\n" not in e.value.one_line()


def test_a_job_is_never_changed_once_made():
    job = Job(kind="gallery", name="mlp")
    with pytest.raises(dataclasses.FrozenInstanceError):
        job.name = "other"  # type: ignore[misc]
