"""Sweeps without a cluster: expansion, validation before anything is submitted (400 naming the
field), the one array script (run by bash: each task gets its own quoted arguments), the poll
cycle's task states, the best run, and another user's sweep (404)."""

import json
import subprocess
from datetime import UTC, datetime

import pytest
from rest_framework.test import APIClient

from portal.accounts.services import api_token_create
from portal.jobs.models import JobState
from portal.jobs.services.arrays import accounting_arrays_fold, queue_arrays_fold
from portal.sweeps.models import Sweep
from portal.sweeps.selectors import sweep_view
from portal.sweeps.services import SweepSpec, sweep_tasks, sweeps_follow
from portal.tracking.models import Experiment, LatestMetric, Run, Tag
from slurm.parsing import AccountedJob, QueuedJob, array_tasks
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db

GRID = {"template": "pytorch-train", "parameters": {"args": "--epochs 1 --train-limit 300"},
        "method": "grid", "space": {"lr": [0.01, 0.1], "batch-size": [16, 32, 64, 128]},
        "concurrency": 4, "objective": "accuracy/test", "direction": "max"}


@pytest.fixture
def no_sbatch(monkeypatch):
    sent = []
    monkeypatch.setattr("portal.jobs.tasks.job_submit_first.delay", sent.append)
    return sent


def test_array_task_ids_as_squeue_and_sacct_print_them():
    assert array_tasks("123_4") == ("123", [4])
    assert array_tasks("123_[5-7%4]") == ("123", [5, 6, 7])
    assert array_tasks("123_[0,2-3]") == ("123", [0, 2, 3])
    assert array_tasks("123") is None and array_tasks("123.batch") is None


def _queued(job_id, state):
    return QueuedJob(job_id=job_id, partition="gpu", state=state, user="alice", reason="", node_count=1,
                     cpus=1, tres_per_node="", nodes="n1", start_time=None, end_time=None, time_limit=None,
                     comment="gpuportal:x", name="s")


def _accounted(job_id, state, end=True):
    when = datetime(2026, 1, 1, tzinfo=UTC)
    return AccountedJob(job_id=job_id, state=state, exit_code=0, exit_signal=0, submit_time=when,
                        start_time=when, end_time=when if end else None, elapsed_seconds=60, nodes="n1",
                        gpus=1, reason="", comment="", submit_line="", partition="gpu", user="alice")


def test_an_array_is_one_job_to_the_jobs_state_machine():
    queue = queue_arrays_fold([_queued("9", "RUNNING"), _queued("10_[4-7%4]", "PENDING"),
                               _queued("10_0", "COMPLETED"), _queued("10_1", "RUNNING")])
    assert {(row.job_id, row.state) for row in queue} == {("9", "RUNNING"), ("10", "RUNNING")}
    done = accounting_arrays_fold([_accounted("10_0", "COMPLETED"), _accounted("10_1", "COMPLETED")])
    assert [(row.job_id, row.state, row.elapsed_seconds) for row in done] == [("10", "COMPLETED", 120)]
    failed = accounting_arrays_fold([_accounted("10_0", "COMPLETED"), _accounted("10_1", "FAILED")])
    assert failed[0].state == "FAILED"
    live = accounting_arrays_fold([_accounted("10_0", "COMPLETED"), _accounted("10_1", "RUNNING", end=False)])
    assert live[0].state == "RUNNING" and live[0].end_time is None


def test_grid_random_and_list_expand():
    spec = SweepSpec(**{**GRID, "name": ""})
    tasks = sweep_tasks(spec)
    assert len(tasks) == 8 and tasks[0] == {"lr": 0.01, "batch-size": 16} and tasks[-1] == {"lr": 0.1,
                                                                                           "batch-size": 128}
    random_spec = SweepSpec(**{**GRID, "method": "random", "samples": 5, "seed": 7,
                               "space": {"lr": {"min": 1e-4, "max": 1e-1, "log": True},
                                         "batch-size": [32, 64]}})
    drawn = sweep_tasks(random_spec)
    assert drawn == sweep_tasks(random_spec) and len(drawn) == 5  # the seed makes it reproducible
    assert all(1e-4 <= task["lr"] <= 1e-1 and task["batch-size"] in (32, 64) for task in drawn)
    listed = SweepSpec(**{**GRID, "method": "list", "space": [{"lr": 0.5}, {"lr": 0.25, "seed": 3}]})
    assert sweep_tasks(listed) == [{"lr": 0.5}, {"lr": 0.25, "seed": 3}]


