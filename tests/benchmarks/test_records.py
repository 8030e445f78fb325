"""Recording results (from jobs and imports), their key figures, references and flags, the
published series: against the test database, the job output read through a stub."""

from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone

from portal.benchmarks import services
from portal.benchmarks.figures import figures
from portal.benchmarks.models import BenchmarkResult, PublishedResult, Reference
from portal.benchmarks.parsers import parse
from portal.benchmarks.services import (
    hostlist_expand,
    published_load,
    reference_create,
    reference_derive,
    result_import,
    result_record_from_job,
)
from portal.cluster.models import Node
from portal.core.errors import InvalidInput
from portal.environments.models import Environment
from portal.jobs.services.logs import LogChunk
from tests.benchmarks.factories import ResultFactory
from tests.factories import JobFactory, UserFactory

pytestmark = pytest.mark.django_db
FIXTURES = Path(__file__).parent / "fixtures"
RESNET_OUTPUT = """gpuportal job 7 (Slurm job 12) on vm at 2026-11-23T18:00:00+00:00
software environment: pytorch
Framework:   PyTorch 2.14.1 (torchvision 0.29.1)
Model:       resnet50
Dataset:     synthetic (32x32 images, smoke test on CPU)
Mode:        training
Batch size:  16 global
             8 per device
Num batches: 5
Devices:     ['cpu:0', 'cpu:1']
Precision:   fp32
1\timages/sec: 40.1\tloss 7.1
----------------------------------------------------------------
total images/sec: 41.50
----------------------------------------------------------------
"""


def _stub_output(monkeypatch, text: str) -> None:
    data = text.encode()

    def read(*, job, stream, offset=0, limit=None):
        chunk = data[offset : offset + (limit or len(data))]
        return LogChunk(
            stream, chunk.decode(), offset, offset + len(chunk), len(data), exists=True, complete=True
        )

    monkeypatch.setattr(services, "job_log_read", read)


def _ended_job(template="resnet50-benchmark", **params):
    now = timezone.now()
    return JobFactory(
        template=template,
        state="COMPLETED",
        started_at=now - timedelta(minutes=1),
        ended_at=now,
        node_list="vm",
        gpus_allocated=params.pop("gpus", 2),
        gpus_per_node=2,
        parameters={"precision": "fp32", "batch_size": 8, "environment": "pytorch", **params},
    )


@pytest.fixture
def cluster(partitions):
    Environment.objects.create(
        name="pytorch",
        title="PyTorch",
        path="/opt/gpuportal/envs/pytorch",
        frameworks={"torch": "2.14.1", "torchvision": "0.29.1"},
        healthy=True,
    )
    return Node.objects.get(name="vm")


def test_a_resnet_job_is_recorded_with_its_context(monkeypatch, cluster):
    _stub_output(monkeypatch, RESNET_OUTPUT)
    job = _ended_job()
    [result] = result_record_from_job(job_id=job.pk)
    assert (result.tool, result.metric, result.value, result.unit) == (
        "tf_cnn_benchmarks",
        "images_per_sec",
        41.5,
        "images/s",
    )
    assert (result.model, result.framework, result.framework_version) == ("resnet50", "PyTorch", "2.14.1")
    assert (result.precision, result.batch_size_per_gpu, result.gpus, result.nodes) == ("fp32", 8, 2, 1)
    assert (result.gpu_type, result.partition, result.environment) == ("a100", "gpu", "pytorch")
    assert (result.user, result.job, result.run_at) == (job.user, job, job.ended_at)
    assert result.parsed and not result.flagged and result.data["total_images_per_sec"] == 41.5
    # A retried task adds nothing.
    assert result_record_from_job(job_id=job.pk) == []
    assert BenchmarkResult.objects.count() == 1


def test_jobs_of_other_templates_and_unstarted_jobs_are_not_recorded(monkeypatch, cluster):
    _stub_output(monkeypatch, RESNET_OUTPUT)
    assert result_record_from_job(job_id=JobFactory(template="custom", started_at=timezone.now()).pk) == []
    assert (
        result_record_from_job(job_id=JobFactory(template="resnet50-benchmark", state="CANCELLED").pk) == []
    )
    assert not BenchmarkResult.objects.exists()


