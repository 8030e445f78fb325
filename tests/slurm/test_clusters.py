"""Clusters as configuration (#38, slurm/clusters.py): the loader's validation names the file and the
field; one configured cluster leaves every command's argv exactly as before; several put `-M` (and
sacctmgr's `cluster=`) on each. The command runner is stubbed: it records argv instead of running
Slurm (the real thing: test_clusters_real.py)."""

import contextlib
import dataclasses
import os
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.core.management import call_command
from django.core.management.base import SystemCheckError

from slurm import parsing
from slurm.adapter import Slurm
from slurm.clusters import Cluster, ClustersError, clusters_from_settings, clusters_load
from slurm.rest import SlurmRest
from slurm.runner import SlurmRunner
from tests.clusters import DEFAULT, B


def folder(tmp_path: Path, **files: str) -> Path:
    directory = tmp_path / "clusters.d"
    directory.mkdir(mode=0o755, parents=True)
    for name, text in files.items():
        (directory / f"{name}.toml").write_text(text)
        (directory / f"{name}.toml").chmod(0o644)
    return directory


def fallback() -> Cluster:
    return Cluster(name="default", title="Cluster", default=True, adapter="sudo")


@pytest.mark.parametrize(("files", "where", "field"), [
    ({"a": 'name = "a"\ntitle = "A"\nhub = "x"\n'}, "a.toml", "hub: unknown field"),
    ({"a": 'title = "A"\n'}, "a.toml", "name: required"),
    ({"a": 'name = "Cluster B"\ntitle = "A"\n'}, "a.toml", "name: 'Cluster B' is not a Slurm ClusterName"),
    ({"a": 'name = "a"\n'}, "a.toml", "title: required"),
    ({"a": 'name = "a"\ntitle = "A"\ndefault = "yes"\n'}, "a.toml", "default: true or false"),
    ({"a": 'name = "a"\ntitle = "A"\nadapter = "rest"\n'}, "a.toml", "adapter: sudo or slurmrestd"),
    ({"a": 'name = "a"\ntitle = "A"\nadapter = "slurmrestd"\n'}, "a.toml", "rest_url: required"),
    ({"a": 'name = "a"\ntitle = "A"\nadapter = "slurmrestd"\nrest_url = "ftp://x"\n'}, "a.toml",
     "rest_url: an http:// or https:// address"),
    ({"a": 'name = "a"\ntitle = "A"\nrest_url = "http://x:6820"\n'}, "a.toml",
     'rest_url: only with adapter = "slurmrestd"'),
    ({"a": 'name = "a"\ntitle = "A"\nadapter = "slurmrestd"\nrest_url = "http://x"\ntoken_command = "t"\n'},
     "a.toml", "token_command: a list of strings"),
    ({"a": 'name = "a"\ntitle = "A"\nslurm_conf = "slurm.conf"\n'}, "a.toml",
     "slurm_conf: 'slurm.conf' is not the absolute path of a file"),
    ({"a": 'name = "a"\ntitle = "A"\nslurm_conf = "/nonexistent/slurm.conf"\n'}, "a.toml",
     "slurm_conf: '/nonexistent/slurm.conf' is not the absolute path of a file"),
    ({"a": 'name = "a"\ntitle = "A\n'}, "a.toml", "not a readable TOML file"),
    ({"a": DEFAULT, "b": DEFAULT.replace("true", "false")}, "b.toml", "name: 'gpuportal' is the name in"),
    ({"a": DEFAULT, "b": B.replace("title", "default = true\ntitle")}, "clusters.d", "default: exactly one"),
    ({"a": DEFAULT.replace("true", "false"), "b": B}, "clusters.d", "default: exactly one of 2"),
    ({"a": B + 'partitions = "gpu"\n'}, "a.toml", "partitions: a non-empty list of names"),
    ({"a": B + "partitions = []\n"}, "a.toml", "partitions: a non-empty list of names"),
    ({"a": B + 'environments = ["Torch 2"]\n'}, "a.toml", "environments: a non-empty list of names"),
    ({"a": B + "runtimes = [1]\n"}, "a.toml", "runtimes: a non-empty list of names"),
    ({"a": B + 'data_dir = "data"\n'}, "a.toml", "data_dir: 'data' is not a plain absolute path"),
    ({"a": B + 'data_dir = "/data/../etc"\n'}, "a.toml", "data_dir: '/data/../etc' is not a plain"),
    ({"a": B + 'spawner = "module load cuda"\n'}, "a.toml", "spawner: a table"),
    ({"a": B + '[spawner]\nmodules = ["cuda"]\n'}, "a.toml", "spawner.modules: unknown field"),
    ({"a": B + '[spawner]\nprologue = "module load cuda"\n'}, "a.toml", "spawner.prologue: a list"),
    ({"a": B + '[spawner]\nprologue = ["a\\nb"]\n'}, "a.toml", "spawner.prologue: a list"),
])
def test_each_bad_file_is_refused_naming_the_file_and_the_field(tmp_path, files, where, field):
    directory = folder(tmp_path, **files)
    with pytest.raises(ClustersError, match=r"clusters\.d") as error:
        clusters_load(directory, fallback)
    message = str(error.value)
    assert f"{where}: " in message and field in message, message


