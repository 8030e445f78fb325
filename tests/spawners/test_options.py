"""The spawner rebuilds every option server-side: limits (the portal's published policy), unknown
keys, the batch script it writes."""

import tempfile
from pathlib import Path

import pytest
from tornado import web

from portal.policy.rules import GroupRules, PartitionRules, Policy, Profile, Usage
from spawners.options import OptionError, rebuild_options
from spawners.slurm_spawner import PortalSlurmSpawner, apply_portal_options
from tests.spawners.test_poller import run

POLICY = Policy(
    partitions={"gpu": PartitionRules(name="gpu", nodes=1, gpus_per_node=4, max_hours=168),
                "debug": PartitionRules(name="debug", nodes=1, gpus_per_node=2, max_hours=1)},
    default_partition="gpu", groups={"*": GroupRules(max_gpus=4)},
    profiles={"small": Profile(name="small", title="1 GPU · 2 h", partition="gpu", gpus=1, hours=2)},
)
# What the portal publishes (portal.policy.services.policy_publish), for the spawners made here.
POLICY_FILE = Path(tempfile.mkdtemp(prefix="gpuportal-spawner-test-")) / "policy.json"
POLICY_FILE.write_text(POLICY.to_json())


def rebuild(raw, gpus_in_use=0, sessions=0):
    return rebuild_options(raw, policy=POLICY, groups=["portal-users"],
                           usage=Usage(sessions=sessions, gpus=gpus_in_use))


def test_defaults_are_one_gpu_eight_hours_on_the_default_partition():
    options = rebuild({})
    assert (options.partition, options.gpus, options.hours, options.nodes) == ("gpu", 1, 8.0, 1)
    assert (options.cpus, options.mem_gb) == (8, 48)


def test_cpus_and_memory_follow_the_gpus():
    options = rebuild({"gpus": 3})
    assert (options.cpus, options.mem_gb) == (24, 144)
    assert (rebuild({"gpus": 0}).cpus, rebuild({"gpus": 0}).mem_gb) == (2, 8)  # a CPU-only session


def test_a_profile_gives_the_size_and_explicit_options_override_it():
    options = rebuild({"profile": "small"})
    assert (options.gpus, options.hours, options.as_user_options()["profile"]) == (1, 2, "small")
    assert rebuild({"profile": "small", "hours": 3}).hours == 3


def test_default_time_is_capped_by_the_partition():
    assert rebuild({"partition": "debug"}).hours == 1


def test_strings_from_forms_are_accepted():
    assert rebuild({"gpus": "2", "hours": "1.5"}).gpus == 2


@pytest.mark.parametrize(("raw", "message"), [
    ({"gpus": 64}, "has at most 4 GPUs per node"),
    ({"gpus": -1}, "cannot be negative"),
    ({"gpus": True}, "whole number"),
    ({"gpus": 1.5}, "whole number"),
    ({"partition": "nope"}, "Unknown partition"),
    ({"hours": 0}, "more than 0"),
    ({"hours": -3}, "more than 0"),
    ({"hours": "nan"}, "must be a number"),
    ({"partition": "debug", "hours": 2}, "at most 1 h"),
    ({"nodes": 2}, "1 to 1 node"),
    ({"profile": "huge"}, "Unknown profile"),
    ({"partition": ["gpu"]}, "partition must be a name"),
    ({"cmd": "/bin/sh -c evil"}, "Unknown option(s): cmd"),
    ({"options": "--uid=0"}, "Unknown option(s): options"),
    ({"prologue": "rm -rf ~"}, "Unknown option(s): prologue"),
    ({"gres": "gpu:64"}, "Unknown option(s): gres"),
    ({"comment": "gpuportal-session:x\n#SBATCH --uid=0"}, "the portal's key"),
    ({"comment": "gpuportal:6f1c2a3b-1111-4222-8333-444455556666"}, "the portal's key"),
    (["gpus"], "must be an object"),
])
def test_bad_options_are_refused(raw, message):
    with pytest.raises(OptionError, match=message.replace("(", r"\(").replace(")", r"\)")):
        rebuild(raw)


def test_quota_counts_the_users_other_servers():
    with pytest.raises(OptionError, match="limit is 4 GPUs across your sessions; 3 are in use"):
        rebuild({"gpus": 2}, gpus_in_use=3)
    assert rebuild({"gpus": 1}, gpus_in_use=3).gpus == 1
    with pytest.raises(OptionError, match="limit is 3 sessions at once"):
        rebuild({}, sessions=3)


class FakeGroup:
    def __init__(self, name):
        self.name = name


class FakeUser:
    name = "alice"

    def __init__(self):
        self.spawners = {}
        self.groups = [FakeGroup("portal-users")]


def make_spawner(**config):
    spawner = PortalSlurmSpawner(user=FakeUser(), **{"policy_file": str(POLICY_FILE), **config})
    spawner.user.spawners["x"] = spawner
    return spawner


def test_hook_rebuilds_user_options_and_the_slurm_request():
    spawner = make_spawner()
    apply_portal_options(spawner, {"gpus": 2, "partition": "debug", "hours": 0.5})
    assert spawner.user_options == {"partition": "debug", "gpus": 2, "hours": 0.5, "nodes": 1}
    assert (spawner.req_partition, spawner.req_runtime, spawner.req_gres) == ("debug", "30", "gpu:2")
    assert (spawner.req_nprocs, spawner.req_memory) == ("16", "96G")


