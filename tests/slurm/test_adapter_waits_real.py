"""The why-waiting commands of the adapter against the real bed: what `squeue --start`, `sprio` and
`sshare` print, as typed rows."""

import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from slurm.adapter import Slurm
from slurm.errors import SlurmRejected
from slurm.runner import SlurmRunner


def _held_as_alice(*options: str) -> str:
    argv = ["/usr/sbin/runuser", "-u", "alice", "--", "/usr/bin/sbatch", "--parsable", "--time=1",
            "--mem=100M", "--output=/dev/null", *options, "--wrap", "sleep 60"]
    done = subprocess.run(argv, capture_output=True, text=True, check=True, cwd="/tmp", timeout=20)
    return done.stdout.strip()


@pytest.mark.integration
def test_pending_starts_priorities_and_fair_shares(slurm):
    begin = (datetime.now(UTC) + timedelta(hours=2)).replace(microsecond=0)
    later = _held_as_alice(f"--begin={begin.strftime('%Y-%m-%dT%H:%M:%S')}")
    held = _held_as_alice("--hold")
    try:
        starts = slurm.pending_starts()
        factors = slurm.priorities()
        shares = slurm.fair_shares()
    finally:
        subprocess.run(["scancel", later, held], check=False, timeout=20)
    assert (starts.malformed, factors.malformed, shares.malformed) == (0, 0, 0)
    rows = {row.job_id: row for row in starts.rows}
    # The runner runs squeue with TZ=UTC; the test's sbatch read --begin in the machine's zone (UTC here).
    assert (rows[later].reason, rows[later].start_time) == ("BeginTime", begin)
    assert rows[later].partitions == ("gpu",)
    assert (rows[later].user, rows[later].account) == ("alice", "portal")
    assert (rows[held].reason, rows[held].start_time, rows[held].priority) == ("JobHeldUser", None, 0)
    # sprio lists only jobs that may start now: neither of these.
    assert not {later, held} & {row.job_id for row in factors.rows}
    alice = next(row for row in shares.rows if (row.account, row.user) == ("portal", "alice"))
    argv = ["sshare", "--noheader", "--parsable2", "--users=alice", "--format=User,FairShare"]
    printed = subprocess.run(argv, capture_output=True, text=True, check=True, timeout=20).stdout
    assert f"alice|{alice.fairshare:f}" in printed and 0 <= alice.fairshare <= 1


@pytest.mark.parametrize("call", ["pending_starts", "priorities", "fair_shares"])
def test_a_failing_command_raises_slurm_error(tmp_path: Path, call):
    for name in ("squeue", "sprio", "sshare"):
        (tmp_path / name).symlink_to("/bin/false")
    with pytest.raises(SlurmRejected):
        getattr(Slurm(SlurmRunner(bin_dir=tmp_path)), call)()