def test_a_folder_the_portal_could_change_is_refused(tmp_path, monkeypatch):
    directory = folder(tmp_path, a=DEFAULT)
    (directory / "a.toml").chmod(0o664)
    with pytest.raises(ClustersError, match=r"a\.toml: writable by its group or by anybody \(mode 664\)"):
        clusters_load(directory, fallback)
    (directory / "a.toml").chmod(0o644)
    os.chown(directory, 4242, -1)
    monkeypatch.setattr("slurm.clusters.os.geteuid", lambda: 4242)
    with pytest.raises(ClustersError, match=r"clusters\.d: owned by the portal's own account"):
        clusters_load(directory, fallback)


def test_a_file_in_place_of_the_folder_or_one_the_portal_cannot_list_is_refused(tmp_path, monkeypatch):
    (tmp_path / "clusters.d").write_text("")
    with pytest.raises(ClustersError, match=r"clusters\.d: not a folder"):
        clusters_load(tmp_path / "clusters.d", fallback)
    directory = folder(tmp_path / "unlisted", a=DEFAULT)
    def refused(path: Path) -> Iterator[Path]:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(Path, "iterdir", refused)
    with pytest.raises(ClustersError, match=r"clusters\.d: cannot be read: .*Permission denied"):
        clusters_load(directory, fallback)


def test_no_folder_or_an_empty_one_is_one_cluster_of_the_settings(tmp_path, settings):
    settings.CLUSTERS_DIR = str(tmp_path / "absent")
    settings.SLURM_ADAPTER, settings.SLURM_REST_URL = "slurmrestd", "http://rest.example:6820/"
    settings.SLURM_CLUSTER_NAME = "site"
    clusters = clusters_from_settings()
    assert not clusters.several and clusters.default == Cluster(
        name="site", title="Cluster", default=True, adapter="slurmrestd", rest_url="http://rest.example:6820")
    settings.CLUSTERS_DIR = str(folder(tmp_path))
    assert clusters_from_settings().all == (clusters.default,)
    settings.SLURM_ADAPTER = "rest"
    with pytest.raises(ImproperlyConfigured, match="SLURM_ADAPTER"):
        clusters_from_settings()
    settings.SLURM_ADAPTER, settings.SLURM_CLUSTER_NAME = "sudo", "Site B"
    with pytest.raises(ImproperlyConfigured, match="SLURM_CLUSTER_NAME"):
        clusters_from_settings()


def test_one_file_is_the_default_and_several_are_read_in_full(tmp_path):
    (only,) = clusters_load(folder(tmp_path / "one", a=B), fallback).all
    assert only.default and only.name == "cluster-b" and only.adapter == "sudo"
    rest = 'adapter = "slurmrestd"\nrest_url = "http://127.0.0.1:6940/"\ntoken_command = ["/bin/t", "-x"]\n'
    clusters = clusters_load(folder(tmp_path / "two", a=DEFAULT, b=B + rest), fallback)
    assert clusters.several and clusters.default.name == "gpuportal"
    assert clusters.get("cluster-b") == Cluster(
        name="cluster-b", title="Cluster B", default=False, adapter="slurmrestd",
        rest_url="http://127.0.0.1:6940", token_command=("/bin/t", "-x"),
        source=tmp_path / "two/clusters.d/b.toml")
    with pytest.raises(ValueError, match="no cluster 'c' is configured"):
        clusters.get("c")


OFFERS = ('partitions = ["gpu", "debug"]\nenvironments = ["torch"]\nruntimes = ["podman"]\n'
          'data_dir = "/srv/data-b/"\n[spawner]\nprologue = ["module load cuda/12.4", "ulimit -n 4096"]\n')


