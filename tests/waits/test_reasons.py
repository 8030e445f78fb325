"""Every pending reason the bed's Slurm can print has plain words: the codes come from its own
libslurm (`job_reason_string` for each value of its reason enum), not from a list typed here."""

import ctypes
from pathlib import Path

import pytest

from portal.waits.reasons import reason_text

_UNKNOWN = "a reason the portal has no plain words for"


def _libslurm_reasons() -> list[str]:
    paths = sorted(Path("/usr/lib").glob("**/libslurmfull.so"))
    if not paths:
        pytest.skip("no libslurmfull.so on this machine")
    function = ctypes.CDLL(paths[0]).slurm_job_reason_string
    function.restype, function.argtypes = ctypes.c_char_p, [ctypes.c_int]
    reasons = []
    for value in range(1024):
        text = function(value).decode()
        if text == str(value):  # past the enum's end Slurm prints the number
            break
        reasons.append(text)
    return reasons


@pytest.mark.integration
def test_every_reason_code_of_the_beds_slurm_has_words():
    reasons = _libslurm_reasons()
    assert len(reasons) > 150 and {"Resources", "AssocGrpGRESMinutes", "QOSMaxGRESPerUser"} <= set(reasons)
    missing = [reason for reason in reasons if _UNKNOWN in reason_text(reason)]
    assert missing == []


@pytest.mark.parametrize(("reason", "words"), [
    ("Priority", "higher priority"),
    ("Resources", "in use by running jobs"),
    ("Dependency", "depends on"),
    ("BeginTime", "--begin"),
    ("JobHeldUser", "scontrol release"),
    ("JobHeldAdmin", "administrator"),
    ("launch failed requeued held", "could not launch"),
    ("ReqNodeNotAvail, UnavailableNodes:gpu-node1", "(UnavailableNodes:gpu-node1)"),
    ("PartitionTimeLimit", "longer than its partition allows"),
    ("Reservation", "reservation to begin"),
    ("AssocGrpGRESMinutes", "used up its budget of GPU-hours"),
    ("AssocGrpCPUMinutesLimit", "budget of CPU-hours"),
    ("AssocGrpGRESRunMinutes", "running jobs of your project"),
    ("AssocGrpGRES", "all the GPUs it may use at once"),
    ("QOSMaxGRESPerUser", "allows one user"),
    ("MaxGRESPerAccount", "allows one project"),
    ("QOSMaxWallDurationPerJobLimit", "ask for less time"),
    ("QOSMaxJobsPerUserLimit", "jobs running"),
    ("Nodes required for job are DOWN, DRAINED or reserved for jobs in higher priority partitions",
     "higher-priority partition"),
])
def test_reason_words(reason, words):
    assert words in reason_text(reason)


def test_no_reason_and_an_unknown_one():
    assert reason_text("") == ""
    assert reason_text("SomethingNew") == f"Slurm says “SomethingNew”, {_UNKNOWN}."
