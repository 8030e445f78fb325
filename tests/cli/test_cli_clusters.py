"""`--cluster` (#38): which cluster the CLI's work goes to. The command's --cluster, then the global
one or GPUPORTAL_CLUSTER, then the config file's default (`gpuportal default-cluster`), else none is
sent and the portal uses its default: a one-cluster site is asked nothing new. Jobs go through the live
portal with two cluster files; sessions and sweeps are checked at the request they send."""

import json

import pytest
from click.testing import CliRunner

from gpuportal_cli import config
from gpuportal_cli.client import Client, Exit
from gpuportal_cli.main import app
from portal.jobs.models import Job
from tests.cli.conftest import login
from tests.clusters import clusters_dir

CUSTOM = ("submit", "custom", "-p", "commands=true", "--gpus", "0", "--time", "5")


@pytest.fixture
def two_clusters(tmp_path, settings):
    """gpuportal (the default) and cluster-b, as two files of CLUSTERS_DIR (the live server is a thread
    of this process: it reads them)."""
    settings.CLUSTERS_DIR = clusters_dir(tmp_path)


@pytest.fixture
def no_sbatch(monkeypatch):
    monkeypatch.setattr("portal.jobs.tasks.job_submit_first.delay", lambda job_id: None)


def test_submit_goes_to_the_cluster_named_by_option_environment_or_default(
        token_cli, no_sbatch, partitions, two_clusters):
    done = token_cli(*CUSTOM, "--name", "plain")
    assert done.returncode == 0, done.stderr
    assert " on " not in done.stdout  # nothing named: output as on a one-cluster site
    done = token_cli(*CUSTOM, "--name", "option", "--cluster", "cluster-b")
    assert done.returncode == 0 and " (option) on cluster-b: " in done.stdout, done.stdout
    assert token_cli("--cluster", "cluster-b", *CUSTOM, "--name", "global").returncode == 0
    assert token_cli(*CUSTOM, "--name", "env", GPUPORTAL_CLUSTER="cluster-b").returncode == 0
    # The command's own --cluster wins over the environment.
    assert token_cli(*CUSTOM, "--name", "wins", "--cluster", "gpuportal",
                     GPUPORTAL_CLUSTER="cluster-b").returncode == 0
    assert dict(Job.objects.values_list("name", "cluster")) == {
        "plain": "gpuportal", "option": "cluster-b", "global": "cluster-b", "env": "cluster-b",
        "wins": "gpuportal"}
    # The list says which job is where once they are on several clusters; `job` always does.
    listed = token_cli("jobs").stdout.splitlines()
    assert listed[0].split("\t")[4] == "CLUSTER" and {line.split("\t")[4] for line in listed[1:]} == {
        "gpuportal", "cluster-b"}
    shown = dict(line.split("\t", 1) for line in token_cli("job", str(Job.objects.get(name="env").pk))
                 .stdout.splitlines())
    assert shown["Cluster"] == "cluster-b"


def test_an_unknown_or_malformed_cluster_is_refused(token_cli, no_sbatch, partitions, two_clusters):
    unknown = token_cli("--json", *CUSTOM, "--cluster", "mars")
    assert unknown.returncode == Exit.INVALID and "mars" in unknown.error()["fields"]["cluster"][0]
    malformed = token_cli(*CUSTOM, "--cluster", "Cluster B")
    assert malformed.returncode == Exit.USAGE and "is not a cluster's name" in malformed.stderr
    assert not Job.objects.exists()


def test_a_batch_sends_the_cluster_with_each_job_that_names_none(
        token_cli, no_sbatch, partitions, two_clusters, tmp_path):
    job = {"template": "custom", "parameters": {"commands": "true", "gpus": 0, "time_limit": 5}}
    batch = tmp_path / "jobs.json"
    batch.write_text(json.dumps([{**job, "name": "mine"}, {**job, "name": "own", "cluster": "gpuportal"}]))
    done = token_cli("--json", "submit", "--batch", str(batch), "--cluster", "cluster-b")
    assert done.returncode == 0, done.stderr
    assert [result["job"]["cluster"] for result in done.json()["results"]] == ["cluster-b", "gpuportal"]


