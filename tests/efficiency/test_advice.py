"""The advice rule table (portal.efficiency.advice) on records that are never saved: each rule, its
threshold at the edge, unknown figures, short runs, sessions, and efficient work getting none."""

from datetime import UTC, datetime

import pytest

from portal.efficiency.advice import Advice, efficiency_advice
from portal.efficiency.models import Efficiency

HOUR = 3600
GIB = 1024


@pytest.fixture(autouse=True)
def _thresholds(settings):
    settings.EFFICIENCY_CPU_ADVICE_PERCENT = 50.0
    settings.EFFICIENCY_MEMORY_ADVICE_PERCENT = 50.0
    settings.EFFICIENCY_TIME_ADVICE_PERCENT = 50.0
    settings.EFFICIENCY_SHORT_RUN_MINUTES = 5.0


def _record(session: bool = False, **figures: object) -> Efficiency:
    """A job (or a session) that used what it asked for: 4 CPUs, 16 GB, 2 GPUs, 1 h."""
    values = {"partition": "gpu", "state": "COMPLETED", "ended_at": datetime(2026, 1, 1, tzinfo=UTC),
              "recorded_at": datetime(2026, 1, 1, tzinfo=UTC), "nodes": 1, "cpus": 4,
              "mem_requested_mb": 16 * GIB, "gpus": 2, "time_limit_seconds": HOUR, "elapsed_seconds": HOUR,
              "cpu_seconds": 4 * HOUR, "mem_peak_mb": 15 * GIB, "gpu_util_percent": 90.0, "gpus_busy": 2,
              **figures}
    record = Efficiency(**values)
    if session:
        record.session_id = 1
    else:
        record.job_id = 1
    return record


def _kinds(record: Efficiency) -> dict[str, Advice]:
    return {advice.kind: advice for advice in efficiency_advice(record)}


def test_efficient_work_gets_no_advice():
    assert efficiency_advice(_record()) == []
    assert efficiency_advice(_record(session=True)) == []


def test_the_issues_job_gets_all_four_figures_and_concrete_suggestions():
    """4 CPUs, 16 GB, 2 GPUs, 1 h asked; 1 CPU, ~200 MB and no busy GPU used."""
    record = _record(elapsed_seconds=40 * 60, cpu_seconds=40 * 60, mem_peak_mb=200, gpu_util_percent=0.0,
                     gpus_busy=0)
    advice = _kinds(record)
    assert advice["cpu"] == Advice("cpu", "1 of 4 CPU cores per node were busy on average (25 %): ask for "
                                          "--cpus-per-task=1.", "--cpus-per-task=1")
    assert advice["memory"] == Advice("memory", "Peak memory 0.2 GB of 16 GB: ask for --mem=1G.", "--mem=1G")
    assert advice["gpu"] == Advice("gpu", "Its 2 GPUs were idle: ask for --gpus=1, or a CPU partition if it "
                                          "needs none.", "--gpus=1")
    assert len(advice) == 3  # 40 min of 1 h is not below half: no time advice
    quick = _kinds(_record(elapsed_seconds=20 * 60, cpu_seconds=20 * 60, mem_peak_mb=200,
                           gpu_util_percent=0.0, gpus_busy=0))
    assert [a.option for a in quick.values()] == ["--cpus-per-task=1", "--mem=1G", "--gpus=1",
                                                  "--time=00:30:00"]


def test_the_issues_examples():
    memory = _kinds(_record(mem_requested_mb=48 * GIB, mem_peak_mb=3.1 * GIB))["memory"]
    assert memory == Advice("memory", "Peak memory 3.1 GB of 48 GB: ask for --mem=4G.", "--mem=4G")
    gpu = _kinds(_record(gpus=4, gpus_busy=1))["gpu"]
    assert gpu == Advice("gpu", "1 of 4 GPUs was busy: ask for --gpus=1.", "--gpus=1")
    time = _kinds(_record(time_limit_seconds=4 * HOUR, elapsed_seconds=12 * 60, cpu_seconds=48 * 60))["time"]
    assert time == Advice("time", "Finished in 12 min of 4 h: --time=00:30:00 starts sooner through "
                                  "backfill.", "--time=00:30:00")


@pytest.mark.parametrize(("cpu_seconds", "advised"), [(2 * HOUR, False), (2 * HOUR - 1, True)])
def test_cpu_threshold_edge(cpu_seconds, advised):
    """Exactly half the cores busy is not below 50 %."""
    advice = _kinds(_record(cpu_seconds=cpu_seconds)).get("cpu")
    assert (advice is not None) == advised
    if advised:
        assert advice.option == "--cpus-per-task=2"


