"""What differs (issue 36): two of a user's runs side by side, provenance field by field with the
run-time facts apart, the environments package by package, inputs per file, and the results (final
values and curves); the page and the API, owner only."""

from datetime import timedelta

import pytest
from django.utils import timezone

from portal.jobs.models import JobMetric
from portal.provenance.models import Provenance
from portal.provenance.selectors import provenance_compare
from portal.tracking.job_runs import job_runs_create
from portal.tracking.models import Metric
from tests.factories import JobFactory, UserFactory

pytestmark = pytest.mark.django_db
DIGEST = "sha256:" + "a" * 64


def _job(user, **fields):
    now = timezone.now()
    defaults = {"started_at": now - timedelta(minutes=5), "ended_at": now, "elapsed": timedelta(minutes=5),
                "node_list": "node1", "template": "pytorch-train"}
    return JobFactory(user=user, **{**defaults, **fields})


def _record(job, **fields):
    uuid = job.uuid
    defaults = {
        "template": "pytorch-train", "parameters": {"seed": 1, "entrypoint": "p/train.py"},
        "script": f"#!/bin/bash\n#SBATCH --job-name={job.name}\n#SBATCH --output=/h/job-{uuid}.out\nrun\n",
        "resources": {"nodes": 1, "gpus_per_node": 1}, "image_reference": "r/torch:1", "image_digest": DIGEST,
        "environment": "pytorch", "environment_lock": "numpy==2.1.0\ntorch==2.14.1\nsix==1.16",
        "environment_hash": "h1", "capture_state": Provenance.Capture.DONE,
        "captured": {"seconds": 0.01, "gpu": {"model": "a100", "driver": "550"},
                     "code": [{"path": "/h/p", "commit": "c1", "remote": "", "diff": "+x\n"}],
                     "inputs": [{"path": "p/data.bin", "kind": "file", "size": 3, "mtime": 1, "sha256": "s1"},
                                {"path": "p/set", "kind": "folder", "size": 2, "over_bound": False,
                                 "files": [{"path": "a", "size": 1, "mtime": 1, "sha256": "sa"},
                                           {"path": "b", "size": 1, "mtime": 1, "sha256": "sb"}]}]}}
    return Provenance.objects.create(job=job, **{**defaults, **fields})


def _metrics(job, accuracy):
    JobMetric.objects.create(job=job, run="", tag="accuracy", steps=[0, 1], values=[0.5, accuracy],
                             final_step=1, final_value=accuracy)


def test_a_faithful_rerun_differs_only_in_run_time_facts(user):
    original, rerun = _job(user), _job(user, node_list="node2")
    this, other = _record(original), _record(rerun)
    _metrics(original, 0.9812345), _metrics(rerun, 0.9812345 + 1e-9)
    comparison = provenance_compare(this, other)
    assert [item.field for item in comparison.fields if not item.same] == []
    assert comparison.verdict == "Only run-time facts differ."
    apart = {item.field for item in comparison.run_time if not item.same}
    assert {"job id", "job uuid", "Slurm job id", "node", "name", "output folder"} <= apart
    assert comparison.results[0].same and comparison.chart is not None


def test_what_made_the_runs_is_marked_field_by_field(user):
    this = _record(_job(user))
    captured = {**this.captured, "code": [{"path": "/h/p", "commit": "c1", "remote": "", "diff": "+y\n"}],
                "inputs": [{**this.captured["inputs"][0], "sha256": "s2"},
                           {**this.captured["inputs"][1], "files": [this.captured["inputs"][1]["files"][0]]}]}
    other = _record(_job(user), image_reference="r/torch:2", image_digest="sha256:" + "b" * 64,
                    environment_lock="numpy==2.2.0\ntorch==2.14.1\nfilelock==3.0", environment_hash="h2",
                    parameters={"seed": 2, "entrypoint": "p/train.py"}, captured=captured)
    comparison = provenance_compare(this, other)
    assert {item.field for item in comparison.fields if not item.same} == {
        "script", "parameters", "image.reference", "image.digest", "environment.hash", "code", "inputs"} - {
        "script"}
    assert {row.name: row.status for row in comparison.packages} == {
        "numpy": "changed", "six": "only this", "filelock": "only other", "torch": "same"}
    assert comparison.packages[-1].name == "torch"  # changed ones first
    assert {row.path: row.same for row in comparison.inputs} == {
        "p/data.bin": False, "p/set/a": True, "p/set/b": False}
    assert comparison.verdict.startswith("What made the runs differs: parameters, image.reference")


def test_the_same_digest_under_another_tag_is_the_same_image(user):
    this = _record(_job(user))
    other = _record(_job(user), image_reference=f"r/torch@{DIGEST}", environment="pytorch-cache-h1")
    marks = {item.field: item.same for item in provenance_compare(this, other).fields}
    assert marks["image.reference"] and marks["environment.name"]


