"""Inference benchmarks (#39): the template's report and trtexec's summary parsed into results, the
exact trtexec command lines the template runs on a GPU, the result page with its tables and charts
(published TensorRT figures on a V100 result entered by hand), and the link from a training job.

trtexec samples (tests/benchmarks/fixtures/trtexec/, see the README there), as printed in public
threads:
- TensorRT 10: https://github.com/NVIDIA/TensorRT/issues/4177 (lix19937, 2024-10-03), the summary;
- TensorRT 8.4: https://github.com/OE4T/meta-tegra/pull/952 (run-tensorrt-tests on a Jetson AGX
  Xavier), the summary and its `&&&& PASSED ... --batch=16` line;
- TensorRT 7: https://github.com/NVIDIA/TensorRT/issues/2054 (2022-06-14), the `Host Latency` block.
"""

import importlib.util
import json
import pwd
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from portal.benchmarks import charts
from portal.benchmarks.parsers import parse
from portal.benchmarks.services import result_import
from portal.jobs.job_templates import JobPaths, catalog, script_body_render
from portal.jobs.models import JobState
from tests.environments.conftest import REAL_ROOT, needs_real_envs
from tests.factories import JobFactory, UserFactory

FIXTURES = Path(__file__).parent / "fixtures"
ROOT = Path(__file__).resolve().parents[2]
INFER = ROOT / "templates/jobs/inference-benchmark/infer.py"


def _infer():
    """The template's script as a module (it is plain Python, included verbatim in the job script)."""
    spec = importlib.util.spec_from_file_location("infer", INFER)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# --- parsers ---------------------------------------------------------------------------------------


def test_trtexec_10_summary():
    result = parse("trtexec", (FIXTURES / "trtexec/trt10_issue4177_summary.txt").read_text())
    assert result["parsed"] and result["qps"] == 130.298
    assert result["latency_ms"] == {"min": 5.38672, "max": 13.3664, "mean": 7.60628, "median": 7.16092,
                                    "p90": 10.2996, "p95": 10.8698, "p99": 12.9675}
    assert result["gpu_compute_median_ms"] == 7.14139 and result["host_walltime_s"] == 3.00082
    # No command line in the excerpt: the batch size, hence images/s, is unknown and not guessed.
    assert result["batch_size"] is None and result["images_per_sec"] is None


def test_trtexec_8_4_with_its_implicit_batch():
    result = parse("trtexec", (FIXTURES / "trtexec/trt84_meta_tegra952_batch16.txt").read_text())
    assert result["parsed"] and result["passed"] and result["tensorrt_version"] == "8.4.0"
    assert result["command"] == "trtexec --loadEngine=mnist16.trt --batch=16"
    assert (result["batch_size"], result["qps"]) == (16, 41087.7)
    assert result["images_per_sec"] == pytest.approx(16 * 41087.7)
    assert result["latency_ms"]["median"] == 0.401947 and result["latency_ms"]["p99"] == 0.420288


def test_trtexec_7_host_latency_block_and_its_zero_throughput():
    result = parse("trtexec", (FIXTURES / "trtexec/trt7_issue2054_host_latency.txt").read_text())
    assert result["parsed"]
    assert result["latency_ms"] == {"min": 1.64058, "max": 6.2915, "mean": 1.66069, "median": 1.65601,
                                    "p99": 1.67065}
    assert result["qps"] is None  # it printed "throughput: 0 qps": no figure


def test_trtexec_failure_names_the_error():
    text = ("[E] Error[4]: [network.cpp::validate::2882] Error Code 4: Internal Error\n"
            "&&&& FAILED TensorRT.trtexec [TensorRT v8601] # trtexec --onnx=model.onnx --int8\n")
    result = parse("trtexec", text)
    assert not result["parsed"] and "&&&& FAILED TensorRT.trtexec" in result["reason"]


def test_a_batch_no_run_can_have_is_no_figure():
    """Found by the fuzz test: a mangled batch size overflowed images/s (and would the database)."""
    huge = "9" * 400
    result = parse("trtexec", f"Throughput: 5 qps\n&&&& PASSED TensorRT.trtexec # trtexec --batch={huge}")
    assert result["parsed"] and (result["batch_size"], result["images_per_sec"]) == (None, None)
    report = (FIXTURES / "inference/bed_mnist_cnn_smoke.txt").read_text()
    report = report.replace("fp32          1 ", f"fp32 {huge} ")
    assert [r["batch_size"] for r in parse("inference", report)["rows"]][:1] == [8]


