"""Each cluster's own policy (#38) on the bed's two clusters: cluster-b's own poll cycle reads its
partitions from its own slurmctld (b-node1: 2 GPUs; its `debug` partition: 1 h), and a session there
is sized by them and by its file's group limits, in the portal and in the hub's spawner (from the
published file), while the default cluster keeps its own."""

from pathlib import Path

import pytest

from portal.core.errors import InvalidInput
from portal.policy.rules import Policy, Usage
from portal.policy.services import policy_current, policy_publish
from portal.poll.cycle import cluster_poll_cycle, poll_cycle
from portal.sessions.services.start import server_options_clean
from slurm.adapter import Slurm
from slurm.clusters import clusters_from_settings
from spawners.options import OptionError, rebuild_options
from tests.clusters import clusters_dir

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

B = "cluster-b"


@pytest.fixture
def two_clusters(tmp_path, settings):
    settings.CLUSTERS_DIR = clusters_dir(tmp_path, b='\n[policy.groups."*"]\nmax_hours = 6\n')
    settings.POLICY_FILE = str(tmp_path / "policy.json")
    assert poll_cycle(slurm=Slurm.from_settings("gpuportal")).ran
    assert cluster_poll_cycle(cluster=B, slurm=Slurm.from_settings(B)).ran


def test_a_session_on_cluster_b_is_sized_by_its_own_slurm_and_file(two_clusters, user, settings):
    here, on_b = policy_current(), policy_current().on(B)
    assert on_b.partitions["gpu"].gpus_per_node == 2 < here.partitions["gpu"].gpus_per_node
    assert (on_b.partitions["debug"].max_hours, on_b.partitions["debug"].nodes) == (1, 1)
    assert on_b.rules_for([]).max_hours == 6 != here.rules_for([]).max_hours

    assert server_options_clean(user=user, name="here", gpus=3).gpus == 3
    with pytest.raises(InvalidInput) as refused:
        server_options_clean(user=user, name="there", gpus=3, cluster=B)
    assert refused.value.fields["gpus"] == ["Partition gpu has at most 2 GPUs per node."]
    with pytest.raises(InvalidInput) as refused:
        server_options_clean(user=user, name="there", hours=7, cluster=B)
    assert refused.value.fields["hours"] == ["Your group allows at most 6 h per session."]
    assert server_options_clean(user=user, name="there", gpus=2, hours=6, cluster=B).cluster == B

    # The hub's spawner, from the file the portal publishes, refuses the same.
    policy_publish()
    policy = Policy.from_json(Path(settings.POLICY_FILE).read_text())
    with pytest.raises(OptionError, match="at most 2 GPUs per node"):
        rebuild_options({"cluster": B, "gpus": 3}, policy=policy, groups=[], usage=Usage(),
                        clusters=clusters_from_settings())