def test_hook_turns_refusals_into_http_400():
    spawner = make_spawner()
    with pytest.raises(web.HTTPError) as error:
        apply_portal_options(spawner, {"gpus": 64})
    assert error.value.status_code == 400
    assert error.value.log_message == "Partition gpu has at most 4 GPUs per node."


def test_batch_script_has_only_rebuilt_values(tmp_path):
    spawner = make_spawner(templates_dir=str(tmp_path / "tpl"), data_dir="/data")
    apply_portal_options(spawner, {"gpus": 1})
    spawner.req_keepvars = "JUPYTERHUB_API_TOKEN"  # normally from the hub's environment for the job
    subvars = spawner.get_req_subvars()
    subvars["cmd"] = spawner.cmd_formatted_for_batch()
    subvars.update(spawner.user_options)  # what batchspawner does before rendering
    script = run(spawner._get_batch_script(**subvars))
    assert "#SBATCH --gres=gpu:1\n" in script
    assert "#SBATCH --partition=gpu\n" in script
    assert "#SBATCH --time=480\n" in script
    assert "#SBATCH --cpus-per-task=8\n" in script and "#SBATCH --mem=48G\n" in script
    assert f"cp -rn {tmp_path}/tpl/. \"$HOME/templates/\"" in script
    assert 'ln -s /data "$HOME/data"' in script
    assert "/spawners/singleuser/launch.py " in script
    assert "--comment" not in script  # a server started at the hub's own API has no key


def test_the_sessions_key_is_its_jobs_comment_and_not_a_user_option():
    """#32: the portal finds a session's Slurm job, and cleans it up, by this key (never by name)."""
    key = "gpuportal-session:6f1c2a3b-1111-4222-8333-444455556666"
    spawner = make_spawner()
    apply_portal_options(spawner, {"gpus": 1, "comment": key})
    spawner.req_keepvars = "JUPYTERHUB_API_TOKEN"
    subvars = spawner.get_req_subvars()
    subvars["cmd"] = spawner.cmd_formatted_for_batch()
    subvars.update(spawner.user_options)
    assert f"#SBATCH --comment={key}\n" in run(spawner._get_batch_script(**subvars))
    assert "comment" not in spawner.user_options


def test_a_slurm_refusal_is_a_400_with_slurms_message(monkeypatch):
    spawner = make_spawner()
    apply_portal_options(spawner, {"gpus": 1})
    monkeypatch.setattr(PortalSlurmSpawner, "get_req_subvars", lambda self: {"username": "alice"})
    monkeypatch.setattr(PortalSlurmSpawner, "get_env", lambda self: {})

    async def refuse(self, cmd, input=None, env=None):
        raise RuntimeError("sbatch: error: Batch job submission failed: Requested node configuration is "
                           "not available")

    monkeypatch.setattr(PortalSlurmSpawner, "run_command", refuse)
    with pytest.raises(web.HTTPError) as error:
        run(spawner.submit_batch_script())
    assert error.value.status_code == 400
    assert "Requested node configuration is not available" in error.value.log_message


def test_a_sessions_kernels_get_its_tracking_token_in_the_jobs_environment_only(monkeypatch):
    """The MLflow client in the server's kernels logs to the portal as this session, into its
    experiment: the variables are the job's environment (sbatch --export), never the script's text
    nor the options the hub stores."""
    monkeypatch.setattr(PortalSlurmSpawner, "name", property(lambda self: "study"))  # the hub's record's
    spawner = make_spawner(portal_url="http://portal.example:8000/")
    apply_portal_options(spawner, {"gpus": 0, "report_token": "session:7:r", "tracking_token": "session:7:t"})
    env = spawner.token_env()  # what get_env adds to the hub's variables
    assert (env["MLFLOW_TRACKING_URI"], env["MLFLOW_TRACKING_TOKEN"], env["MLFLOW_EXPERIMENT_NAME"]) == (
        "http://portal.example:8000", "session:7:t", "session-study")
    spawner.req_keepvars = "JUPYTERHUB_API_TOKEN"  # computed at an earlier start, without them
    subvars = spawner.get_req_subvars()
    assert subvars["keepvars"].split(",") == ["JUPYTERHUB_API_TOKEN", "GPUPORTAL_REPORT_TOKEN",
                                              "MLFLOW_TRACKING_URI", "MLFLOW_TRACKING_TOKEN",
                                              "MLFLOW_EXPERIMENT_NAME"]
    subvars["cmd"] = spawner.cmd_formatted_for_batch()
    subvars.update(spawner.user_options)
    assert "session:7:t" not in run(spawner._get_batch_script(**subvars))
    assert "tracking_token" not in spawner.user_options
    with pytest.raises(OptionError, match="tracking_token must be the portal's token"):
        rebuild({"tracking_token": "not a token"})
    unset = make_spawner()  # no portal address: nothing to log to, no variables
    apply_portal_options(unset, {"gpus": 0, "tracking_token": "session:7:t"})
    assert list(unset.token_env()) == []
