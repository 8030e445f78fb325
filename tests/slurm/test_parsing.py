from datetime import datetime, timedelta

import pytest

from slurm.parsing import (
    DELIMITER,
    format_duration,
    parse_duration,
    parse_gres,
    parse_sinfo,
    parse_squeue,
)


@pytest.mark.parametrize(("text", "expected"), [
    ("gpu:a100:4", {"a100": 4}),
    ("gpu:a100:4(S:0-1)", {"a100": 4}),
    ("gpu:a100:2(IDX:0,2),gpu:v100:1(IDX:0)", {"a100": 2, "v100": 1}),
    ("gpu:2", {"": 2}),
    ("gres/gpu:1", {"": 1}),
    ("gres:gpu:3", {"": 3}),
    ("(null)", {}),
    ("mps:100", {}),
    ("", {}),
])
def test_parse_gres(text, expected):
    assert parse_gres(text) == expected


@pytest.mark.parametrize(("text", "expected"), [
    ("infinite", None),
    ("UNLIMITED", None),
    ("30", timedelta(minutes=30)),
    ("30:15", timedelta(minutes=30, seconds=15)),
    ("1:00:00", timedelta(hours=1)),
    ("2-12:00:00", timedelta(days=2, hours=12)),
    ("2-12", timedelta(days=2, hours=12)),
])
def test_parse_duration(text, expected):
    assert parse_duration(text) == expected


def test_parse_duration_rejects_garbage():
    with pytest.raises(ValueError, match="not a Slurm duration"):
        parse_duration("soon")


def test_format_duration_round_trips():
    value = timedelta(days=1, hours=2, minutes=3, seconds=4)
    assert format_duration(value) == "1-02:03:04"
    assert parse_duration(format_duration(value)) == value


def _line(*fields):
    return DELIMITER.join(fields)


def test_parse_sinfo_rows():
    output = "\n".join([
        _line("node1", "gpu*", "mixed", "16/48/0/64", "515000", "98304", "gpu:a100:4(S:0)",
              "gpu:a100:2(IDX:0-1)", "infinite", ""),
        _line("node1", "debug", "drained", "0/0/64/64", "515000", "0", "gpu:a100:4",
              "gpu:a100:0(IDX:N/A)", "1:00:00", ""),
    ])
    gpu, debug = parse_sinfo(output)
    assert gpu.partition == "gpu" and gpu.is_default_partition
    assert (gpu.cpus_allocated, gpu.cpus_total) == (16, 64)
    assert gpu.gpus == {"a100": 4} and gpu.gpus_used == {"a100": 2}
    assert gpu.partition_max_time is None and gpu.usable
    assert debug.partition_max_time == timedelta(hours=1)
    assert not debug.usable


def test_parse_squeue_keeps_user_text_with_separators():
    output = _line("42", "gpu", "PENDING", "alice", "Resources", "1", "8", "gres/gpu:2", "",
                   "N/A", "N/A", "8:00:00", "note | with pipes", "train | run")
    (job,) = parse_squeue(output)
    assert job.job_id == "42" and job.reason == "Resources" and job.gpus == 2
    assert job.name == "train | run" and job.comment == "note | with pipes"
    assert job.time_limit == timedelta(hours=8) and job.start_time is None


def test_parse_squeue_running_job():
    output = _line("7", "debug", "RUNNING", "bob", "None", "2", "16", "gres/gpu:1", "node[1-2]",
                   "2026-11-23T09:00:00", "2026-11-23T10:00:00", "1:00:00", "(null)", "x")
    (job,) = parse_squeue(output)
    assert job.reason == "" and job.comment == "" and job.gpus == 2
    assert job.start_time == datetime(2026, 11, 23, 9)


def test_records_refuse_a_short_line():
    with pytest.raises(ValueError, match="expected 14 fields"):
        parse_squeue("1|2|3")


def test_parse_sacct_rows():
    from slurm.parsing import SACCT_FIELDS, parse_sacct

    output = "\n".join([
        _line("41", "FAILED", "3:0", "2026-11-23T09:00:00", "2026-11-23T09:00:01", "2026-11-23T09:30:01",
              "1800", "vm", "billing=8,cpu=8,gres/gpu=2,mem=96G,node=1", "None", "gpuportal:abc",
              "sbatch --parsable", "gpu"),
        _line("42", "CANCELLED by 10001", "0:15", "2026-11-23T09:00:00", "Unknown", "Unknown", "0",
              "None assigned", "", "None", "", "sbatch | with pipes", ""),
        "a broken row from someone's multi-line submit line",
    ])
    failed, cancelled = parse_sacct(output)
    assert len(SACCT_FIELDS) == 13
    assert (failed.base_state, failed.exit_code, failed.exit_signal, failed.gpus) == ("FAILED", 3, 0, 2)
    assert failed.elapsed_seconds == 1800 and failed.comment == "gpuportal:abc" and failed.partition == "gpu"
    assert failed.end_time == datetime(2026, 11, 23, 9, 30, 1) and failed.reason == ""
    assert cancelled.base_state == "CANCELLED" and cancelled.exit_signal == 15
    assert cancelled.start_time is None and cancelled.nodes == "" and cancelled.gpus == 0
    assert cancelled.submit_line == "sbatch | with pipes"


@pytest.mark.parametrize(("text", "gpus"), [
    ("billing=8,cpu=8,gres/gpu=2,mem=96G,node=1", 2),
    ("cpu=16,gres/gpu:a100=2,gres/gpu=2,node=1", 2),
    ("cpu=16,gres/gpu:a100=3,node=1", 3),
    ("cpu=1,mem=1G,node=1", 0),
    ("", 0),
])
def test_parse_tres_gpus(text, gpus):
    from slurm.parsing import parse_tres_gpus

    assert parse_tres_gpus(text) == gpus


@pytest.mark.parametrize(("text", "expected"), [("0:0", (0, 0)), ("3:0", (3, 0)), ("0:9", (0, 9)),
                                                ("", (None, None))])
def test_parse_exit_code(text, expected):
    from slurm.parsing import parse_exit_code

    assert parse_exit_code(text) == expected
