"""`gpuportal rerun ID [--run-anyway]` against the live portal: a changed input is named and exits
non-zero with nothing submitted; --run-anyway submits the re-run."""

from portal.provenance.models import Provenance
from tests.cli.conftest import Cli, alice, cli, token_cli  # noqa: F401 (fixtures)
from tests.provenance.test_rerun import _ran, alices_data, dispatched  # noqa: F401 (fixtures)


def test_rerun_names_a_changed_input_then_runs_anyway(token_cli: Cli, alice, partitions,  # noqa: F811
                                                      alices_data, dispatched):  # noqa: F811
    job = _ran(alice, alices_data)
    (alices_data / "data.bin").write_bytes(b"other")
    done = token_cli("rerun", str(job.pk))
    assert done.returncode != 0 and f"{alices_data.name}/data.bin" in done.stderr and not dispatched
    done = token_cli("--json", "rerun", str(job.pk), "--run-anyway")
    assert done.returncode == 0, done.stderr
    again = done.json()["id"]
    assert dispatched == [again] and Provenance.objects.get(job_id=again).rerun_of_id == job.pk
