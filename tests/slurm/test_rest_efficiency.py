"""The slurmrestd adapter's efficiency figures, on an answer recorded from the bed's real slurmrestd
(22.05.8, tests/slurm/rest_responses/slurmdb_jobs_steps.json: a job with 4 CPUs, 16G, 2 GPUs, 1 h
that held ~210 MB, and a cancelled one), against what sacct printed for the same jobs."""

import pytest

from slurm.parsing import EFFICIENCY_FIELDS, JobEfficiency, new_delimiter, parse_sacct_efficiency
from tests.slurm.test_rest import adapter, recorded

# sacct --parsable2 --format <EFFICIENCY_FIELDS> for the same two jobs, on the bed, that minute.
SACCT = """263|CANCELLED|2|00:02.266|6|60||8G|billing=2,cpu=2,mem=8G,node=1|1
263.batch|FAILED|2|00:02.266|6||||cpu=2,mem=8G,node=1|1
267|COMPLETED|4|00:03.183|37|60||16G|billing=4,cpu=4,gres/gpu=2,mem=16G,node=1|1
267.batch|COMPLETED|4|00:03.183|37||216128K||cpu=4,gres/gpu=2,mem=16G,node=1|1
"""


def _from_sacct() -> dict[str, JobEfficiency]:
    delimiter = new_delimiter()
    # Recorded before TRESUsageInAve was asked for: the bed's 22.05 prints it empty (no gres/gpuutil).
    rows = [line.split("|") for line in SACCT.splitlines()]
    text = "".join(delimiter.join([*row, *[""] * (len(EFFICIENCY_FIELDS) - len(row))]) + delimiter + "\n"
                   for row in rows)
    return {job.job_id: job for job in parse_sacct_efficiency(text, delimiter).rows}


def test_slurmdb_jobs_with_steps_give_what_sacct_gives():
    rest, session = adapter((200, recorded("slurmdb_jobs_steps")))
    parsed = rest.efficiency(["263", "267"])
    assert parsed.malformed == 0
    rows = {job.job_id: job for job in parsed.rows}
    sacct = _from_sacct()
    assert set(rows) == set(sacct) == {"263", "267"}
    for job_id, expected in sacct.items():
        got = rows[job_id]
        assert (got.state, got.cpus, got.elapsed_seconds, got.time_limit_seconds, got.mem_requested_mb,
                got.gpus, got.nodes) == (expected.state, expected.cpus, expected.elapsed_seconds,
                                         expected.time_limit_seconds, expected.mem_requested_mb,
                                         expected.gpus, expected.nodes)
        # sacct prints TotalCPU to the millisecond, MaxRSS to the KiB.
        assert got.cpu_seconds == pytest.approx(expected.cpu_seconds, abs=0.001)
        assert got.mem_peak_mb == (None if expected.mem_peak_mb is None
                                   else pytest.approx(expected.mem_peak_mb, abs=1 / 1024))
    assert rows["267"].mem_peak_mb == pytest.approx(211.06, abs=0.01)
    (asked,) = session.asked
    assert asked["url"].endswith("/slurmdb/v0.0.38/jobs") and asked["params"] == {"step": "263,267"}


def test_memory_per_cpu_no_limit_and_a_malformed_job():
    answer = recorded("slurmdb_jobs_steps")
    job = answer["jobs"][1]
    per_cpu = job | {"job_id": 268, "required": {"CPUs": 4, "memory": (1 << 63) | 1000},
                     "time": job["time"] | {"limit": 0xFFFFFFFF}, "steps": []}
    answer["jobs"] = [per_cpu, {"job_id": "not a number"}, "nor an object"]
    rest, _ = adapter((200, answer))
    parsed = rest.efficiency(["268"])
    (row,) = parsed.rows
    assert (row.mem_requested_mb, row.time_limit_seconds, row.mem_peak_mb, row.cpu_seconds) == (
        4000, None, None, 0.0)
    assert parsed.malformed == 2