@pytest.mark.parametrize(
    "text",
    [
        "SIMULATED: no images/sec measured, ResNet-50 cannot run here (No module named 'torch')\n",
        # The old plain-Python stand-in printed a figure; with a SIMULATED marker it is never kept.
        "SIMULATED stand-in\ntotal images/sec: 999.0\n",
    ],
)
def test_a_simulated_run_is_kept_unparsed_never_as_a_figure(monkeypatch, cluster, text):
    _stub_output(monkeypatch, text)
    [result] = result_record_from_job(job_id=_ended_job().pk)
    assert not result.parsed and result.value is None and "simulated" in result.reason


def test_a_failed_job_keeps_its_reason(monkeypatch, cluster):
    _stub_output(monkeypatch, "Traceback (most recent call last):\nRuntimeError: CUDA error: out of memory\n")
    job = _ended_job()
    job.state, job.exit_code = "FAILED", 1
    job.save()
    [result] = result_record_from_job(job_id=job.pk)
    assert not result.parsed and "CUDA error: out of memory" in result.reason


def test_a_fio_run_is_one_result_per_fio_job(monkeypatch, cluster):
    text = "prologue line\n" + (FIXTURES / "fio/mixed_jsonplus_3.33.json").read_text()
    _stub_output(monkeypatch, text)
    results = result_record_from_job(job_id=_ended_job("storage-benchmark").pk)
    cases = {r.case: r for r in results}
    assert set(cases) == {"write 8k", "randrw 64k read", "randrw 64k write"}
    assert all(r.metric == "bw_mib_s" and r.unit == "MiB/s" and r.value > 0 for r in results)
    assert cases["write 8k"].framework == ""  # no framework for storage


def test_figures_of_every_tool():
    nccl = parse("nccl", (FIXTURES / "nccl/a3mega_h100_2nodes_all_reduce.txt").read_text())
    [figure] = figures("nccl", nccl)
    assert (figure.metric, figure.value, figure.unit) == ("busbw_gbps", 338.82, "GB/s")
    p2p = parse("p2p", (FIXTURES / "p2p/autodl_2x2080ti_p2p_disabled.txt").read_text())
    assert figures("p2p", p2p)[0].value == 6.1
    dle = parse("dle_resnet", (FIXTURES / "dle_resnet/dllogger_example_resnet_log.json").read_text())
    assert figures("dle_resnet", dle)[0].context["precision"] == "amp"
    mlperf = parse("mlperf", (FIXTURES / "mlperf/v1.0_nvidia_dgxa100_mxnet_resnet_result_0.txt").read_text())
    assert figures("mlperf", mlperf)[0].unit == "min"
    assert (
        figures("nvidia_smi", parse("nvidia_smi", (FIXTURES / "nvidia_smi/pkb_query_power.csv").read_text()))
        == []
    )
    assert figures("fio", {"parsed": False, "reason": "x"}) == []


def test_import_parses_like_a_job_and_keeps_an_unparsed_one():
    admin = UserFactory(username="ada", is_staff=True)
    text = (FIXTURES / "tf_cnn_benchmarks/azure_batchai_horovod_8gpu_resnet101_tf1.8.txt").read_text()
    [result] = result_import(user=admin, tool="tf_cnn_benchmarks", text=text, context={"gpu_type": "p100"})
    assert (result.model, result.gpus, result.value, result.framework_version) == (
        "resnet101",
        8,
        224.96,
        "1.8",
    )
    assert result.gpu_type == "p100" and result.source == "import" and result.user == admin
    [bad] = result_import(user=admin, tool="fio", text="\x00\xff random bytes", context={})
    assert not bad.parsed and bad.reason
    with pytest.raises(InvalidInput) as error:
        result_import(user=admin, tool="nope", text="x", context={})
    assert "tool" in error.value.fields


def test_a_result_outside_its_reference_is_flagged(monkeypatch, cluster):
    admin = UserFactory(username="ada", is_staff=True)
    reference_create(
        user=admin,
        tool="tf_cnn_benchmarks",
        metric="images_per_sec",
        value=100,
        lower=-0.1,
        upper=None,
        model="resnet50",
        gpus=2,
        gpu_type="a100",
        unit="images/s",
    )
    _stub_output(monkeypatch, RESNET_OUTPUT)  # 41.5 < 90
    [result] = result_record_from_job(job_id=_ended_job().pk)
    assert result.flagged and "outside [90" in result.flag_reason and result.reference is not None
    # Within the band: not flagged; another GPU type's reference does not apply.
    _stub_output(monkeypatch, RESNET_OUTPUT.replace("41.50", "95.00"))
    [ok] = result_record_from_job(job_id=_ended_job().pk)
    assert not ok.flagged and ok.reference == result.reference


