"""The notebook templates: their shape, the "Using this cluster" notebook run with papermill in its
kernel, and the environments and data they need. The training templates run end to end inside
Slurm-spawned servers, one per environment, in tests/sessions/test_notebooks_real.py.

The templates train on the MNIST-format digits in ${GPUPORTAL_DATA_DIR:-/data}/mnist with small
parameters, and must beat chance clearly on the held-back split and leave TensorBoard events under
$HOME/logs. The environments and the data come from scripts/envs/build.sh; without them the
tests skip and say so. The structural checks at the top need none of it.
"""

import json
import os
import re
import shutil
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import nbformat
import pytest

from tests.notebook_templates import NOTEBOOKS, cluster_notebook, notebook_template, notebook_templates

ROOT = Path(__file__).resolve().parents[2]
ENVS = Path(os.environ.get("GPUPORTAL_ENVS", "/opt/gpuportal/envs"))
DATA = Path(os.environ.get("GPUPORTAL_DATA_DIR", "/data")) / "mnist"
KERNELS = Path(os.environ.get("GPUPORTAL_KERNELS_DIR", "/usr/local/share/jupyter/kernels"))

# The training templates, by the ~/logs folder their runs write to -> (small parameters, accuracy it
# must reach on the test split). Chance is 0.1 for the 10 digits, 1/3 for the 3 iris species.
TRAINING = {
    "pytorch-classifier": ({"EPOCHS": 3, "TRAIN_LIMIT": 1500}, 0.5),
    "pytorch-ddp": ({"NPROC": 2, "EPOCHS": 3, "TRAIN_LIMIT": 1500}, 0.5),
    "tensorflow-keras": ({"EPOCHS": 3, "TRAIN_LIMIT": 1500}, 0.5),
    "jax-flax": ({"EPOCHS": 3, "TRAIN_LIMIT": 1500}, 0.5),
    "r-model": ({"TEST_FRACTION": 0.3}, 0.8),
    "inference": ({"EPOCHS": 2, "TRAIN_LIMIT": 1500, "ITERATIONS": 10, "BATCH_SIZES": [1, 8, 64]}, 0.5),
}
ALL = [template.name for template in notebook_templates()]


def kernel_name(notebook: str) -> str:
    return nbformat.read(NOTEBOOKS / notebook, as_version=4).metadata.kernelspec.name


# --- structure (no environment needed) ------------------------------------------------------------


def test_every_template_is_the_cluster_notebook_or_a_training_one_with_test_parameters():
    templates = notebook_templates()
    cluster = cluster_notebook()
    assert cluster.logs is None
    assert sorted(t.logs for t in templates if t != cluster) == sorted(TRAINING)


def test_renaming_a_notebook_changes_only_its_name(tmp_path):
    """The tests find templates by kernel, ~/logs folder and code: a renamed copy is found the same."""
    renamed = tmp_path / "notebooks"
    shutil.copytree(NOTEBOOKS, renamed)
    for path in renamed.glob("*.ipynb"):
        path.rename(path.with_name(f"renamed-{path.stem[::-1]}.ipynb"))
    before, after = notebook_templates(), notebook_templates(renamed)
    assert [(t.kernel, t.logs, t.code_cells()) for t in before] != [] and len(before) == len(after)
    assert {(t.kernel, t.logs) for t in before} == {(t.kernel, t.logs) for t in after}
    assert all(t.name.startswith("renamed-") for t in after)
    for folder in TRAINING:
        old, new = notebook_template(logs=folder), notebook_template(logs=folder, directory=renamed)
        assert new.name != old.name and new.code_cells() == old.code_cells()
    old, new = cluster_notebook(), cluster_notebook(renamed)
    assert new.name != old.name and new.code_cells() == old.code_cells()


