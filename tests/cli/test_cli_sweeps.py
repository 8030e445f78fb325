"""`gpuportal sweep start|list|show|cancel` against the live portal (no Slurm: the array's sbatch is
left out): a grid from --vary, a random draw with a range, a list file, a 400 naming the field."""

import json

import pytest

from gpuportal_cli.sweeps import space_of
from portal.sweeps.models import Sweep


@pytest.fixture
def no_sbatch(monkeypatch):
    monkeypatch.setattr("portal.jobs.tasks.job_submit_first.delay", lambda job_id: None)


def test_vary_lists_and_ranges():
    assert space_of(("lr=0.001,0.01", "batch-size=32,64", "opt=adam")) == {
        "lr": [0.001, 0.01], "batch-size": [32, 64], "opt": ["adam"]}
    assert space_of(("lr=1e-4:1e-1:log", "width=8:64")) == {
        "lr": {"min": 1e-4, "max": 0.1, "log": True}, "width": {"min": 8, "max": 64, "log": False}}


def test_start_show_list_and_refusal(token_cli, no_sbatch, partitions, tmp_path):
    done = token_cli("sweep", "start", "pytorch-train", "--vary", "lr=0.01,0.1", "--vary", "batch-size=32,64",
                     "-p", "args=--epochs 1", "-k", "2", "--objective", "accuracy/test", "--direction", "max",
                     "--name", "grid")
    assert done.returncode == 0, done.stderr
    assert "4 tasks, at most 2 at once" in done.stdout
    sweep = Sweep.objects.get()
    assert sweep.tasks[1] == {"lr": 0.01, "batch-size": 64} and "--array=0-3%2" in sweep.job.script

    shown = token_cli("sweep", "show", str(sweep.pk))
    assert shown.returncode == 0, shown.stderr
    assert "4 pending" in shown.stdout and "lr=0.1 batch-size=64" in shown.stdout
    listed = token_cli("--json", "sweep", "list")
    assert [row["id"] for row in listed.json()] == [sweep.pk]

    drawn = token_cli("--json", "sweep", "start", "pytorch-train", "--random", "3", "--seed", "1",
                      "--vary", "lr=1e-4:1e-1:log", "-k", "1", "--objective", "loss", "--direction", "min")
    assert drawn.returncode == 0, drawn.stderr
    assert len(drawn.json()["tasks"]) == 3

    tasks = tmp_path / "tasks.json"
    tasks.write_text(json.dumps([{"lr": 0.5}, {"lr": 0.25}]))
    listed_file = token_cli("--json", "sweep", "start", "pytorch-train", "--list", str(tasks), "-k", "1",
                            "--objective", "loss", "--direction", "min")
    assert listed_file.returncode == 0 and [t["values"] for t in listed_file.json()["tasks"]] == [
        {"lr": 0.5}, {"lr": 0.25}]

    refused = token_cli("--json", "sweep", "start", "pytorch-train", "--vary", "lr=0.1,0.2,0.3", "-k", "3",
                        "-p", "gpus=2", "--objective", "loss", "--direction", "min")
    assert refused.returncode != 0 and "concurrency" in refused.stdout + refused.stderr
