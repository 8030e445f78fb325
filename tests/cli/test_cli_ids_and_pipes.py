"""The CLI's output when stdout is not a terminal (tab-separated, nothing cut), and any of a job's ids
(number, Slurm job id or sweep task, Portal ID) where a command takes a job."""

from datetime import UTC, datetime

import pytest

from gpuportal_cli.client import Exit
from gpuportal_cli.output import table
from portal.jobs.models import Job, JobState
from portal.sweeps.models import Sweep
from tests.factories import JobFactory

SUBMITTED = datetime(2026, 11, 28, 19, 52, tzinfo=UTC)


def _long_job(alice) -> Job:
    job = JobFactory(user=alice, name="resnet50-amp-sweep-of-learning-rates-nightly",
                     template="pytorch-multinode", partition="gpu-a100-80gb-preemptible",
                     state=JobState.OUT_OF_MEMORY, exit_code=137, slurm_job_id="4961234")
    Job.objects.filter(pk=job.pk).update(submitted_at=SUBMITTED)
    return job


def test_jobs_into_a_pipe_prints_whole_tab_separated_values(token_cli, alice):
    job = _long_job(alice)
    done = token_cli("jobs", COLUMNS="40")  # stdout is a pipe; a narrow width must cut nothing
    assert done.returncode == 0, done.stderr
    header, row = done.stdout.splitlines()
    assert header.split("\t") == ["ID", "NAME", "TEMPLATE", "STATE", "PARTITION", "GPUS", "SUBMITTED",
                                  "ELAPSED", "EXIT"]
    submitted = SUBMITTED.astimezone().strftime("%Y-%m-%d %H:%M")
    assert row.split("\t") == [str(job.pk), "resnet50-amp-sweep-of-learning-rates-nightly",
                               "pytorch-multinode", "OUT_OF_MEMORY", "gpu-a100-80gb-preemptible", "1",
                               submitted, "", "137"]
    assert "\x1b[" not in done.stdout  # no colour codes in a pipe


def test_an_empty_list_into_a_pipe_is_its_header(token_cli, alice):
    done = token_cli("jobs")
    assert done.returncode == 0 and done.stdout.split("\t")[0] == "ID" and len(done.stdout.splitlines()) == 1
    assert "No jobs." in done.stderr


def test_one_job_into_a_pipe_is_label_tab_value_lines(token_cli, alice):
    job = _long_job(alice)
    lines = dict(line.split("\t") for line in token_cli("job", str(job.pk)).stdout.splitlines())
    assert (lines["Job"], lines["Slurm job"], lines["Portal ID"]) == (str(job.pk), "4961234", str(job.uuid))
    assert lines["Partition"] == "gpu-a100-80gb-preemptible" and lines["Exit code"] == "137"


def test_tabs_and_line_breaks_in_a_value_stay_on_its_line(capsys):
    rows = [{"name": "a\tb\nc\\d"}, {"name": None}]
    table(rows, [("NAME", lambda r: r["name"]), ("N", lambda r: 1)], empty="none")  # captured: no terminal
    assert capsys.readouterr().out == "NAME\tN\na\\tb\\nc\\\\d\t1\n\t1\n"


def test_a_terminal_keeps_the_aligned_table(monkeypatch, capsys):
    monkeypatch.setattr("gpuportal_cli.output.piped", lambda: False)
    table([{"a": "x", "b": "y"}], [("A", lambda r: r["a"]), ("BEE", lambda r: r["b"])], empty="none")
    printed = capsys.readouterr().out
    assert "\t" not in printed and printed.splitlines()[0].split() == ["A", "BEE"]


def test_job_takes_a_slurm_job_id_and_says_which_job_it_used(token_cli, alice):
    job = JobFactory(user=alice, slurm_job_id="987654")
    done = token_cli("--json", "job", "987654")
    assert done.returncode == 0, done.stderr
    assert done.json()["id"] == job.pk
    assert f"job 987654 is Slurm job 987654: portal job {job.pk}" in done.stderr
    by_number = token_cli("--json", "job", str(job.pk))  # a job number is taken as it is, silently
    assert by_number.json()["id"] == job.pk and by_number.stderr == ""


def test_job_takes_a_portal_id_and_a_sweep_task(token_cli, alice):
    job = JobFactory(user=alice)
    done = token_cli("--json", "job", str(job.uuid))
    assert done.json()["id"] == job.pk and f"is Portal ID {job.uuid}: portal job {job.pk}" in done.stderr
    array = JobFactory(user=alice, state=JobState.RUNNING, slurm_job_id="987700", template="pytorch-train")
    Sweep.objects.create(user=alice, job=array, name="s", template="pytorch-train", method="list",
                         space=[{"lr": 0.1}], tasks=[{"lr": 0.1}], concurrency=1, objective="loss",
                         direction="min")
    task = token_cli("--json", "job", "987700_0")
    assert task.json()["id"] == array.pk
    assert f"job 987700_0 is Slurm job 987700_0: portal job {array.pk}" in task.stderr


def test_an_id_nobody_has_is_not_found_and_a_typo_a_usage_error(token_cli, alice):
    missing = token_cli("job", "987999")
    assert missing.returncode == Exit.NOT_FOUND
    assert "No job of yours has the job number or Slurm job id 987999" in missing.stderr
    assert token_cli("job", "987999_2").returncode == Exit.NOT_FOUND
    typo = token_cli("job", "49x")
    assert typo.returncode == Exit.USAGE and "not a job number (140), a Slurm job id" in typo.stderr


@pytest.mark.parametrize("command", [("cancel",), ("logs", "--json"), ("gpu", "job")])
def test_other_commands_take_a_slurm_job_id(token_cli, alice, command):
    job = JobFactory(user=alice, slurm_job_id="987800")  # COMPLETED: cancel is refused after the lookup
    done = token_cli(*command, "987800")
    assert f"job 987800 is Slurm job 987800: portal job {job.pk}" in done.stderr
    if command[0] == "cancel":
        assert done.returncode == Exit.CONFLICT and "already completed" in done.stderr
    elif command[0] == "logs":
        assert done.returncode == 0 and done.json()["job"] == job.pk
    else:
        assert done.returncode == 0 and f"No GPU samples for Job {job.pk}" in done.stderr