@pytest.mark.parametrize("notebook", ALL)
def test_notebook_shape(notebook):
    nb = nbformat.read(NOTEBOOKS / notebook, as_version=4)
    nbformat.validate(nb)
    code = [cell for cell in nb.cells if cell.cell_type == "code"]
    tagged = [cell for cell in code if "parameters" in cell.metadata.get("tags", [])]
    assert len(tagged) == 1, "one papermill parameters cell"
    assert all(not cell.outputs and cell.execution_count is None for cell in code), "committed with outputs"
    assert "FINAL_METRICS" in code[-1].source, "the last cell prints the metrics"
    assert nb.metadata.kernelspec.name in {"pytorch", "tensorflow", "jax", "ir"}


@pytest.mark.parametrize("folder", sorted(TRAINING))
def test_training_notebooks_write_to_tensorboard_logdir_when_it_is_set(folder):
    """#21: a notebook run as a batch job (TENSORBOARD_LOGDIR set) writes where the job's page reads."""
    assert "TENSORBOARD_LOGDIR" in "\n".join(notebook_template(logs=folder).code_cells())


def test_ddp_notebook_runs_the_shipped_script():
    """One source: notebook 03 and 01's batch job both run templates/mnist_ddp.py, which sits beside it."""
    nb = nbformat.read(notebook_template(logs="pytorch-ddp").path, as_version=4)
    assert not any(cell.source.startswith("%%writefile") for cell in nb.cells)
    assert any("mnist_ddp.py" in cell.source and "torchrun" in cell.source for cell in nb.cells
               if cell.cell_type == "code")
    assert (NOTEBOOKS / "mnist_ddp.py").is_file()


# --- end to end ------------------------------------------------------------------------------------


def env_ready(kernel: str) -> str | None:
    """Why `kernel` cannot run here, or None."""
    if not (KERNELS / kernel / "kernel.json").exists():
        return f"kernel {kernel!r} is not installed (scripts/envs/build.sh; 'ir': scripts/install.sh)"
    if kernel != "ir" and not (ENVS / kernel / ".gpuportal-stamp").exists():
        return f"env {kernel!r} is not built: run scripts/envs/build.sh {kernel}"
    if kernel != "ir" and not any(DATA.glob("train-images-idx3-ubyte*")):
        return f"no MNIST IDX files in {DATA}: run scripts/envs/build.sh"
    return None


def execute(notebook: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, **parameters: object) -> str:
    """Runs the notebook in a fresh HOME (and working directory); returns all its text output."""
    papermill = pytest.importorskip("papermill", reason="papermill is not installed (a dev dependency)")
    why = env_ready(kernel_name(notebook))
    if why:
        pytest.skip(why)
    home = tmp_path / "home"
    home.mkdir()
    shutil.copy(NOTEBOOKS / "mnist_ddp.py", tmp_path)  # beside the notebook, as in ~/templates
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("MPLCONFIGDIR", str(tmp_path / "mpl"))
    executed = papermill.execute_notebook(
        str(NOTEBOOKS / notebook), str(tmp_path / notebook), parameters=parameters, cwd=str(tmp_path),
        kernel_name=kernel_name(notebook), progress_bar=False, execution_timeout=240)
    return "".join(output.get("text", "") for cell in executed.cells for output in cell.get("outputs", []))


def final_metrics(text: str) -> dict:
    lines = re.findall(r"^FINAL_METRICS (\{.*\})\s*$", text, re.MULTILINE)
    assert lines, f"no FINAL_METRICS line in:\n{text[-3000:]}"
    return json.loads(lines[-1])


def scalar_tags(logdir: Path) -> set[str]:
    """Tags in the run's TensorBoard event files, read by TensorBoard's own loader (pytorch env)."""
    script = (
        "import sys, pathlib\n"
        "from tensorboard.backend.event_processing.event_file_loader import EventFileLoader\n"
        "for path in pathlib.Path(sys.argv[1]).rglob('events.out.tfevents.*'):\n"
        "    for event in EventFileLoader(str(path)).Load():\n"
        "        for value in event.summary.value:\n"
        "            print(value.tag)\n")
    found = subprocess.run([str(ENVS / "pytorch/bin/python"), "-c", script, str(logdir)], check=True,
                           capture_output=True, text=True, timeout=60)
    return set(found.stdout.split())