def test_the_most_specific_reference_wins():
    admin = UserFactory(username="ada", is_staff=True)
    broad = reference_create(
        user=admin, tool="tf_cnn_benchmarks", metric="images_per_sec", value=10, lower=-0.5, upper=0.5
    )
    narrow = reference_create(
        user=admin,
        tool="tf_cnn_benchmarks",
        metric="images_per_sec",
        value=100,
        lower=-0.1,
        upper=0.1,
        partition="gpu",
        gpus=1,
    )
    result = ResultFactory.build(value=100.0, user=admin)
    assert services.reference_for(result) == narrow
    result.partition = "debug"
    assert services.reference_for(result) == broad


def test_reference_thresholds_are_checked():
    admin = UserFactory(username="ada", is_staff=True)
    with pytest.raises(InvalidInput) as error:
        reference_create(user=admin, tool="fio", metric="bw_mib_s", value=-1, lower=0.2, upper=-0.1)
    assert set(error.value.fields) == {"value", "lower", "upper"}


def test_a_reference_derived_from_the_median_of_chosen_runs():
    admin = UserFactory(username="ada", is_staff=True)
    runs = [ResultFactory(value=v) for v in (90.0, 100.0, 130.0)]
    reference = reference_derive(user=admin, result_ids=[r.pk for r in runs], lower=-0.05, upper=0.05)
    assert (reference.value, reference.origin, reference.gpus, reference.partition) == (
        100.0,
        "derived",
        1,
        "gpu",
    )
    assert reference.derived_from == sorted(r.pk for r in runs)
    other = ResultFactory(gpus=4)
    with pytest.raises(InvalidInput) as error:
        reference_derive(user=admin, result_ids=[runs[0].pk, other.pk], lower=None, upper=None)
    assert "derive_from" in error.value.fields


def test_published_results_ship_with_their_source_and_reload_idempotently():
    count = PublishedResult.objects.count()
    assert count > 300  # loaded by the data migration
    assert published_load() == count and PublishedResult.objects.count() == count
    assert not PublishedResult.objects.filter(source="").exists()
    row = PublishedResult.objects.filter(metric="images_per_sec", model__icontains="ResNet-50").first()
    assert row.source in row.citation and row.section in row.citation


def test_hostlist_expand():
    assert hostlist_expand("vm") == ["vm"]
    assert hostlist_expand("node[1-3,07],gpu01") == ["node1", "node2", "node3", "node07", "gpu01"]
    assert hostlist_expand("n[01-02]") == ["n01", "n02"]
    assert len(hostlist_expand("n[1-99999999]")) == 1024


def test_reference_band_is_what_flags():
    reference = Reference(value=100, lower=-0.1, upper=0.2)
    assert reference.bounds == pytest.approx((90, 120))
    assert reference.outside(89) and reference.outside(121) and not reference.outside(100)
    assert not Reference(value=100, lower=None, upper=None).outside(1e9)


def test_jobs_ended_records_through_the_task(monkeypatch, cluster):
    """The receiver only enqueues; the (eager here) task records every benchmark job it was given."""
    from portal.jobs.models import Job
    from portal.jobs.signals import jobs_ended

    _stub_output(monkeypatch, RESNET_OUTPUT)
    jobs = [_ended_job(), JobFactory(template="custom", started_at=timezone.now())]
    jobs_ended.send(sender=Job, job_ids=[job.pk for job in jobs])
    assert list(BenchmarkResult.objects.values_list("job_id", flat=True)) == [jobs[0].pk]


def test_unreadable_output_is_tried_again(monkeypatch, cluster):
    from portal.benchmarks.tasks import benchmarks_record
    from portal.core.errors import Unavailable

    data = RESNET_OUTPUT.encode()
    calls = []

    def read(*, job, stream, offset=0, limit=None):
        calls.append(job.pk)
        if len(calls) == 1:
            raise Unavailable("sudo did not answer")
        return LogChunk(stream, RESNET_OUTPUT, 0, len(data), len(data), exists=True, complete=True)

    monkeypatch.setattr(services, "job_log_read", read)
    job = _ended_job()
    benchmarks_record.delay([job.pk])  # eager here: the retry runs at once
    assert len(calls) == 2 and BenchmarkResult.objects.get().job == job
