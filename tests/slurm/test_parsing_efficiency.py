"""Parsing seff's figures from `sacct` with steps (EFFICIENCY_FIELDS), from text shaped as the bed's
Slurm prints it, and rows a hostile or broken output could hold."""

import pytest

from slurm.parsing import (
    EFFICIENCY_FIELDS,
    new_delimiter,
    parse_cpu_time,
    parse_sacct_efficiency,
    parse_size_mb,
    requested_mb,
)


def _rows(delimiter, records):
    """A record without its last fields has them empty (TRESUsageInAve: the bed's Slurm 22.05 records
    no gres/gpuutil)."""
    records = [[*record, *[""] * (len(EFFICIENCY_FIELDS) - len(record))] for record in records]
    return "".join("".join(f"{value}{delimiter}" for value in record) + "\n" for record in records)


def _parse(records):
    delimiter = new_delimiter()
    return parse_sacct_efficiency(_rows(delimiter, records), delimiter)


# JobID, State, AllocCPUS, TotalCPU, ElapsedRaw, TimelimitRaw, MaxRSS, ReqMem, AllocTRES, NNodes
GPU_JOB = [
    ["301", "COMPLETED", "4", "00:05.120", "42", "60", "", "16G",
     "billing=4,cpu=4,gres/gpu:a100=2,gres/gpu=2,mem=16G,node=1", "1"],
    ["301.batch", "COMPLETED", "4", "00:05.100", "42", "", "204800K", "",
     "cpu=4,gres/gpu=2,mem=16G,node=1", "1"],
    ["301.extern", "COMPLETED", "4", "00:00.020", "42", "", "1024K", "", "cpu=4,mem=16G,node=1", "1"],
]


def test_a_job_is_its_allocation_row_and_its_steps_peak():
    parsed = _parse(GPU_JOB)
    assert parsed.malformed == 0
    (job,) = parsed.rows
    assert (job.job_id, job.state, job.cpus, job.elapsed_seconds, job.time_limit_seconds) == (
        "301", "COMPLETED", 4, 42, 3600)
    assert job.cpu_seconds == pytest.approx(5.12)  # the allocation row's, not the steps' sum
    assert (job.mem_peak_mb, job.mem_requested_mb, job.gpus, job.nodes) == (200.0, 16384.0, 2, 1)


def test_unknown_figures_are_none_never_0():
    (job,) = _parse([
        ["302", "CANCELLED by 10001", "2", "", "3", "UNLIMITED", "", "0", "billing=2,cpu=2,node=1", "1"],
        ["302.batch", "CANCELLED", "2", "", "3", "", "", "", "", "1"],
    ]).rows
    assert (job.cpu_seconds, job.time_limit_seconds, job.mem_peak_mb, job.mem_requested_mb) == (
        None, None, None, None)
    assert job.state == "CANCELLED by 10001" and job.gpus == 0


def test_a_job_whose_start_slurmdbd_has_not_yet_is_unsettled():
    # What the bed's sacct printed for ~2 s after a 1-second job ended; then TimelimitRaw 5, ReqMem 1G.
    transient = ["801", "COMPLETED", "2", "00:01.005", "1", "", "", "16?",
                 "billing=2,cpu=2,gres/gpu=1,mem=1G,node=1", "1"]
    (job,) = _parse([transient, ["801.batch", "COMPLETED", "2", "00:01.005", "1", "", "", "", "", "1"]]).rows
    assert not job.settled and job.time_limit_seconds is None
    (job,) = _parse([[*transient[:5], "5", "", "1G", *transient[8:]]]).rows
    assert job.settled and (job.time_limit_seconds, job.mem_requested_mb) == (300, 1024.0)
    assert _parse(GPU_JOB).rows[0].settled


@pytest.mark.parametrize(("req_mem", "cpus", "nodes", "tres", "expected"), [
    ("16G", 4, 1, "", 16384.0),
    ("4000M", 4, 2, "", 8000.0),  # per node
    ("4000Mn", 4, 2, "", 8000.0),  # before 21.08: per node
    ("4000Mc", 4, 2, "", 16000.0),  # before 21.08: per CPU
    ("2000", 1, 1, "", 2000.0),  # MiB without a unit
    ("1.5T", 1, 1, "", 1.5 * 1024**2),
    ("16?", 2, 1, "billing=2,cpu=2,mem=2G,node=1", 2048.0),  # what 22.05 prints a moment after the end
    ("", 2, 1, "cpu=2,mem=3000M,node=1", 3000.0),
    ("0", 2, 1, "cpu=2,node=1", None),
    ("lots", 2, 1, "cpu=2,mem=lots", None),
])
def test_requested_memory_is_the_whole_jobs(req_mem, cpus, nodes, tres, expected):
    assert requested_mb(req_mem, cpus=cpus, nodes=nodes, tres=tres) == expected


