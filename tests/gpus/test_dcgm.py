"""DCGM job statistics (portal.gpus.dcgm): the exact `dcgmi` command lines of the prolog/epilog
workflow, and `dcgmi stats --job <id> --verbose` read into GpuSummary's figures."""

import pytest

from portal.gpus import dcgm

# A DCGM job report as `dcgmi stats -j <id> -v` prints it: GPU 0's block is a published one (an ABCI
# user's gist of DCGM 2.x output, gist.github.com/stakizawa/f3d3eccef2f61fce4efde147d52b2b41; its
# "SM Utilization" row from a DCGM 2.x report of a Slurm job published with MiniGPT-Med), the
# Summary block and GPUs 1 and 2 are made up in the same layout.
VERBOSE = """\
Successfully retrieved statistics for job: 4242.
+------------------------------------------------------------------------------+
| Summary                                                                      |
+====================================+=========================================+
|-----  Execution Stats  ------------+-----------------------------------------|
| Start Time                         | Sun Jan 10 00:42:38 2021                |
| End Time                           | Sun Jan 10 01:25:35 2021                |
| Total Execution Time (sec)         | 2576.78                                 |
| No. of Processes                   | 2                                       |
+-----  Performance Stats  ----------+-----------------------------------------+
| Energy Consumed (Joules)           | 290000                                  |
| Power Usage (Watts)                | Avg: 56.8653, Max: 78.576, Min: 41.041  |
| Max GPU Memory Used (bytes)        | 4294967296                              |
| SM Utilization (%)                 | Avg: 42, Max: 97, Min: 0                |
+------------------------------------------------------------------------------+
| GPU ID: 0                                                                    |
+====================================+=========================================+
|-----  Execution Stats  ------------+-----------------------------------------|
| Start Time                         | Sun Jan 10 00:42:38 2021                |
| End Time                           | Sun Jan 10 01:25:35 2021                |
| Total Execution Time (sec)         | 2576.78                                 |
| No. of Processes                   | 1                                       |
+-----  Performance Stats  ----------+-----------------------------------------+
| Energy Consumed (Joules)           | 145919                                  |
| Power Usage (Watts)                | Avg: 56.8653, Max: 78.576, Min: 41.041  |
| Max GPU Memory Used (bytes)        | 1095761920                              |
| SM Clock (MHz)                     | Avg: 1157, Max: 1410, Min: 1155         |
| Memory Clock (MHz)                 | Avg: 1593, Max: 1593, Min: 1593         |
| SM Utilization (%)                 | Avg: 20, Max: 64, Min: 0                |
| Memory Utilization (%)             | Avg: 3, Max: 10, Min: 0                 |
| PCIe Rx Bandwidth (megabytes)      | Avg: N/A, Max: N/A, Min: N/A            |
| PCIe Tx Bandwidth (megabytes)      | Avg: N/A, Max: N/A, Min: N/A            |
+-----  Event Stats  ----------------+-----------------------------------------+
| Single Bit ECC Errors              | 0                                       |
| Double Bit ECC Errors              | 0                                       |
| Critical XID Errors                | 0                                       |
+------------------------------------------------------------------------------+
| GPU ID: 1                                                                    |
+====================================+=========================================+
| Energy Consumed (Joules)           | 144081                                  |
| Max GPU Memory Used (bytes)        | 4294967296                              |
| SM Utilization (%)                 | Avg: 64, Max: 97, Min: 5                |
+------------------------------------------------------------------------------+
| GPU ID: 2                                                                    |
+====================================+=========================================+
| Energy Consumed (Joules)           | N/A                                     |
| Max GPU Memory Used (bytes)        | N/A                                     |
| SM Utilization (%)                 | Avg: N/A, Max: N/A, Min: N/A            |
+------------------------------------------------------------------------------+
"""


def test_exact_command_lines():
    assert dcgm.group_create_argv("gpuportal") == ["dcgmi", "group", "--create", "gpuportal", "--default"]
    assert dcgm.stats_enable_argv(2) == ["dcgmi", "stats", "--group", "2", "--enable"]
    assert dcgm.job_start_argv("4242", 2) == ["dcgmi", "stats", "--group", "2", "--jstart", "4242"]
    assert dcgm.job_stop_argv("4242") == ["dcgmi", "stats", "--jstop", "4242"]
    assert dcgm.job_stats_argv("4242") == ["dcgmi", "stats", "--job", "4242", "--verbose"]
    assert dcgm.job_remove_argv("4242") == ["dcgmi", "stats", "--jremove", "4242"]


def test_verbose_report_per_gpu():
    stats = dcgm.parse_job_stats(VERBOSE)
    # GPU 2 reported nothing (N/A) but counts as a GPU of the job.
    assert stats == dcgm.DcgmJobStats(gpus=3, util_mean=42.0, util_max=97.0, mem_used_max_mib=4096.0,
                                      energy_wh=pytest.approx((145919 + 144081) / 3600))


def test_only_the_jobs_gpus():
    stats = dcgm.parse_job_stats(VERBOSE, gpus={0})
    assert stats == dcgm.DcgmJobStats(gpus=1, util_mean=20.0, util_max=64.0,
                                      mem_used_max_mib=pytest.approx(1095761920 / 1024**2),
                                      energy_wh=pytest.approx(145919 / 3600))
    assert dcgm.parse_job_stats(VERBOSE, gpus={7}) is None  # never the summary of other GPUs


def test_summary_only_report():
    summary_only = VERBOSE[:VERBOSE.index("| GPU ID: 0")]
    assert dcgm.parse_job_stats(summary_only) == dcgm.DcgmJobStats(
        gpus=1, util_mean=42.0, util_max=97.0, mem_used_max_mib=4096.0,
        energy_wh=pytest.approx(290000 / 3600))


def test_dcgm_1x_calls_it_gpu_utilization():
    old = "| GPU ID: 3 |\n| GPU Utilization (%) | Avg: 12.5, Max: 80, Min: 0 |\n"
    assert dcgm.parse_job_stats(old) == dcgm.DcgmJobStats(gpus=1, util_mean=12.5, util_max=80.0,
                                                          mem_used_max_mib=None, energy_wh=None)


@pytest.mark.parametrize("text", [
    "", "Error: Invalid job id. Job ID is not found.",  # what dcgmi prints for an unknown job
    "Error: unable to establish a connection to the specified host: localhost",
    "| Energy Consumed (Joules) | 100 |",  # a figure outside any block
    "| GPU ID: x |\n| Energy Consumed (Joules) | 100 |", "| GPU ID: 0 |\n| Energy Consumed (Joules) | -5 |",
    "| GPU ID: 0 |\n| SM Utilization (%) | Avg: , Max: 3 |", "|", "||||", "\x00\xff\n| GPU ID: 0 |",
    VERBOSE.replace("|", "!"),
])
def test_garbage_is_no_data(text):
    assert dcgm.parse_job_stats(text) is None