@pytest.mark.integration
def test_a_training_notebook_run_in_a_job_writes_its_events_to_tensorboard_logdir(tmp_path, monkeypatch):
    logdir = tmp_path / "job-logdir"
    monkeypatch.setenv("TENSORBOARD_LOGDIR", str(logdir))
    notebook = notebook_template(logs="pytorch-classifier").name
    final_metrics(execute(notebook, tmp_path, monkeypatch, EPOCHS=1, TRAIN_LIMIT=300))
    assert scalar_tags(logdir) and not (tmp_path / "home" / "logs" / "pytorch-classifier").exists()


@pytest.mark.integration
def test_inference_notebook_quantizes_compares_and_times(tmp_path, monkeypatch):
    """#39: a model trained in the session, quantized to INT8 (calibrated on one part of the test
    split, scored on the other), its accuracy against FP32, and its timings per batch size."""
    parameters, accuracy = TRAINING["inference"]
    notebook = notebook_template(logs="inference").name
    metrics = final_metrics(execute(notebook, tmp_path, monkeypatch, RUN_NAME="t", **parameters))
    assert metrics["test_accuracy"] >= accuracy and metrics["fp32_top1"] >= accuracy
    assert abs(metrics["int8_top1_diff_points"] - 100 * (metrics["int8_top1"] - metrics["fp32_top1"])) < 0.02
    assert set(metrics["int8_speedup"]) == {"1", "8", "64"} and all(metrics["int8_speedup"].values())
    assert (tmp_path / "home/logs/inference/t/model.pt").stat().st_size > 100_000


@pytest.mark.integration
def test_cluster_notebook_without_token_submits_nothing(tmp_path, monkeypatch):
    monkeypatch.delenv("GPUPORTAL_TOKEN", raising=False)
    text = execute(cluster_notebook().name, tmp_path, monkeypatch)
    metrics = final_metrics(text)
    assert "Skipped: no token" in text
    assert metrics["batch_job_id"] is None
    assert metrics["data_dir"]
    assert {"pytorch", "ir"} <= set(metrics["kernels"])


class _FakePortal(BaseHTTPRequestHandler):
    """Records what the notebook sends; answers like the portal's POST /api/v1/jobs/."""

    seen: list[dict] = []

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.seen.append({"path": self.path, "authorization": self.headers["Authorization"], "body": body})
        answer = json.dumps({"id": 42, "slurm_job_id": "4242", "state": "PENDING"}).encode()
        self.send_response(201)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, *args):
        pass


@pytest.mark.integration
def test_cluster_notebook_submits_the_batch_job_with_the_token(tmp_path, monkeypatch):
    """The submit cell's request, against a stand-in portal (the real API has its own tests)."""
    server = HTTPServer(("127.0.0.1", 0), _FakePortal)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    _FakePortal.seen = []
    try:
        monkeypatch.setenv("GPUPORTAL_URL", f"http://127.0.0.1:{server.server_port}")
        text = execute(cluster_notebook().name, tmp_path, monkeypatch, TOKEN="k3y", EPOCHS=2, GPUS=1)
    finally:
        server.shutdown()
    assert final_metrics(text)["batch_job_id"] == 42
    [request] = _FakePortal.seen
    assert request["path"] == "/api/v1/jobs/"
    assert request["authorization"] == "Token k3y"
    assert request["body"]["template"] == "pytorch-train"
    assert request["body"]["parameters"] == {"entrypoint": "templates/mnist_ddp.py", "args": "--epochs 2",
                                             "gpus": 1}


# --- the environments and the data ------------------------------------------------------------------


ENV_NAMES = sorted(path.stem for path in (ROOT / "scripts/envs").glob("*.txt"))