@pytest.mark.parametrize(("text", "expected"), [
    ("00:00.050", 0.05), ("05:07", 307.0), ("01:02:03", 3723.0), ("2-01:00:00", 176400.0),
    ("1-00:00:01.5", 86401.5), ("", None),
])
def test_total_cpu(text, expected):
    assert parse_cpu_time(text) == (None if expected is None else pytest.approx(expected))


@pytest.mark.parametrize(("text", "expected"), [
    ("204800K", 200.0), ("1.5G", 1536.0), ("3M", 3.0), ("0", 0.0), ("", None),
])
def test_max_rss(text, expected):
    assert parse_size_mb(text) == expected


@pytest.mark.parametrize("bad", ["-1", "1e3", "12:xx", "1:2:3:4", "∞"])
def test_a_malformed_cpu_time_raises(bad):
    with pytest.raises(ValueError):
        parse_cpu_time(bad)


def test_hostile_and_malformed_rows_are_skipped_alone():
    delimiter = new_delimiter()
    good = _rows(delimiter, GPU_JOB)
    bad = _rows(delimiter, [
        ["303", "COMPLETED", "four", "00:01", "1", "5", "", "1G", "cpu=4", "1"],  # AllocCPUS not a count
        ["304", "COMPLETED", "1", "00:01", "1", "5", "lots", "1G", "cpu=1", "1"],  # MaxRSS not a size
        ["305", "COMPLETED", "1"],  # too few fields
        ["306.batch", "COMPLETED", "1", "00:01", "1", "", "1K", "", "cpu=1", "1"],  # a step without its job
        [".batch", "COMPLETED", "1", "00:01", "1", "", "1K", "", "cpu=1", "1"],
        ["307", "COMPLETED", "1", "00:01", "-5", "5", "", "1G", "cpu=1", "1"],
    ])
    # A line without the delimiter (a job's text cannot hold it), and a row cut off at the end.
    forged = "308|COMPLETED|1|00:01|1|5|1K|1G|cpu=1|1\n"
    cut = f"309{delimiter}COMPLETED{delimiter}1{delimiter}"
    parsed = parse_sacct_efficiency(forged + bad + good + cut, delimiter)
    assert [job.job_id for job in parsed.rows] == ["301"]
    assert parsed.malformed == 8


def test_one_job_with_two_allocation_rows_is_skipped():
    parsed = _parse([*GPU_JOB, GPU_JOB[0]])
    assert (parsed.rows, parsed.malformed) == ([], 1)


def test_array_tasks_are_jobs_of_their_own():
    task = [["310_1" + row[0][3:], *row[1:]] for row in GPU_JOB]
    parsed = _parse([*GPU_JOB, *task])
    assert sorted(job.job_id for job in parsed.rows) == ["301", "310_1"]


def test_the_field_list_is_fixed():
    assert EFFICIENCY_FIELDS == ["JobID", "State", "AllocCPUS", "TotalCPU", "ElapsedRaw", "TimelimitRaw",
                                 "MaxRSS", "ReqMem", "AllocTRES", "NNodes", "TRESUsageInAve"]


def test_slurms_own_gpu_use_is_its_steps_weighted_by_their_time():
    """Slurm >= 23.02 records gres/gpuutil per step: the portal checks the sampler's figures with it."""
    (job,) = _parse([
        GPU_JOB[0],
        [*GPU_JOB[1][:4], "30", *GPU_JOB[1][5:], "cpu=00:00:05,gres/gpumem=2G,gres/gpuutil=90,mem=200M"],
        ["301.0", *GPU_JOB[1][1:4], "10", *GPU_JOB[1][5:], "cpu=00:00:01,gres/gpuutil=10"],
        [*GPU_JOB[2], "cpu=00:00:00,mem=1M"],  # a step without GPUs says nothing
    ]).rows
    assert job.gpu_util_percent == pytest.approx((90 * 30 + 10 * 10) / 40)
    assert _parse(GPU_JOB).rows[0].gpu_util_percent is None  # Slurm before 23.02: unknown, never 0