def test_results_compare_final_values_of_the_runs(user):
    this, other = _record(_job(user)), _record(_job(user))
    [run_a], [run_b] = job_runs_create(jobs=[this.job]), job_runs_create(jobs=[other.job])
    for run, values in ((run_a, [0.1, 0.2]), (run_b, [0.1, 0.3])):
        Metric.objects.bulk_create([Metric(run=run, key="loss", value=value, step=step, timestamp=step)
                                    for step, value in enumerate(values)])
    comparison = provenance_compare(this, other)
    [row] = comparison.results
    assert (row.tag, row.this, row.other, row.same) == ("loss", 0.2, 0.3, False)
    assert comparison.verdict == "What made the runs is the same, but their results differ."
    assert {curve["job"] for curve in comparison.curves} == {this.job_id, other.job_id}


def test_the_api_puts_them_side_by_side_owner_only(token_client, user):
    this, other = _record(_job(user)), _record(_job(user))
    body = token_client.get(f"/api/v1/jobs/{this.job_id}/provenance/diff/?other={other.job_id}").json()
    assert body["verdict"] == "Only run-time facts differ." and body["provenance_same"]
    assert {row["name"] for row in body["packages"]} == {"numpy", "torch", "six"}
    assert any(item["field"] == "node" for item in body["run_time"])
    assert [row["path"] for row in body["inputs"]] == ["p/data.bin", "p/set/a", "p/set/b"]
    theirs = _record(_job(UserFactory(username="bob")))
    answer = token_client.get(f"/api/v1/jobs/{this.job_id}/provenance/diff/?other={theirs.job_id}")
    assert answer.status_code == 404


def test_the_page_owner_only_with_a_picker_on_the_job_page(client, user):
    this, other = _record(_job(user)), _record(_job(user))
    client.force_login(user)
    job_page = client.get(f"/jobs/{this.job_id}/").content.decode()
    assert 'id="differs-picker"' in job_page and f'<option value="{other.job_id}"' in job_page
    picked = client.get(f"/jobs/{this.job_id}/differs/?other={other.job_id}")
    assert picked.status_code == 302 and picked["Location"] == f"/jobs/{this.job_id}/differs/{other.job_id}/"
    page = client.get(picked["Location"]).content.decode()
    assert "Only run-time facts differ." in page and 'data-package="numpy"' in page
    assert 'scope="col"' in page and 'id="differs-run-time-table"' in page
    assert client.get(f"/jobs/{this.job_id}/differs/?other=x").status_code == 400
    bob = UserFactory(username="bob")
    theirs = _record(_job(bob))
    assert client.get(f"/jobs/{this.job_id}/differs/{theirs.job_id}/").status_code == 404
    admin = UserFactory(username="ada", is_staff=True, is_superuser=True)
    client.force_login(admin)
    assert client.get(f"/jobs/{this.job_id}/differs/{other.job_id}/").status_code == 404


def test_a_reruns_pinning_lines_are_not_a_difference_of_its_script(user, partitions, tmp_path, settings):
    """The script a re-run renders (scratch work tree, paths' copies, environment rebuilt from the
    lock) reads as its original's: those are compared as code and environment."""
    from portal.environments.models import Environment
    from portal.jobs.services.prepare import CodeTree, Pin, job_prepare
    from portal.jobs.services.submission import job_create

    settings.ENVIRONMENTS_DIR = str(tmp_path)
    (tmp_path / "py").mkdir()
    (tmp_path / "py/gpuportal-env.lock").write_text("torch==2.14.1\n")
    Environment.objects.create(name="py", title="Py", kind="python", path=str(tmp_path / "py"), kernel="py",
                               healthy=True)
    parameters = {"entrypoint": "proj/train.py", "data": "proj/data.bin", "environment": "py",
                  "time_limit": 5, "args": "--seed 1"}

    def stored(pin=None, **changed):
        draft = job_prepare(user=user, template="pytorch-train", parameters={**parameters, **changed},
                            pin=pin)
        return job_create(user=user, draft=draft).provenance

    original = stored()
    rerun = stored(Pin(environment_lock="torch==2.14.0", environment_lock_sha256="b" * 64,
                       code=(CodeTree(top="/home/alice/proj", commit="c" * 40, diff="+x\n"),)))
    assert "worktree add" in rerun.script and "GPUPORTAL_RERUN=" in rerun.script  # what is left out
    marks = {item.field: item.same for item in provenance_compare(original, rerun).fields}
    assert marks["script"], "the scripts differ in more than the re-run's pins"
    other = stored(args="--seed 2")
    assert not {item.field: item.same for item in provenance_compare(original, other).fields}["script"]
