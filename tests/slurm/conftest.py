import pytest

from slurm.adapter import Slurm
from slurm.rest import SlurmRest


@pytest.fixture(params=["sudo", "slurmrestd"])
def slurm(request, settings):
    """Each adapter test runs on both adapters against the real bed: Slurm's commands, and
    slurmrestd with tokens from deploy/libexec/slurm-token (slurm/dev/up.sh starts slurmrestd)."""
    settings.SLURM_ADAPTER = request.param
    adapter = Slurm.from_settings()
    assert isinstance(adapter, SlurmRest) == (request.param == "slurmrestd")
    return adapter