def test_the_default_cluster_is_kept_with_its_portal(logged_in, no_sbatch, partitions, two_clusters):
    cli = logged_in
    assert "No default cluster" in cli("default-cluster").stdout
    assert cli("default-cluster", "cluster-b").returncode == 0
    assert 'cluster = "cluster-b"' in cli.config_file.read_text()
    assert cli("--json", "default-cluster").json() == {"url": cli.url, "cluster": "cluster-b"}
    assert cli(*CUSTOM, "--name", "by-default").returncode == 0
    assert Job.objects.get(name="by-default").cluster == "cluster-b"
    # Logging in again to the same portal keeps it; logging out too.
    assert login(cli).returncode == 0 and cli("--json", "default-cluster").json()["cluster"] == "cluster-b"
    assert cli("logout").returncode == 0 and 'cluster = "cluster-b"' in cli.config_file.read_text()
    assert cli("default-cluster", "--clear").returncode == 0
    assert "cluster" not in cli.config_file.read_text()
    assert cli("default-cluster", "x", "--clear").returncode == Exit.USAGE


def test_the_stored_default_is_never_used_with_another_portal(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    for name in (config.URL_ENV, config.TOKEN_ENV, config.CLUSTER_ENV):
        monkeypatch.delenv(name, raising=False)
    stored = config.Config(url="https://portal.example", token="t", cluster="cluster-b")
    assert config.resolve(stored, url=None).cluster == "cluster-b"
    assert config.resolve(stored, url="https://elsewhere.example").cluster == ""
    assert config.resolve(stored, url="https://elsewhere.example", cluster="other").cluster == "other"
    monkeypatch.setenv(config.CLUSTER_ENV, "from-env")
    assert config.resolve(stored, url=None).cluster == "from-env"
    assert config.resolve(stored, url=None, cluster="option").cluster == "option"
    with pytest.raises(config.ConfigError):
        config.resolve(stored, url=None, cluster="-bad")


@pytest.fixture
def sent(monkeypatch):
    """The bodies the CLI POSTs, each answered as the portal would (an empty object echoing them)."""
    bodies: list[tuple[str, dict]] = []

    def request(self, method, path, *, json=None, **_):
        bodies.append((path, json))
        return {"sweep": {"id": 1, "name": "s", "task_count": 2, "concurrency": 1}} if path == "/sweeps/" \
            else {"name": json.get("name", ""), "state": "starting", "status": "Queued", "url": ""}

    monkeypatch.setattr(Client, "request", request)
    monkeypatch.setattr(Client, "get", lambda self, path, **_: {"templates": []})
    return bodies


@pytest.mark.parametrize("where", [["session", "start", "--name", "b", "--cluster", "cluster-b"],
                                   ["--cluster", "cluster-b", "session", "start", "--name", "b"]])
def test_session_start_sends_the_cluster(sent, where):
    env = {config.URL_ENV: "http://127.0.0.1:9", config.TOKEN_ENV: "t", "XDG_CONFIG_HOME": "/nonexistent"}
    result = CliRunner().invoke(app, where, env=env)
    assert result.exit_code == 0, result.output
    assert sent == [("/sessions/", {"name": "b", "cluster": "cluster-b"})]
    CliRunner().invoke(app, ["session", "start", "--name", "b"], env=env)
    assert "cluster" not in sent[-1][1]  # none named: the portal's default


def test_sweep_start_sends_the_cluster(sent):
    env = {config.URL_ENV: "http://127.0.0.1:9", config.TOKEN_ENV: "t", "XDG_CONFIG_HOME": "/nonexistent",
           config.CLUSTER_ENV: "cluster-b"}
    result = CliRunner().invoke(app, ["sweep", "start", "custom", "--vary", "lr=1,2", "-k", "1",
                                      "--objective", "loss", "--direction", "min"], env=env)
    assert result.exit_code == 0, result.output
    assert sent[0][0] == "/sweeps/" and sent[0][1]["cluster"] == "cluster-b"


def test_clusters_lists_each_by_the_name_cluster_takes(token_cli, partitions, two_clusters):
    lines = [line.split("\t") for line in token_cli("clusters").stdout.splitlines()]
    assert lines[0][:3] == ["NAME", "TITLE", "DEFAULT"]
    assert [row[:3] for row in lines[1:]] == [["gpuportal", "GPU cluster", "yes"],
                                              ["cluster-b", "Cluster B", ""]]
    assert [row["name"] for row in token_cli("--json", "clusters").json()] == ["gpuportal", "cluster-b"]