def test_cpu_asks_for_at_least_one_core_and_counts_per_node():
    assert _kinds(_record(cpu_seconds=0.0))["cpu"].option == "--cpus-per-task=1"
    # 2 nodes x 8 cores, 3 cores' worth busy in all: 2 per node.
    two_nodes = _record(nodes=2, cpus=16, cpu_seconds=3 * HOUR)
    assert _kinds(two_nodes)["cpu"].option == "--cpus-per-task=2"


@pytest.mark.parametrize(("peak_mb", "advised"), [(8 * GIB, False), (8 * GIB - 1, True)])
def test_memory_threshold_edge(peak_mb, advised):
    assert ("memory" in _kinds(_record(mem_peak_mb=peak_mb))) == advised


def test_memory_is_not_advised_when_the_headroom_would_not_fit():
    """Under half of 1 GB used, but 1 GB is the least --mem asks for."""
    assert "memory" not in _kinds(_record(mem_requested_mb=GIB, mem_peak_mb=100))


def test_gpu_rules():
    one_idle = _kinds(_record(gpus=1, gpus_busy=0))["gpu"]
    assert one_idle == Advice("gpu", "Its GPU was idle: if it needs no GPU, run it on a CPU partition "
                                     "without --gpus.", "--gpus=0")
    assert _kinds(_record(gpus=4, gpus_busy=3))["gpu"].text == "3 of 4 GPUs were busy: ask for --gpus=3."
    assert "gpu" not in _kinds(_record(gpus=0, gpus_busy=0, gpu_util_percent=None))


@pytest.mark.parametrize(("elapsed", "advised"), [(30 * 60, False), (30 * 60 - 1, True)])
def test_time_threshold_edge(elapsed, advised):
    record = _record(elapsed_seconds=elapsed, cpu_seconds=4 * elapsed, time_limit_seconds=HOUR)
    assert ("time" in _kinds(record)) == advised


def test_time_is_not_advised_when_the_ask_would_not_be_shorter():
    record = _record(elapsed_seconds=9 * 60, cpu_seconds=36 * 60, time_limit_seconds=20 * 60)
    assert _kinds(record)["time"].option == "--time=00:15:00"
    record = _record(elapsed_seconds=6 * 60, cpu_seconds=24 * 60, time_limit_seconds=15 * 60)
    assert "time" not in _kinds(record)  # 15 min, the shortest ask, is what it had


def test_unknown_figures_give_no_advice():
    record = _record(cpu_seconds=None, mem_peak_mb=None, gpu_util_percent=None, gpus_busy=None,
                     time_limit_seconds=None)
    assert efficiency_advice(record) == []
    assert efficiency_advice(_record(mem_requested_mb=None, elapsed_seconds=0, cpu_seconds=0.0)) == []


def test_a_short_run_gets_no_memory_or_time_advice():
    short = _record(elapsed_seconds=4 * 60, cpu_seconds=60.0, mem_peak_mb=100, gpus_busy=1)
    assert sorted(_kinds(short)) == ["cpu", "gpu"]
    just_long_enough = _record(elapsed_seconds=5 * 60, cpu_seconds=20 * 60, mem_peak_mb=100)
    assert sorted(_kinds(just_long_enough)) == ["memory", "time"]


def test_the_short_run_and_thresholds_are_settings(settings):
    record = _record(elapsed_seconds=10 * 60, cpu_seconds=10 * 60, mem_peak_mb=100)
    assert sorted(_kinds(record)) == ["cpu", "memory", "time"]
    settings.EFFICIENCY_SHORT_RUN_MINUTES = 15
    settings.EFFICIENCY_CPU_ADVICE_PERCENT = 10
    assert _kinds(record) == {}


def test_a_sessions_advice_speaks_of_the_session_form():
    record = _record(session=True, elapsed_seconds=HOUR, time_limit_seconds=8 * HOUR, cpu_seconds=60.0,
                     mem_peak_mb=100, gpus=2, gpus_busy=1)
    advice = _kinds(record)
    assert sorted(advice) == ["gpu", "time"]  # its cores and memory come with its GPUs
    assert advice["gpu"] == Advice("gpu", "1 of 2 GPUs was busy: ask for 1 GPU.", "--gpus 1")
    assert advice["time"] == Advice(
        "time", "Ended after 1 h of 8 h: ask for 1.5 h; a shorter session starts sooner through backfill.",
        "--hours 1.5")
    idle = _kinds(_record(session=True, gpus=1, gpus_busy=0))["gpu"]
    assert idle.option == "--gpus 0" and "#SBATCH" not in idle.text and "--gpus=" not in idle.text