def test_template_report_every_case_and_int8_accuracy():
    result = parse("inference", (FIXTURES / "inference/bed_mnist_cnn_smoke.txt").read_text())
    assert result["parsed"] and result["smoke"] and result["engine"].startswith("PyTorch 2.")
    cases = {(r["precision"], r["batch_size"]): r for r in result["rows"]}
    assert set(cases) == {(p, b) for p in ("fp32", "bf16", "int8") for b in (1, 8)}
    assert cases[("int8", 8)]["images_per_sec"] == 59.6 and cases[("int8", 8)]["p99_ms"] == 198.472
    assert cases[("fp32", 1)]["top1"] == 0.9086 and cases[("int8", 1)]["top1"] == 0.8985
    assert result["accuracy"]["int8"] == {
        "images": 197, "top1_pct": 89.85, "fp32_top1_pct": 90.86, "top1_diff_points": -1.02,
        "top5_pct": 100.0, "fp32_top5_pct": 100.0, "top5_diff_points": 0.0}
    assert not parse("inference", "Inference benchmark (gpuportal inference-benchmark template)\n")["parsed"]


# --- the template ----------------------------------------------------------------------------------


def test_exact_trtexec_command_lines():
    infer = _infer()
    common = dict(onnx="model.onnx", input_name="input", shape=(3, 224, 224), iterations=500,
                  calibration_cache="calibration.cache", times="times.json")
    assert infer.trtexec_argv(precision="fp32", batch=1, **common) == [
        "trtexec", "--onnx=model.onnx", "--shapes=input:1x3x224x224", "--warmUp=500", "--iterations=500",
        "--duration=0", "--percentile=50,90,99", "--exportTimes=times.json"]
    assert infer.trtexec_argv(precision="fp16", batch=64, **common) == [
        "trtexec", "--onnx=model.onnx", "--shapes=input:64x3x224x224", "--warmUp=500", "--iterations=500",
        "--duration=0", "--percentile=50,90,99", "--exportTimes=times.json", "--fp16"]
    int8 = infer.trtexec_argv(precision="int8", batch=8, **common)
    assert int8[2] == "--shapes=input:8x3x224x224" and int8[-2:] == ["--int8", "--calib=calibration.cache"]
    # What --dry-run prints for the template's defaults: one engine per precision and batch size.
    lines = subprocess.run([sys.executable, str(INFER), "--dry-run", "--precisions", "fp32,int8",
                            "--batch-sizes", "1,64", "--iterations", "200"],
                           capture_output=True, text=True, check=True).stdout.splitlines()
    assert lines == [
        "trtexec --onnx=model.onnx --shapes=input:1x1x28x28 --warmUp=500 --iterations=200 --duration=0 "
        "--percentile=50,90,99 --exportTimes=times-fp32-1.json",
        "trtexec --onnx=model.onnx --shapes=input:64x1x28x28 --warmUp=500 --iterations=200 --duration=0 "
        "--percentile=50,90,99 --exportTimes=times-fp32-64.json",
        "trtexec --onnx=model.onnx --shapes=input:1x1x28x28 --warmUp=500 --iterations=200 --duration=0 "
        "--percentile=50,90,99 --exportTimes=times-int8-1.json --int8 --calib=calibration.cache",
        "trtexec --onnx=model.onnx --shapes=input:64x1x28x28 --warmUp=500 --iterations=200 --duration=0 "
        "--percentile=50,90,99 --exportTimes=times-int8-64.json --int8 --calib=calibration.cache",
    ]


def test_percentiles_interpolate_between_ranks():
    infer = _infer()
    values = [float(v) for v in range(1, 101)]
    assert (infer.percentile(values, 50), infer.percentile(values, 99)) == (50.5, pytest.approx(99.01))


