"""Parsing `squeue --start`, `sprio` and `sshare` (the why-waiting commands), from text shaped as
the bed's Slurm prints it."""

from datetime import UTC, datetime

from slurm.parsing import (
    SPRIO_FIELDS,
    SQUEUE_START_FIELDS,
    new_delimiter,
    parse_sprio,
    parse_squeue_start,
    parse_sshare,
    sprio_format,
    squeue_start_format,
)


def _rows(delimiter, records):
    return "".join("".join(f"{value}{delimiter}" for value in record) + "\n" for record in records)


def test_squeue_start_rows():
    delimiter = new_delimiter()
    text = _rows(delimiter, [
        ["2164", "gpu", "alice", "portal", "2920", "2026-11-25T23:42:32", "Resources"],
        ["2161", "gpu", "alice", "portal", "0", "N/A", "JobHeldUser"],
        ["2165", "debug,gpu", "bob", "(null)", "2920", "N/A",
         "Nodes required for job are DOWN, DRAINED or reserved for jobs in higher priority partitions"],
        ["2170", "gpu", "eve", "portal", "10", "Unknown", "None"],
    ])
    parsed = parse_squeue_start(text, delimiter)
    assert parsed.malformed == 0
    first, held, both, fresh = parsed.rows
    assert (first.job_id, first.partitions, first.user, first.account, first.priority, first.reason) == (
        "2164", ("gpu",), "alice", "portal", 2920, "Resources")
    assert first.start_time == datetime(2026, 11, 25, 23, 42, 32, tzinfo=UTC)
    assert (held.start_time, held.priority) == (None, 0)
    assert (both.partitions, both.account) == (("debug", "gpu"), "")
    assert both.reason.startswith("Nodes required")
    assert (fresh.reason, fresh.start_time) == ("", None)


def test_squeue_start_format_has_every_field_once():
    delimiter = new_delimiter()
    assert squeue_start_format(delimiter) == delimiter.join(SQUEUE_START_FIELDS) + delimiter


def test_a_bad_squeue_start_row_is_skipped_not_raised():
    delimiter = new_delimiter()
    text = _rows(delimiter, [["2164", "gpu", "alice", "portal", "high", "N/A", "Resources"],
                             ["2165", "gpu", "alice", "portal", "1", "N/A"],
                             ["2166", "gpu", "alice", "portal", "1", "N/A", "Priority"]])
    parsed = parse_squeue_start(text, delimiter)
    assert [row.job_id for row in parsed.rows] == ["2166"] and parsed.malformed == 2


def test_sprio_rows_one_per_partition():
    delimiter = new_delimiter()
    text = _rows(delimiter, [
        ["2164", "gpu", "alice", "2920", "0", "1667", "254", "1000", "0"],
        ["2165", "gpu", "alice", "2920", "0", "1667", "254", "1000", "0"],
        ["2165", "debug", "alice", "3920", "0", "1667", "254", "2000", "0"],
        ["2166", "gpu", "bob", "1200", "12.6", "", "0", "1000", "0"],  # blank factor: malformed
    ])
    parsed = parse_sprio(text, delimiter)
    assert parsed.malformed == 1
    first, second, other = parsed.rows
    assert (first.total, first.age, first.fairshare, first.jobsize, first.partition_factor, first.qos) == (
        2920, 0, 1667, 254, 1000, 0)
    assert (second.partition, other.partition) == ("gpu", "debug")
    assert (other.total, other.partition_factor) == (3920, 2000)
    assert sprio_format(delimiter) == delimiter.join(SPRIO_FIELDS) + delimiter


def test_sprio_with_decimals_rounds():
    delimiter = new_delimiter()
    (row,) = parse_sprio(_rows(delimiter, [["7", "gpu", "bob", "1201", "12.6", "166.4", "0", "1000", "0"]]),
                         delimiter).rows
    assert (row.age, row.fairshare) == (13, 166)


def test_empty_outputs_parse_to_nothing():
    delimiter = new_delimiter()
    for parsed in (parse_squeue_start("", delimiter), parse_sprio("", delimiter), parse_sshare("")):
        assert (parsed.rows, parsed.malformed) == ([], 0)


def test_sshare_rows():
    text = ("root|||0.000000|47|1.000000|\n"
            " root|root|1|0.500000|0|0.000000|1.000000\n"
            " portal||1|0.500000|47|1.000000|\n"
            "  portal|alice|1|0.200000|47|1.000000|0.166667\n"
            "  portal|bob|parent|0.200000|0|0.000000|inf\n"
            "  portal|eve|1|0.2\n")
    parsed = parse_sshare(text)
    assert parsed.malformed == 1
    top, root, account, alice, bob = parsed.rows
    assert (top.account, top.user, top.raw_shares, top.fairshare) == ("root", "", None, None)
    assert (account.account, account.user, account.fairshare) == ("portal", "", None)
    assert (alice.account, alice.user, alice.raw_shares, alice.norm_shares, alice.raw_usage) == (
        "portal", "alice", 1, 0.2, 47)
    assert (alice.effective_usage, alice.fairshare) == (1.0, 0.166667)
    assert (bob.raw_shares, bob.fairshare) == (None, None)  # 'parent', 'inf'
    assert root.fairshare == 1.0
