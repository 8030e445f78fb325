from datetime import UTC, datetime, timedelta

import pytest

from slurm.parsing import (
    SINFO_FIELDS,
    SQUEUE_FIELDS,
    Parsed,
    format_duration,
    new_delimiter,
    parse_duration,
    parse_gres,
    parse_sinfo,
    parse_squeue,
    parse_time,
    sinfo_format,
    squeue_format,
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


@pytest.mark.parametrize("text", ["soon", "1:2:3:4", "::", "1-2:3:4:5", "-5", "1:00s"])
def test_parse_duration_rejects_garbage(text):
    with pytest.raises(ValueError, match="not a Slurm duration"):
        parse_duration(text)


def test_format_duration_round_trips():
    value = timedelta(days=1, hours=2, minutes=3, seconds=4)
    assert format_duration(value) == "1-02:03:04"
    assert parse_duration(format_duration(value)) == value


# A delimiter as the adapter draws one (new_delimiter()); user text cannot contain it.
D = new_delimiter()
SINFO_GPU = ("node1", "gpu*", "mixed", "16/48/0/64", "515000", "98304", "gpu:a100:4(S:0)",
             "gpu:a100:2(IDX:0-1)", "infinite")
SQUEUE_RUNNING = ("7", "debug", "RUNNING", "bob", "None", "2", "16", "gres/gpu:1", "node[1-2]",
                  "2026-11-23T09:00:00", "2026-11-23T10:00:00", "1:00:00", "(null)", "x")
SACCT_FAILED = ("41", "FAILED", "3:0", "2026-11-23T09:00:00", "2026-11-23T09:00:01", "2026-11-23T09:30:01",
                "1800", "vm", "billing=8,cpu=8,gres/gpu=2,mem=96G,node=1", "None", "gpuportal:abc",
                "sbatch --parsable", "gpu", "alice")


def _row(*fields: str) -> str:
    """One row as Slurm prints it with our formats: every field followed by the delimiter."""
    return "".join(field + D for field in fields) + "\n"


def test_new_delimiter_is_fresh_each_time():
    assert new_delimiter() != new_delimiter()
    assert D.startswith("\x1f") and D.endswith("\x1f") and "%" not in D and "," not in D


def test_parse_time_is_aware_utc():
    assert parse_time("2026-11-23T09:14:42") == datetime(2026, 11, 23, 9, 14, 42, tzinfo=UTC)
    assert parse_time("2026-11-23T09:14:42").utcoffset() == timedelta(0)
    assert parse_time("Unknown") is None and parse_time("N/A") is None
    assert parse_time("NONE") is None  # squeue's end time of a job held back by --begin


def test_parse_sinfo_rows():
    output = _row(*SINFO_GPU) + _row("node1", "debug", "drained", "0/0/64/64", "515000", "0", "gpu:a100:4",
                                     "gpu:a100:0(IDX:N/A)", "1:00:00")
    parsed = parse_sinfo(output, D)
    assert parsed.malformed == 0
    gpu, debug = parsed.rows
    assert gpu.partition == "gpu" and gpu.is_default_partition
    assert (gpu.cpus_allocated, gpu.cpus_total) == (16, 64)
    assert gpu.gpus == {"a100": 4} and gpu.gpus_used == {"a100": 2}
    assert gpu.partition_max_time is None and gpu.usable
    assert debug.partition_max_time == timedelta(hours=1)
    assert not debug.usable


def test_sinfo_format_puts_the_delimiter_after_every_field():
    assert sinfo_format(D) == ",".join(f"{field}:0{D}" for field in SINFO_FIELDS)


def test_parse_squeue_keeps_user_text_with_separators():
    output = _row("42", "gpu", "PENDING", "alice", "Resources", "1", "8", "gres/gpu:2", "",
                  "N/A", "N/A", "8:00:00", "note | with pipes", "train | run")
    (job,) = parse_squeue(output, D).rows
    assert job.job_id == "42" and job.reason == "Resources" and job.gpus == 2
    assert job.name == "train | run" and job.comment == "note | with pipes"
    assert job.time_limit == timedelta(hours=8) and job.start_time is None


def test_parse_squeue_running_job():
    parsed = parse_squeue(_row(*SQUEUE_RUNNING), D)
    (job,) = parsed.rows
    assert parsed.malformed == 0
    assert job.reason == "" and job.comment == "" and job.gpus == 2
    assert job.start_time == datetime(2026, 11, 23, 9, tzinfo=UTC)


def test_squeue_format_puts_user_text_last_and_the_delimiter_after_every_field():
    assert squeue_format(D) == "".join(f"{field}{D}" for field in SQUEUE_FIELDS)
    assert SQUEUE_FIELDS[-2:] == ["%k", "%j"]


def test_a_name_with_newlines_and_unit_separators_is_one_job():
    name = "evil\nname\x1fwith\x1f\x1fseparators\n"
    comment = "bad\ufffd\ufffd\x1e\n"
    output = _row(*SQUEUE_RUNNING[:-2], comment, name) + _row(*SQUEUE_RUNNING)
    parsed = parse_squeue(output, D)
    hostile, other = parsed.rows
    assert parsed.malformed == 0
    assert hostile.name == name.strip() and hostile.comment == comment.strip()
    assert other == parse_squeue(_row(*SQUEUE_RUNNING), D).rows[0]


def test_a_name_cannot_forge_a_job():
    """A user who guesses the old fixed separators writes a whole fake row into a job name."""
    forged = "\x1f".join(["999", "gpu", "RUNNING", "bob", "None", "1", "8", "", "vm", "N/A", "N/A",
                          "1:00", "gpuportal:victim", "fake"])
    output = _row(*SQUEUE_RUNNING[:-1], f"x\n{forged}\x1f\n{forged}")
    parsed = parse_squeue(output, D)
    assert [job.job_id for job in parsed.rows] == ["7"] and parsed.malformed == 0


@pytest.mark.parametrize(("bad", "why"), [
    (_row(*SQUEUE_RUNNING[:-1]), "expected 14 fields, got 13"),
    (_row(*SQUEUE_RUNNING, "extra"), "expected 14 fields, got 15"),
    (_row(*SQUEUE_RUNNING[:11], "soon", *SQUEUE_RUNNING[12:]), "not a Slurm duration"),
    (_row(*SQUEUE_RUNNING[:9], "23/11/2026 09:00", *SQUEUE_RUNNING[10:]), "does not match format"),
    (_row(*SQUEUE_RUNNING[:5], "two", *SQUEUE_RUNNING[6:]), "not a count"),
    (_row(*SQUEUE_RUNNING[:11], "99999999999-00:00:00", *SQUEUE_RUNNING[12:]), "too large"),
    ("7\x1f1\n2\n", "unterminated"),  # lines without a row end
])
def test_a_malformed_squeue_row_is_skipped_counted_and_logged(caplog, bad, why):
    output = _row(*SQUEUE_RUNNING) + bad + _row(*SQUEUE_RUNNING)
    parsed = parse_squeue(output, D)
    assert [job.job_id for job in parsed.rows] == ["7", "7"] and parsed.malformed == 1
    (record,) = caplog.records
    assert record.levelname == "WARNING" and "squeue" in record.message and why in record.message


def test_a_malformed_row_is_logged_as_a_truncated_repr(caplog):
    parse_squeue(_row("7", "x\n" * 500), D)
    (record,) = caplog.records
    assert "x\\nx\\n" in record.message and "\n" not in record.message
    assert len(record.message) < 300


def test_output_cut_off_inside_a_row_is_counted():
    output = _row(*SQUEUE_RUNNING) + _row(*SQUEUE_RUNNING)[:-len(D) - 1]
    parsed = parse_squeue(output, D)
    assert len(parsed.rows) == 1 and parsed.malformed == 1


def test_empty_output_is_no_rows():
    assert parse_squeue("", D) == Parsed(rows=[], malformed=0)
    assert parse_sinfo("\n", D) == Parsed(rows=[], malformed=0)


@pytest.mark.parametrize("bad", [
    _row(*SINFO_GPU[:-1]),
    _row(*SINFO_GPU[:3], "16/48/0", *SINFO_GPU[4:]),
    _row(*SINFO_GPU[:4], "lots", *SINFO_GPU[5:]),
    _row(*SINFO_GPU[:-1], "whenever"),
    _row(*SINFO_GPU[:-1], "1\n2"),
])
def test_a_malformed_sinfo_row_is_skipped(caplog, bad):
    parsed = parse_sinfo(bad + _row(*SINFO_GPU), D)
    assert len(parsed.rows) == 1 and parsed.malformed == 1
    assert "sinfo" in caplog.records[0].message


def test_parse_sacct_rows():
    from slurm.parsing import SACCT_FIELDS, parse_sacct

    output = _row(*SACCT_FAILED) + _row(
        "42", "CANCELLED by 10001", "0:15", "2026-11-23T09:00:00", "Unknown", "Unknown", "0",
        "None assigned", "", "None", "", "sbatch | with pipes\n--job-name=a\x1fb", "", "bob")
    parsed = parse_sacct(output, D)
    failed, cancelled = parsed.rows
    assert len(SACCT_FIELDS) == 14 and parsed.malformed == 0
    assert (failed.user, cancelled.user) == ("alice", "bob")
    assert (failed.base_state, failed.exit_code, failed.exit_signal, failed.gpus) == ("FAILED", 3, 0, 2)
    assert failed.elapsed_seconds == 1800 and failed.comment == "gpuportal:abc" and failed.partition == "gpu"
    assert failed.end_time == datetime(2026, 11, 23, 9, 30, 1, tzinfo=UTC) and failed.reason == ""
    assert cancelled.base_state == "CANCELLED" and cancelled.exit_signal == 15
    assert cancelled.start_time is None and cancelled.nodes == "" and cancelled.gpus == 0
    assert cancelled.submit_line == "sbatch | with pipes\n--job-name=a\x1fb"


@pytest.mark.parametrize("bad", [
    "a broken row from someone's multi-line submit line" + D + "\n",
    _row(*SACCT_FAILED[:-1]),
    _row(*SACCT_FAILED[:3], "yesterday", *SACCT_FAILED[4:]),
    _row(*SACCT_FAILED[:6], "", *SACCT_FAILED[7:]),
])
def test_a_malformed_sacct_row_is_skipped(caplog, bad):
    from slurm.parsing import parse_sacct

    parsed = parse_sacct(_row(*SACCT_FAILED) + bad + _row(*SACCT_FAILED), D)
    assert [job.job_id for job in parsed.rows] == ["41", "41"] and parsed.malformed == 1
    assert "sacct" in caplog.records[0].message


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