@pytest.mark.parametrize("value", ["$(id)", "a b; rm -rf ~", "`id`"])
def test_paths_reach_the_script_quoted(value):
    template = catalog().templates["inference-benchmark"]
    values = {p.name: p.clean(None) for p in template.parameters}
    values["checkpoint"] = value  # past validation on purpose: only the quoting stands in the way
    body = script_body_render(template=template, values=values,
                              job=JobPaths(id="x", dir="/tmp/x", stdout="/o", stderr="/e"))
    assert f"CHECKPOINT={shlex.quote(value)}\n" in body
    assert 'python3 infer.py --model mnist-cnn --checkpoint "$CHECKPOINT" --data "$DATA"' in body
    assert INFER.read_text() in body  # the script travels verbatim


# --- history, pages, charts ------------------------------------------------------------------------


@pytest.mark.django_db
def test_a_v100_result_entered_by_hand_shows_the_published_points(client):
    """An admin imports a ResNet-50 run as a V100's: its charts and tables carry the published
    TensorRT figures for ResNet-50 on a V100 (speed-ups, ~7 ms latency, top-1/top-5), each labelled
    with its document; an A100 result gets none of them."""
    admin = UserFactory(username="ada", is_staff=True)
    text = (FIXTURES / "inference/bed_resnet50_smoke_random_weights.txt").read_text()
    results = result_import(user=admin, tool="inference", text=text,
                            context={"gpu_type": "v100", "model": "resnet50", "gpus": 1})
    assert sorted(r.case for r in results) == ["fp32 batch 1", "fp32 batch 4", "int8 batch 1", "int8 batch 4"]
    assert {(r.framework, r.precision, r.batch_size_per_gpu, r.unit) for r in results} >= {
        ("PyTorch", "int8", 4, "images/s")}
    client.force_login(admin)
    page = client.get(f"/benchmarks/{results[0].pk}/")
    html = page.content.decode()
    assert page.status_code == 200 and 'id="inference-table"' in html and html.count("data-case=") == 4
    speedup = _spec(html, "inference-speedup")
    published = [row for row in speedup["data"]["values"] if row["kind"] == "reference"]
    assert sorted(row["speedup"] for row in published) == [2.5, 3.5, 3.7]
    assert all("Dell EMC" in row["reference"] and "V100" in row["reference"] for row in published)
    latency = _spec(html, "inference-latency")
    assert [row["latency_ms"] for row in latency["data"]["values"] if row["kind"] == "reference"] == [7]
    accuracy = charts.inference_accuracy(results[0])
    assert [row["top1"] for row in accuracy] == [0.0, 72.84]
    assert accuracy[1]["top1_diff"] == -0.07 and accuracy[1]["source"].startswith("Published: Dell EMC")
    assert 'id="inference-published"' in html and "3.2 Deep Learning Inference" in html
    # The same output as an A100's: nothing published to compare with, and the page says so.
    other = result_import(user=admin, tool="inference", text=text,
                          context={"gpu_type": "a100", "model": "resnet50"})
    assert charts.inference_published(other[0]) == []
    assert 'id="no-published"' in client.get(f"/benchmarks/{other[0].pk}/").content.decode()
    # The charts page draws the newest run that matches its filters.
    newest = _spec(client.get("/benchmarks/charts/?kind=inference&gpu_type=v100").content.decode(), "chart")
    assert {row["series"] for row in newest["data"]["values"]} == {"fp32", "int8"}
    assert _spec(client.get("/benchmarks/charts/?kind=inference&gpu_type=h100").content.decode(),
                 "chart")["data"]["values"] == []


@pytest.mark.django_db
def test_trtexec_output_entered_by_hand_lands_in_history_api_and_csv(client):
    admin = UserFactory(username="ada", is_staff=True)
    text = (FIXTURES / "trtexec/trt84_meta_tegra952_batch16.txt").read_text()
    [result] = result_import(user=admin, tool="trtexec", text=text, context={"gpu_type": "xavier"})
    assert (result.metric, result.framework, result.framework_version, result.batch_size_per_gpu) == (
        "images_per_sec", "TensorRT", "8.4.0", 16)
    client.force_login(admin)
    listed = client.get("/api/v1/benchmarks/?tool=trtexec").json()["results"]
    assert [r["id"] for r in listed] == [result.pk]
    throughput = _spec(client.get(f"/benchmarks/{result.pk}/").content.decode(), "inference-throughput")
    assert [(r["series"], r["batch_size"]) for r in throughput["data"]["values"]] == [("fp32", 16)]


def _spec(html, chart_id):
    start = html.index(f'id="{chart_id}-spec"')
    return json.loads(html[html.index(">", start) + 1: html.index("</script>", start)])


