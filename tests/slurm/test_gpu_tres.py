"""Slurm's own GPU figures (gres/gpuutil, gres/gpumem in the steps' TRESUsageIn* fields): the exact
command line, the parser on real-format strings, and the real bed's sacct (22.05: no such TRES)."""

import subprocess
from datetime import UTC, datetime, timedelta

import pytest

from slurm import parsing
from slurm.adapter import Slurm


class _Runner:
    """Records the argv and answers with canned sacct output."""

    def __init__(self, answer: str = "") -> None:
        self.answer = answer
        self.calls: list[tuple[str, list[str]]] = []

    def run(self, program: str, args: list[str]) -> str:
        self.calls.append((program, args))
        return self.answer


# TRES strings as sacct prints them on a Slurm >= 23.02 cluster with AutoDetect=nvml (the format of
# SchedMD's slurm.conf AccountingStorageTRES note "Setting gres/gpu will also set gres/gpumem and
# gres/gpuutil"; memory with sacct's K/M/G suffixes, powers of 1024).
AVE = "cpu=00:01:40,energy=0,fs/disk=2081,gres/gpumem=512M,gres/gpuutil=37,mem=1016K,pages=0,vmem=0"
MAX = "cpu=00:01:40,energy=0,fs/disk=2081,gres/gpumem=2G,gres/gpuutil=98,mem=1016K,pages=0,vmem=0"


def test_gpu_tres_figures():
    assert parsing.parse_gpu_tres(AVE) == parsing.GpuTres(util=37.0, mem_mib=512.0)
    assert parsing.parse_gpu_tres(MAX) == parsing.GpuTres(util=98.0, mem_mib=2048.0)
    assert parsing.parse_gpu_tres("gres/gpumem=1048576").mem_mib == 1.0  # bytes without a suffix
    assert parsing.parse_gpu_tres("gres/gpumem=3K").mem_mib == pytest.approx(3 / 1024)


@pytest.mark.parametrize("text", [
    "", "energy=0", "cpu=00:00:01,mem=4K",  # 22.05: the fields are there, the TRES are not
    "gres/gpuutil=", "gres/gpuutil=abc", "gres/gpuutil=37%", "gres/gpuutil=1e9", "xgres/gpuutil=5",
    "gres/gpuutilization=5", "gres/gpumem=12Q", "\x00\xff|\n", "gres/gpu=4,gres/gpu:a100=4",
])
def test_garbage_is_no_data(text):
    assert parsing.parse_gpu_tres(text) == parsing.GpuTres()


def test_exact_command_line_and_rows():
    runner = _Runner()
    slurm = Slurm(runner)
    slurm.gpu_usage(["41", "42"])
    (program, args), = runner.calls
    delimiter = args[2].removeprefix("--delimiter=")
    assert program == "sacct"
    assert args == ["--noheader", "--parsable", f"--delimiter={delimiter}", "--jobs", "41,42",
                    "--format", "JobID,TRESUsageInAve,TRESUsageInMax"]
    d = delimiter
    output = (f"41{d}{d}{d}\n41.batch{d}{AVE}{d}{MAX}{d}\n41.0{d}energy=0{d}energy=0{d}\n"
              f"bad row{d}\n42.batch{d}gres/gpuutil=x{d}{d}\n")
    parsed = parsing.parse_sacct_gpu_usage(output, d)
    assert parsed.malformed == 1
    rows = {row.job_id: row for row in parsed.rows}
    assert rows["41"].ave == rows["41"].max == parsing.GpuTres()
    assert rows["41.batch"].ave.util == 37.0 and rows["41.batch"].max.mem_mib == 2048.0
    assert rows["41.0"].max == rows["42.batch"].ave == parsing.GpuTres()


@pytest.mark.parametrize("job_ids", [[], ["0"], ["41", "4 2"], ["1,2"], ["-j"]])
def test_bad_job_ids_are_refused_before_sacct(job_ids):
    runner = _Runner()
    with pytest.raises(ValueError):
        Slurm(runner).gpu_usage(job_ids)
    assert runner.calls == []


@pytest.mark.integration
def test_real_sacct_has_the_fields_but_not_the_tres(slurm):
    """The bed's Slurm (Debian 12's 22.05) knows TRESUsageInAve/Max but records no gres/gpuutil:
    a finished job's steps read as no data, and nothing fails."""
    config = subprocess.run(["scontrol", "show", "config"], capture_output=True, text=True, check=True).stdout
    assert "gres/gpuutil" not in config
    since = datetime.now(UTC) - timedelta(days=30)
    ended = [row.job_id for row in slurm.accounting(since=since).rows
             if row.base_state == "COMPLETED" and row.job_id.isdigit()]  # not an array task (<id>_<n>)
    if not ended:
        pytest.skip("no finished job in the bed's accounting yet")
    parsed = slurm.gpu_usage(ended[-3:])
    assert parsed.malformed == 0 and parsed.rows
    assert {row.job_id.split(".")[0] for row in parsed.rows} <= set(ended[-3:])
    assert all(row.ave == row.max == parsing.GpuTres() for row in parsed.rows)