@pytest.mark.integration
@pytest.mark.parametrize("name", ENV_NAMES)
def test_env_manifest_and_kernel(name):
    if not (ENVS / name / ".gpuportal-stamp").exists():
        pytest.skip(f"env {name!r} is not built: run scripts/envs/build.sh {name}")
    manifest = json.loads((ENVS / name / "gpuportal-env.json").read_text())
    spec = json.loads((KERNELS / name / "kernel.json").read_text())
    assert manifest["name"] == manifest["kernel"] == name
    assert manifest["python"].startswith("3.11.")
    assert spec["argv"][0] == manifest["executable"] == str(ENVS / name / "bin/python")
    assert spec["display_name"] == manifest["display_name"]
    # The versions were detected by importing, so they must agree with the pins they came from.
    requirements = (ROOT / f"scripts/envs/{name}.txt").read_text()
    pins = dict(re.findall(r"^([A-Za-z0-9_.-]+)(?:\[\w+\])?==(\S+)", requirements, re.MULTILINE))
    for framework, version in manifest["frameworks"].items():
        pinned = pins.get(framework) or pins.get(f"{framework}-cpu")
        if pinned:
            assert version.split("+")[0] == pinned, (framework, version, pinned)
    # Servers run as the end user: the env must be readable and runnable by anybody.
    python = ENVS / name / "bin/python"
    assert (ENVS / name).stat().st_mode & 0o005 == 0o005
    assert python.resolve().stat().st_mode & 0o001


@pytest.mark.integration
def test_build_is_a_quick_no_op_when_nothing_changed():
    stamps = [ENVS / name / ".gpuportal-stamp" for name in ENV_NAMES]
    if not all(stamp.exists() for stamp in stamps):
        pytest.skip("not every env is built: run scripts/envs/build.sh")
    for name, stamp in zip(ENV_NAMES, stamps, strict=True):
        wanted = subprocess.run(["sha256sum", str(ROOT / f"scripts/envs/{name}.txt")], check=True,
                                capture_output=True, text=True).stdout.split()[0]
        if stamp.read_text().split()[0] != wanted:
            pytest.skip(f"{name} is out of date (this test would rebuild it): run scripts/envs/build.sh")
    done = subprocess.run([str(ROOT / "scripts/envs/build.sh")], check=True, capture_output=True, text=True,
                          timeout=30, env={**os.environ, "GPUPORTAL_ENVS_NO_DATA": "1"})
    assert done.stdout.count("up to date") == len(ENV_NAMES), done.stdout


@pytest.mark.integration
def test_mnist_writer(tmp_path):
    python = next((ENVS / name / "bin/python" for name in ENV_NAMES
                   if (ENVS / name / ".gpuportal-stamp").exists()), None)
    if python is None:
        pytest.skip("no env built (mnist.py needs scikit-learn): run scripts/envs/build.sh")
    out = tmp_path / "mnist"
    run = [str(python), str(ROOT / "scripts/envs/mnist.py"), "--out", str(out)]
    assert "wrote 1500 training + 297 test" in subprocess.run(run, check=True, capture_output=True,
                                                              text=True).stdout
    images = (out / "train-images-idx3-ubyte").read_bytes()
    assert images[:16] == bytes.fromhex("00000803 000005dc 0000001c 0000001c")  # 2051, 1500, 28, 28
    assert len(images) == 16 + 1500 * 28 * 28
    labels = (out / "t10k-labels-idx1-ubyte").read_bytes()
    assert labels[:8] == bytes.fromhex("00000801 00000129")  # 2049, 297
    assert set(labels[8:]) == set(range(10))
    assert max(images[16:]) == 255
    readme = (out / "README.txt").read_text()
    assert ("scikit-learn's 1,797 UCI handwritten digits, resized to 28x28, in MNIST IDX format — "
            "not the real MNIST") in readme
    before = (out / "train-images-idx3-ubyte").stat().st_mtime_ns
    assert "up to date" in subprocess.run(run, check=True, capture_output=True, text=True).stdout
    assert (out / "train-images-idx3-ubyte").stat().st_mtime_ns == before
