"""The spawner rebuilds every option server-side: limits, unknown keys, the batch script it writes."""

import pytest
from tornado import web

from spawners.slurm_spawner import (
    OptionError,
    PartitionPolicy,
    PortalSlurmSpawner,
    apply_portal_options,
    rebuild_options,
)
from tests.spawners.test_poller import run

POLICIES = {"gpu": PartitionPolicy(max_gpus=4), "debug": PartitionPolicy(max_gpus=2, max_hours=1)}


def rebuild(raw, gpus_in_use=0):
    return rebuild_options(raw, policies=POLICIES, default_partition="gpu", default_hours=8.0,
                           gpus_in_use=gpus_in_use, max_gpus_per_user=4)


def test_defaults_are_one_gpu_eight_hours_on_the_default_partition():
    options = rebuild({})
    assert (options.partition, options.gpus, options.hours, options.nodes) == ("gpu", 1, 8.0, 1)
    assert (options.cpus, options.mem_gb) == (8, 48)


def test_cpus_and_memory_follow_the_gpus():
    options = rebuild({"gpus": 3})
    assert (options.cpus, options.mem_gb) == (24, 144)
    assert rebuild({"gpus": 0}).cpus == 8  # a CPU-only server still gets one share


def test_default_time_is_capped_by_the_partition():
    assert rebuild({"partition": "debug"}).hours == 1


def test_strings_from_forms_are_accepted():
    assert rebuild({"gpus": "2", "hours": "1.5"}).gpus == 2


@pytest.mark.parametrize(("raw", "message"), [
    ({"gpus": 64}, "At most 4 GPUs"),
    ({"gpus": -1}, "cannot be negative"),
    ({"gpus": True}, "whole number"),
    ({"gpus": 1.5}, "whole number"),
    ({"partition": "nope"}, "Unknown partition"),
    ({"hours": 0}, "more than 0"),
    ({"hours": -3}, "more than 0"),
    ({"hours": "nan"}, "must be a number"),
    ({"partition": "debug", "hours": 2}, "at most 1 h"),
    ({"nodes": 2}, "1 to 1 node"),
    ({"cmd": "/bin/sh -c evil"}, "Unknown option(s): cmd"),
    ({"options": "--uid=0"}, "Unknown option(s): options"),
    ({"prologue": "rm -rf ~"}, "Unknown option(s): prologue"),
    ({"gres": "gpu:64"}, "Unknown option(s): gres"),
    (["gpus"], "must be an object"),
])
def test_bad_options_are_refused(raw, message):
    with pytest.raises(OptionError, match=message.replace("(", r"\(").replace(")", r"\)")):
        rebuild(raw)


def test_quota_counts_the_users_other_servers():
    with pytest.raises(OptionError, match="quota is 4 GPUs"):
        rebuild({"gpus": 2}, gpus_in_use=3)
    assert rebuild({"gpus": 1}, gpus_in_use=3).gpus == 1


class FakeUser:
    name = "alice"

    def __init__(self):
        self.spawners = {}


def make_spawner(**config):
    spawner = PortalSlurmSpawner(user=FakeUser(), **config)
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
    assert "At most 4 GPUs" in error.value.log_message


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
    assert "/bin/batchspawner-singleuser " in script


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