@pytest.mark.parametrize(("change", "field", "words"), [
    ({"space": {"lr": list(range(1001))}}, "space", "at most 1000"),
    ({"concurrency": 5, "parameters": {"gpus": 2}}, "concurrency", "over your group's 4 GPUs"),
    ({"parameters": {"time_limit": 100000}}, "parameters", "time_limit"),
    ({"space": {"lr": ["0.1; rm -rf ~"]}}, "space", "not allowed"),
    ({"space": {"gpus": [1, 2]}}, "space", "template parameter"),
    ({"space": {"--lr": [1]}}, "space", "no option name"),
    ({"template": "custom", "parameters": {"commands": "true"}}, "template", "cannot be swept"),
    ({"method": "random", "samples": None}, "samples", "random"),
    ({"direction": "up"}, "direction", ""),
    ({"objective": "a\nb"}, "objective", ""),
])
def test_bad_sweeps_are_refused_naming_the_field_before_any_sbatch(token_client, partitions, no_sbatch,
                                                                   change, field, words):
    response = token_client.post("/api/v1/sweeps/", {**GRID, **change}, format="json")
    assert response.status_code == 400, response.json()
    body = response.json()
    assert field in json.dumps(body) and words in json.dumps(body), body
    assert not no_sbatch and not Sweep.objects.exists()