def test_what_a_cluster_offers_and_its_spawner_options_are_read_and_checked(tmp_path, settings):
    clusters = clusters_load(folder(tmp_path, a=DEFAULT, b=B + OFFERS), fallback)
    b, default = clusters.get("cluster-b"), clusters.default
    assert (b.partitions, b.environments, b.runtimes, b.data_dir) == (("gpu", "debug"), ("torch",),
                                                                      ("podman",), "/srv/data-b")
    assert b.spawner.prologue == ("module load cuda/12.4", "ulimit -n 4096")
    # Left out: everything the site has, and no options of its own.
    assert (default.partitions, default.environments, default.runtimes, default.data_dir) == (
        None, None, None, "")
    assert default.spawner.prologue == () and default.refusal("partition", "anything") == ""
    assert b.refusal("partition", "gpu") == b.refusal("runtime", "podman") == ""
    assert b.refusal("environment", "tensorflow") == (
        "The cluster Cluster B (cluster-b) does not offer the environment 'tensorflow'; it offers: torch.")
    assert "the runtime 'charliecloud'; it offers: podman." in b.refusal("runtime", "charliecloud")
    # Runtimes are the site's (CONTAINERS_RUNTIMES).
    settings.CLUSTERS_DIR = str(folder(tmp_path / "site", a=DEFAULT, b=B + 'runtimes = ["docker"]\n'))
    with pytest.raises(ImproperlyConfigured, match=r"b\.toml: runtimes: 'docker' is not one of the "
                                                  r"site's container runtimes \("):
        clusters_from_settings()


def test_manage_py_check_names_a_bad_file(tmp_path, settings):
    settings.CLUSTERS_DIR = str(folder(tmp_path, a=DEFAULT + "partitions = []\n"))
    with pytest.raises(SystemCheckError, match=r"cluster\.E001.*a\.toml: partitions: a non-empty list"):
        call_command("check")


# --- every command's argv, recorded ---

@dataclasses.dataclass(frozen=True)
class Recording(SlurmRunner):
    calls: list = dataclasses.field(default_factory=list)

    def run(self, command: str, args: list[str], *, as_user: str | None = None, stdin: str | None = None,
            secrets: dict | None = None) -> str:
        self.calls.append([command, *args])
        return "7;x\n" if command == "sbatch" else ""

    @contextlib.contextmanager
    def conversation(self, command: str, args: list[str], *, as_user: str | None) -> Iterator[object]:
        self.calls.append([command, *args])
        yield None


def every_command(slurm: Slurm) -> list[list[str]]:
    runner = Recording(Path("/usr/bin"), slurm_conf=slurm.runner.slurm_conf)
    slurm = dataclasses.replace(slurm, runner=runner)
    slurm.nodes()
    slurm.queue(finished=True)
    slurm.pending_starts()
    slurm.priorities()
    slurm.fair_shares()
    slurm.submit(script="#!/bin/bash\n", user="alice", comment="c")
    with slurm.submitter(user="alice", jobs=2):
        pass
    slurm.cancel(job_id="7", user="alice")
    slurm.cancel_as_operator(job_id="7")
    slurm.time_limit_set(job_id="7", minutes=5)
    slurm.accounting(job_ids=["7"])
    slurm.accounting(since=datetime(2026, 1, 1, tzinfo=UTC), users=["alice"])
    slurm.gpu_usage(["7"])
    slurm.efficiency(["7"])
    slurm.gpu_budgets(accounts=["p1"])
    slurm.account_members(accounts=["p1"])
    slurm.account_add(account="p1", parent="projects", description="P")
    slurm.account_users_add(account="p1", users=["alice"])
    slurm.account_users_remove(account="p1", users=["alice"])
    slurm.account_budget_set(account="p1", minutes=60)
    return runner.calls


D = "<D>"
SACCT = ["--noheader", "--parsable", f"--delimiter={D}"]
# What each command's argv was before #38 (the delimiter fixed), in every_command's order.
TODAY = [
    ["sinfo", "--noheader", "--Node", "-O", parsing.sinfo_format(D)],
    ["squeue", "--noheader", "--all", "--states=all", "-o", parsing.squeue_format(D)],
    ["squeue", "--noheader", "--all", "--start", "-o", parsing.squeue_start_format(D)],
    ["sprio", "--noheader", "-o", parsing.sprio_format(D)],
    ["sshare", "--all", "--noheader", "--parsable2", "--format", ",".join(parsing.SSHARE_FIELDS)],
    ["sbatch", "--parsable", "--comment=c"],
    ["sbatch-batch"],
    ["scancel", "7"],
    ["scancel", "7"],
    ["scontrol", "update", "JobId=7", "TimeLimit=5"],
    ["sacct", *SACCT, "--allocations", "--format", ",".join(parsing.SACCT_FIELDS), "--jobs", "7"],
    ["sacct", *SACCT, "--allocations", "--format", ",".join(parsing.SACCT_FIELDS),
     "--starttime", "2026-01-01T00:00:00", "--endtime", "now", "--user", "alice"],
    ["sacct", *SACCT, "--jobs", "7", "--format", ",".join(parsing.GPU_USAGE_FIELDS)],
    ["sacct", *SACCT, "--format", ",".join(parsing.EFFICIENCY_FIELDS), "--jobs", "7"],
    ["sshare", "--noheader", "--parsable2", "--accounts", "p1", "--format", ",".join(parsing.BUDGET_FIELDS)],
    ["sacctmgr", "--noheader", "--parsable2", "list", "assoc", "account=p1", "format=Account,User"],
    ["sacctmgr", "--immediate", "add", "account", "p1", "Parent=projects", "Description=P",
     "Organization=p1"],
    ["sacctmgr", "--immediate", "add", "user", "alice", "account=p1"],
    ["sacctmgr", "--immediate", "delete", "user", "alice", "account=p1"],
    ["sacctmgr", "--immediate", "modify", "account", "p1", "set", "GrpTRESMins=gres/gpu=60"],
]


