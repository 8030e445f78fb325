"""Must show (#39) on the bed: a pytorch-train job trains the bundled MNIST CNN (one epoch) through the
portal and saves its checkpoint; its page's "Benchmark inference of this model" link fills the
inference-benchmark composer; that template then runs in smoke mode on the real Slurm, in FP32 and
INT8 at batch sizes 1, 8 and 64, in the PyTorch environment. Every case is recorded with its
throughput, p50/p90/p99 and top-1; INT8's accuracy difference is the one the job printed; the charts
have both lines; the result links back to the training job and its run in tracking."""

import html
import re
import time
from urllib.parse import parse_qs, urlsplit

import pytest

from portal.benchmarks import charts
from portal.benchmarks.models import BenchmarkResult
from portal.jobs.models import TERMINAL_STATES, JobState
from tests.environments.conftest import bundled_script, needs_real_envs, pytorch_env  # noqa: F401
from tests.jobs.conftest import cleanup_jobs, poll_until, polled  # noqa: F401 (fixtures)

pytestmark = [
    pytest.mark.integration,
    pytest.mark.django_db,
    needs_real_envs,
    pytest.mark.usefixtures("polled", "cleanup_jobs", "pytorch_env", "bundled_script"),
]


def _run(client, slurm, capture, template, parameters):
    response = client.post("/api/v1/jobs/", {"template": template, "name": f"infer {template}",
                                             "parameters": {"time_limit": 10, **parameters}}, format="json")
    assert response.status_code == 201, response.json()
    with capture(execute=True):  # jobs_ended (recording, tracking) runs once the cycle commits
        job = poll_until(slurm, response.json()["id"], TERMINAL_STATES, timeout=300)
    stdout = client.get(f"/api/v1/jobs/{job.pk}/log/?stream=stdout").json()["text"]
    stderr = client.get(f"/api/v1/jobs/{job.pk}/log/?stream=stderr").json()["text"]
    assert job.state == JobState.COMPLETED, f"{job.state} {job.exit_code}\n{stdout}\n{stderr}"
    return job, stdout


def test_trained_mnist_model_benchmarked_in_fp32_and_int8(token_client, user, slurm,
                                                          django_capture_on_commit_callbacks):
    training, _ = _run(token_client, slurm, django_capture_on_commit_callbacks, "pytorch-train",
                       {"args": "--epochs 1", "gpus": 1})
    token_client.force_login(user)
    page = token_client.get(f"/jobs/{training.pk}/").content.decode()
    link = html.unescape(re.search(r'href="([^"]+)" id="inference-link"', page).group(1))
    prefill = {key: values[0] for key, values in parse_qs(urlsplit(link).query).items()}
    assert prefill["model"] == "mnist-cnn" and prefill["checkpoint"].endswith(f"/{training.uuid}/model.pt")

    started = time.monotonic()
    job, stdout = _run(token_client, slurm, django_capture_on_commit_callbacks, "inference-benchmark",
                       {**prefill, "smoke": True, "precisions": "fp32,int8", "batch_sizes": "1,8,64",
                        "environment": "pytorch", "gpus": 1})
    elapsed = time.monotonic() - started
    print(f"\n{stdout}\nsubmitted to recorded: {elapsed:.1f} s")
    assert "Engine:       PyTorch" in stdout and "SIMULATED" not in stdout
    total = float(re.search(r"^Total:\s+([\d.]+) s$", stdout, re.MULTILINE).group(1))
    assert total < 60  # the smoke mode's promise, inside the job

    results = {r.case: r for r in BenchmarkResult.objects.filter(job=job)}
    assert set(results) == {f"{p} batch {b}" for p in ("fp32", "int8") for b in (1, 8, 64)}
    for result in results.values():
        assert result.parsed and result.value > 0 and result.unit == "images/s", result.reason
        context = (result.framework, result.model, result.gpu_type, result.gpus)
        assert context == ("PyTorch", "mnist-cnn", "a100", 1)
    rows = {(r["precision"], r["batch_size"]): r for r in results["int8 batch 8"].data["rows"]}
    for row in rows.values():
        assert 0 < row["p50_ms"] <= row["p90_ms"] <= row["p99_ms"] and row["timed_pct"] >= 95
    top1 = {p: rows[(p, 1)]["top1"] for p in ("fp32", "int8")}
    assert top1["fp32"] > 0.5  # one epoch of training: far above chance (0.1)
    printed = results["fp32 batch 1"].data["accuracy"]["int8"]
    assert printed["top1_diff_points"] == pytest.approx(100 * (top1["int8"] - top1["fp32"]), abs=0.02)
    assert f"({printed['top1_diff_points']:+.2f} points)" in stdout

    spec = charts.inference_throughput_chart(results["fp32 batch 1"])
    series = {row["series"] for row in spec["data"]["values"]}
    assert series == {"fp32", "int8"}
    assert len(charts.inference_speedups(results["fp32 batch 1"])) == 3
    result_page = token_client.get(f"/benchmarks/{results['int8 batch 64'].pk}/").content.decode()
    assert f'href="/jobs/{training.pk}/"' in result_page and "its run" in result_page
    assert result_page.count("data-case=") == 6 and 'id="inference-accuracy"' in result_page
    for name, result in sorted(results.items()):
        row = rows[(result.precision, result.batch_size_per_gpu)]
        print(f"{name:>14}: {result.value:8.1f} images/s  p50 {row['p50_ms']:.3f}  p90 {row['p90_ms']:.3f}  "
              f"p99 {row['p99_ms']:.3f} ms  top-1 {row['top1']:.4f}  timed {row['timed_pct']:.1f} %")