def test_one_array_script_each_task_its_own_quoted_arguments(token_client, partitions, no_sbatch, tmp_path,
                                                             django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
            response = token_client.post("/api/v1/sweeps/", {**GRID, "space": {"lr": [0.01, 0.1],
                                                                           "batch-size": [16, 32, 64, 128],
                                                                           "note": ["x=1,y:2@z"]}},
                                     format="json")
    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["progress"] == {"pending": 8, "running": 0, "done": 0, "failed": 0, "cancelled": 0}
    sweep = Sweep.objects.get(pk=body["sweep"]["id"])
    script = sweep.job.script
    assert no_sbatch == [sweep.job.pk]  # one job, one sbatch for all eight tasks
    assert script.count("#SBATCH --array=0-7%4") == 1 and "#SBATCH --open-mode=append" in script
    # The header ends where sbatch stops reading it: the array line is among the #SBATCH lines.
    header = script.split("\n\n", 1)[0].splitlines()
    assert all(line.startswith(("#!", "#SBATCH ")) for line in header) and "#SBATCH --array=0-7%4" in header
    # The tasks' part of the script, run by bash as task 5 would run it.
    start = script.index("case ${SLURM_ARRAY_TASK_ID")
    end = script.index("\n", script.index("export MLFLOW_RUN_TAGS"))
    probe = tmp_path / "probe.sh"
    probe.write_text(script[start:end] + '\nprintf "%s\\n" "${GPUPORTAL_TASK_ARGS[@]}" '
                     '"$MLFLOW_EXPERIMENT_NAME" "$MLFLOW_RUN_NAME" "$MLFLOW_RUN_TAGS"\n')
    out = subprocess.run(["bash", str(probe)], env={"SLURM_ARRAY_TASK_ID": "5"}, capture_output=True,
                         text=True, check=True).stdout.splitlines()
    assert out[:6] == ["--lr", "0.1", "--batch-size", "32", "--note", "x=1,y:2@z"]
    assert out[6:8] == [f"sweep-{sweep.pk}", f"sweep-{sweep.pk}-task-5"]
    assert json.loads(out[8]) == {"gpuportal.sweep": str(sweep.pk), "gpuportal.sweep_task": "5"}
    assert 'GPUPORTAL_TASK_ARGS[@]+"${GPUPORTAL_TASK_ARGS[@]}"' in script  # the template's hook


def test_progress_best_run_and_another_users_sweep(token_client, partitions, no_sbatch):
    created = token_client.post("/api/v1/sweeps/", GRID, format="json").json()
    sweep = Sweep.objects.get(pk=created["sweep"]["id"])
    sweep.job.slurm_job_id, sweep.job.state = "77", JobState.RUNNING
    sweep.job.save()
    assert sweeps_follow(queue=[_queued("77_0", "COMPLETED"), _queued("77_1", "FAILED"),
                                _queued("77_2", "RUNNING"), _queued("77_[3-7%4]", "PENDING")]) == 1
    experiment = Experiment.objects.create(owner=sweep.user, name=sweep.experiment_name,
                                           artifact_location="/x", creation_time=0, last_update_time=0)
    for index, accuracy in [(0, 0.9), (2, 0.95)]:
        run = Run.objects.create(run_id=f"r{index}", experiment=experiment, owner=sweep.user,
                                 run_name=f"t{index}", start_time=index, artifact_uri="/x", job=sweep.job)
        Tag.objects.create(run=run, key="gpuportal.sweep_task", value=str(index))
        LatestMetric.objects.create(run=run, key="accuracy/test", value=accuracy, timestamp=0, step=0)
    body = token_client.get(f"/api/v1/sweeps/{sweep.pk}/").json()
    assert body["progress"] == {"pending": 5, "running": 1, "done": 1, "failed": 1, "cancelled": 0}
    assert body["best"]["index"] == 2 and body["best"]["metrics"] == {"accuracy/test": 0.95}
    assert [t["best"] for t in body["tasks"]].count(True) == 1
    assert body["tasks"][0]["values"] == {"lr": 0.01, "batch-size": 16}
    view = sweep_view(sweep=sweep)
    assert view.best is not None and view.best.run_id == "r2"

    page = token_client.get(f"/sweeps/{sweep.pk}/?sort=-accuracy/test")
    assert page.status_code in (200, 302)
    listed = token_client.get("/api/v1/sweeps/").json()
    assert [s["id"] for s in listed["results"]] == [sweep.pk]

    bob = APIClient()
    _, key = api_token_create(user=UserFactory(username="bob"), name="t")
    bob.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    assert bob.get(f"/api/v1/sweeps/{sweep.pk}/").status_code == 404
    assert bob.post(f"/api/v1/sweeps/{sweep.pk}/cancel/").status_code == 404
    assert bob.get("/api/v1/sweeps/").json()["results"] == []


def test_the_composers_sweep_button(client, user, partitions, no_sbatch, django_capture_on_commit_callbacks):
    client.force_login(user)
    page = client.get("/jobs/new/pytorch-train/").content.decode()
    assert 'id="sweep-options"' in page and 'formaction="/sweeps/new/pytorch-train/"' in page
    form = {"name": "from the composer", "entrypoint": "templates/mnist_ddp.py", "args": "--epochs 1",
            "gpus": "1", "time_limit": "10",
            "sweep_space": "lr=0.01,0.1\r\nbatch-size=32,64", "sweep_method": "grid",
            "sweep_concurrency": "2", "sweep_objective": "accuracy/test", "sweep_direction": "max"}
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post("/sweeps/new/pytorch-train/", form)
    assert Sweep.objects.exists(), [str(m) for m in response.wsgi_request._messages]
    sweep = Sweep.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/sweeps/{sweep.pk}/"
    assert sweep.tasks == [{"lr": 0.01, "batch-size": 32}, {"lr": 0.01, "batch-size": 64},
                           {"lr": 0.1, "batch-size": 32}, {"lr": 0.1, "batch-size": 64}]
    assert sweep.name == "from the composer" and no_sbatch == [sweep.job_id]
    refused = client.post("/sweeps/new/pytorch-train/", {**form, "sweep_concurrency": "9", "gpus": "2"},
                          follow=True)
    assert "Sweep, concurrency" in refused.content.decode() and Sweep.objects.count() == 1


def test_an_arrays_tasks_are_not_second_jobs_with_its_comment():
    """Every task of an array carries the array's comment: none is cancelled as a duplicate, while a
    real second Slurm job with the comment still is; the job runs while a task does."""
    from django.utils import timezone

    from portal.jobs.services.sync import SyncReport, jobs_apply_queue
    from tests.factories import JobFactory

    job = JobFactory(state=JobState.PENDING, slurm_job_id="55", slurm_submitted_at=timezone.now())
    cancelled = []

    class Cancels:
        def cancel(self, *, job_id, user):
            cancelled.append(job_id)

    def row(job_id, state):
        return QueuedJob(**{**_queued(job_id, state).__dict__, "comment": job.slurm_comment,
                            "user": job.user.username})

    report = SyncReport()
    jobs_apply_queue(queue=[row("55_0", "RUNNING"), row("55_[1-3%1]", "PENDING"), row("56", "PENDING")],
                     queried_at=timezone.now(), report=report, slurm=Cancels())
    assert cancelled == ["56"]
    job.refresh_from_db()
    assert job.state == JobState.RUNNING


def test_an_inactive_users_array_is_cancelled_by_its_own_id():
    from portal.poll.deprovisioned import _strays_cancel

    UserFactory(username="carol", is_active=False)
    cancelled = []

    class Operator:
        def cancel_as_operator(self, *, job_id):
            cancelled.append(job_id)

    rows = [QueuedJob(**{**_queued(job_id, state).__dict__, "user": "carol"})
            for job_id, state in [("88_0", "RUNNING"), ("88_[1-7%2]", "PENDING")]]
    assert _strays_cancel(rows, Operator()) == 1 and cancelled == ["88"]