@pytest.mark.django_db
def test_a_completed_training_job_links_to_the_composer_with_its_checkpoint(client):
    alice = UserFactory(username="alice")
    job = JobFactory(user=alice, template="pytorch-train", state=JobState.COMPLETED,
                     parameters={"entrypoint": "templates/mnist_ddp.py", "smoke": False})
    client.force_login(alice)
    html = client.get(f"/jobs/{job.pk}/").content.decode()
    home = pwd.getpwnam("alice").pw_dir
    assert (f'href="/jobs/new/inference-benchmark/?model=mnist-cnn&amp;checkpoint={home.replace("/", "%2F")}'
            f'%2Flogs%2Fjobs%2F{job.uuid}%2Fmodel.pt" id="inference-link"') in html
    composer = client.get(f"/jobs/new/inference-benchmark/?model=mnist-cnn&checkpoint={home}/logs/jobs/"
                          f"{job.uuid}/model.pt").content.decode()
    assert f'value="{home}/logs/jobs/{job.uuid}/model.pt"' in composer
    for other in (JobFactory(user=alice, template="pytorch-train", state=JobState.RUNNING),
                  JobFactory(user=alice, template="resnet50-benchmark", state=JobState.COMPLETED)):
        assert 'id="inference-link"' not in client.get(f"/jobs/{other.pk}/").content.decode()


@pytest.mark.integration
@needs_real_envs
def test_on_a_gpu_with_tensorrt_each_case_is_one_trtexec_run(tmp_path):
    """The TensorRT path end to end with stand-ins for what the bed lacks (batchspawner's way): an
    nvidia-smi, a trtexec that records its command line and prints TensorRT 10's published summary,
    an onnx package (the export itself is replaced). Without TensorRT's Python module no calibration
    cache can be written, so INT8 says so and measures nothing."""
    stubs = tmp_path / "bin"
    (stubs / "onnx").mkdir(parents=True)
    (stubs / "onnx/__init__.py").write_text("")
    summary = FIXTURES / "trtexec/trt10_issue4177_summary.txt"
    for name, body in (("nvidia-smi", 'echo "NVIDIA-SMI version  : 550.54.15"'),
                       ("trtexec", f'echo "$*" >> {tmp_path}/argv\ncat {summary}')):
        (stubs / name).write_text(f"#!/bin/bash\n{body}\n")
        (stubs / name).chmod(0o755)
    driver = ("import sys\nsys.path.insert(0, sys.argv[1])\nimport infer\n"
              "infer.onnx_export = lambda model, example, path: path.write_bytes(b'stand-in')\n"
              "sys.exit(infer.main(sys.argv[2:]))\n")
    done = subprocess.run(
        [str(REAL_ROOT / "pytorch/bin/python"), "-c", driver, str(INFER.parent), "--precisions", "fp16,int8",
         "--batch-sizes", "1,8", "--iterations", "300"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
        env={"PATH": f"{stubs}:/usr/bin:/bin", "PYTHONPATH": str(stubs), "HOME": str(tmp_path)})
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "argv").read_text().splitlines() == [
        f"--onnx=model.onnx --shapes=input:{batch}x1x28x28 --warmUp=500 --iterations=300 --duration=0 "
        f"--percentile=50,90,99 --exportTimes=times-{precision}-{batch}.json{flag}"
        for precision, flag in (("fp32", ""), ("fp16", " --fp16")) for batch in (1, 8)]
    report = parse("inference", done.stdout)
    assert report["engine"] == f"TensorRT trtexec ({stubs}/trtexec)"
    rows = {(r["precision"], r["batch_size"]): r for r in report["rows"]}
    assert rows[("fp16", 8)]["images_per_sec"] == pytest.approx(8 * 130.298, abs=0.1)
    fp16 = rows[("fp16", 8)]
    assert (fp16["p50_ms"], fp16["p90_ms"], fp16["p99_ms"]) == pytest.approx((7.161, 10.3, 12.968), abs=1e-3)
    assert rows[("fp32", 1)]["top1"] is None and "top-1 not measured" in rows[("fp32", 1)]["note"]
    assert rows[("int8", 1)]["images_per_sec"] is None
    assert rows[("int8", 1)]["note"].startswith("not run: writing the calibration cache needs TensorRT's")
