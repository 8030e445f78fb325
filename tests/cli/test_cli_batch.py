"""`gpuportal submit --batch FILE.json`: one request for a list of jobs, a line per job."""

import json

import pytest

from portal.jobs.models import Job

JOB = {"template": "custom",
       "parameters": {"commands": "true", "gpus": 0, "partition": "debug", "time_limit": 5}}


@pytest.fixture
def no_sbatch(monkeypatch):
    monkeypatch.setattr("portal.jobs.tasks.job_submit_first.delay", lambda *job_ids: None)


def test_a_batch_file_submits_the_valid_jobs_and_names_the_refused(token_cli, no_sbatch, partitions,
                                                                    tmp_path):
    path = tmp_path / "jobs.json"
    path.write_text(json.dumps([JOB, {"template": "nope"}, {**JOB, "name": "second"}]))
    done = token_cli("submit", "--batch", str(path))
    assert done.returncode == 4, done.stderr  # one refused: the others went in all the same
    assert "2 submitted, 1 refused." in done.stderr and "Unknown template" in done.stdout
    assert sorted(Job.objects.values_list("name", flat=True)) == ["custom", "second"]
    answer = token_cli("--json", "submit", "--batch", str(tmp_path / "jobs.json"))
    assert [r["status"] for r in answer.json()["results"]] == [201, 400, 201]


def test_batch_takes_no_template_and_must_be_a_list(token_cli, tmp_path):
    path = tmp_path / "jobs.json"
    path.write_text(json.dumps(JOB))
    assert token_cli("submit", "--batch", str(path)).returncode == 2
    assert token_cli("submit", "custom", "--batch", str(path)).returncode == 2
    assert token_cli("submit").returncode == 2