@pytest.fixture(autouse=True)
def fixed_delimiter(monkeypatch):
    monkeypatch.setattr(parsing, "new_delimiter", lambda: D)


@pytest.mark.parametrize("files", [None, {}, {"a": DEFAULT}, {"b": B}])
@pytest.mark.parametrize("adapter", ["sudo", "slurmrestd"])
def test_with_one_cluster_every_command_is_exactly_as_before(tmp_path, settings, files, adapter):
    settings.CLUSTERS_DIR = str(tmp_path / "absent" if files is None else folder(tmp_path, **files))
    settings.SLURM_ADAPTER = adapter
    slurm = Slurm.from_settings()
    assert slurm.cluster is None and isinstance(slurm, SlurmRest) == (adapter == "slurmrestd" and not files)
    # slurmrestd serves submit, cancel, queue, accounting and time limits: its commands are the rest.
    calls = every_command(Slurm(slurm.runner) if isinstance(slurm, SlurmRest) else slurm)
    assert calls == TODAY


def test_with_several_clusters_every_command_names_its_cluster(tmp_path, settings):
    rest = 'adapter = "slurmrestd"\nrest_url = "http://127.0.0.1:6940"\n'
    settings.CLUSTERS_DIR = str(folder(tmp_path, a=DEFAULT, b=B + rest))
    default, other = Slurm.from_settings(), Slurm.from_settings("cluster-b")
    assert (type(default), default.cluster) == (Slurm, "gpuportal")
    assert isinstance(other, SlurmRest) and other.cluster == "cluster-b" and other.url == "http://127.0.0.1:6940"
    expected = []
    for call in TODAY:
        if call[0] == "sacctmgr":
            at = call.index("set") if "set" in call else len(call) - (call[3] == "list")
            expected.append([*call[:at], "cluster=cluster-b", *call[at:]])
        else:
            expected.append([call[0], "-M", "cluster-b", *call[1:]])
    assert every_command(Slurm(other.runner, "cluster-b")) == expected


def test_a_clusters_own_slurm_conf_replaces_dash_m_but_not_sacctmgrs_cluster(tmp_path, settings):
    conf = tmp_path / "slurm-b.conf"
    conf.write_text("ClusterName=cluster-b\n")
    settings.CLUSTERS_DIR = str(folder(tmp_path, a=DEFAULT, b=B + f'slurm_conf = "{conf}"\n'))
    other = Slurm.from_settings("cluster-b")
    assert other.runner.slurm_conf == conf and other.runner._environment()["SLURM_CONF"] == str(conf)
    assert Slurm.from_settings().runner.slurm_conf is None
    # As a user through sudo (sbatch, sbatch-batch, scancel) `-M` still: sudo may drop SLURM_CONF.
    as_user = {"sbatch": 5, "sbatch-batch": 6, "scancel": 7}
    expected = [[call[0], "-M", "cluster-b", *call[1:]] if as_user.get(call[0]) == n else call
                for n, call in enumerate(TODAY) if call[0] != "sacctmgr"]
    calls = every_command(other)
    assert [call for call in calls if call[0] != "sacctmgr"] == expected
    assert all("cluster=cluster-b" in call for call in calls if call[0] == "sacctmgr")


def test_sshare_with_dash_m_prints_a_cluster_heading_that_is_no_row():
    # As Slurm 22.05.8's `sshare -M cluster-b --noheader --parsable2` printed it on the bed.
    budgets = parsing.parse_budgets("CLUSTER: cluster-b\np1||gres/gpu=77|cpu=0,gres/gpu=3\n")
    assert budgets == parsing.Parsed(rows=[parsing.GpuBudget("p1", 77, 3)])
    shares = parsing.parse_sshare("CLUSTER: cluster-b\nroot|||0.000000|0|0.000000|\n")
    assert shares.malformed == 0 and [row.account for row in shares.rows] == ["root"]
