"""The `inputs` a job records (issue 36): a template's own `inputs = [...]`, and an optional list at
submit (the built-in `inputs` parameter: paths under the user's folders, 400 naming it otherwise),
beside the path parameters; the job's own step hashes them."""

import hashlib
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from portal.jobs.job_templates import TemplateError, template_load
from portal.provenance.models import Provenance

ROOT = Path(__file__).resolve().parents[2]
STEP = ROOT / "templates/jobs/_common/provenance.py"
pytestmark = pytest.mark.django_db


def _template(tmp_path: Path, inputs: str) -> Path:
    folder = tmp_path / "reads-data"
    folder.mkdir()
    (folder / "template.toml").write_text(f'name = "R"\ndescription = "d"\n{inputs}\n')
    (folder / "script.sh.j2").write_text('set -euo pipefail\necho {{ job.inputs|argv }}\n')
    return folder


def test_a_template_declares_inputs(tmp_path):
    template = template_load(_template(tmp_path, 'inputs = ["data/set", "/shared/data/ref.bin"]'))
    assert template.inputs == ("data/set", "/shared/data/ref.bin")


@pytest.mark.parametrize("inputs", ['inputs = "data"', 'inputs = [1]', 'inputs = ["a\\u0007b"]'])
def test_a_template_s_bad_inputs_are_refused_at_load(tmp_path, inputs):
    with pytest.raises(TemplateError, match="`inputs` must be a list of paths"):
        template_load(_template(tmp_path, inputs))


def test_inputs_at_submit_are_recorded_with_the_path_parameters(token_client, partitions):
    body = {"template": "pytorch-train", "parameters": {
        "entrypoint": "proj/train.py", "data": "proj/data.bin", "environment": "", "time_limit": 5,
        "inputs": ["proj/labels.csv", "proj/data.bin", "/home/alice/extra"]}}
    response = token_client.post("/api/v1/jobs/", body, format="json")
    assert response.status_code == 201, response.content
    record = Provenance.objects.get(job_id=response.json()["id"])
    assert record.parameters["inputs"] == ["proj/labels.csv", "proj/data.bin", "/home/alice/extra"]
    # Each once, the path parameters first.
    assert "proj/train.py proj/data.bin proj/labels.csv /home/alice/extra <<'PY'" in record.script


@pytest.mark.parametrize(("inputs", "message"), [
    (["/etc/shadow"], "'/etc/shadow': "), (["proj/a", "proj/../../../etc"], "'proj/../../../etc': "),
    ([1], "Must be a list of paths."), ({"a": 1}, "Must be a list of paths."),
    ("proj/a", "Must be a list of paths."),
    (["x"] * 101, "At most 100 paths."),
])
def test_a_bad_input_is_a_400_naming_the_field(token_client, partitions, inputs, message):
    body = {"template": "custom", "parameters": {"commands": "true", "time_limit": 5, "inputs": inputs}}
    response = token_client.post("/api/v1/jobs/", body, format="json")
    assert response.status_code == 400, response.content
    assert message in response.json()["fields"]["parameters"]["inputs"][0]


def test_the_form_takes_inputs_one_a_line(client, user, partitions):
    client.force_login(user)
    page = client.get("/jobs/new/custom/").content.decode()
    assert '<textarea id="id_inputs" name="inputs" rows="2"' in page
    preview = client.post("/jobs/new/custom/", {"commands": "true", "time_limit": "5", "gpus": "1",
                                                "inputs": "proj/a.bin\r\nproj/b\r\n", "action": "preview"})
    assert preview.status_code == 200
    assert "provenance.json proj/a.bin proj/b &lt;&lt;" in preview.content.decode()


def test_the_jobs_step_hashes_each_input(tmp_path):
    (tmp_path / "a.bin").write_bytes(b"abc")
    (tmp_path / "set").mkdir()
    (tmp_path / "set/x").write_bytes(b"x")
    target = tmp_path / "record.json"
    paths = [str(tmp_path / name) for name in ("a.bin", "set", "gone")]
    subprocess.run([sys.executable, "-I", str(STEP), str(target), *paths], check=True, timeout=30)
    inputs = {item["path"]: item for item in json.loads(target.read_text())["inputs"]}
    assert inputs[str(tmp_path / "a.bin")]["sha256"] == \
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    assert inputs[str(tmp_path / "set")]["files"][0]["sha256"] is not None
    assert inputs[str(tmp_path / "gone")]["kind"] == "missing"


# --- past the bounds: hashed after the program starts ---

def _big(tmp_path: Path) -> Path:
    """A sparse file just past the start's byte bound: deferred at once, whatever the machine's speed."""
    path = tmp_path / "big.bin"
    with path.open("wb") as handle:
        handle.truncate(2 * 1024**3 + 1)
    return path


def _zeros_sha256(size: int) -> str:
    digest, block = hashlib.sha256(), bytes(1024**2)
    for _ in range(size // len(block)):
        digest.update(block)
    digest.update(bytes(size % len(block)))
    return digest.hexdigest()


def _wait_gone(path: Path, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while path.exists() and time.monotonic() < deadline:
        time.sleep(0.05)


def test_inputs_past_the_bounds_are_hashed_in_the_background(tmp_path):
    big, small = _big(tmp_path), tmp_path / "small.bin"
    small.write_bytes(b"abc")
    target = tmp_path / "record.json"
    begun = time.monotonic()
    subprocess.run([sys.executable, "-I", str(STEP), str(target), str(big), str(small)], check=True,
                   timeout=30)
    waited = time.monotonic() - begun
    first = json.loads(target.read_text())
    assert waited < 1.0 and first["seconds"] < 0.6  # the program is not kept waiting
    assert first["background"] == {"state": "hashing", "files": 1, "bytes": big.stat().st_size}
    listed = {item["path"]: item for item in first["inputs"]}
    assert listed[str(big)]["over_bound"] and listed[str(big)]["sha256"] is None
    assert listed[str(small)]["sha256"] is not None
    marker = target.with_name(target.name + ".hashing")
    assert marker.exists()  # the job's exit waits for it
    _wait_gone(marker, 60)
    final = json.loads(target.read_text())
    assert final["background"]["state"] == "done"
    [done] = [item for item in final["inputs"] if item["path"] == str(big)]
    assert done["sha256"] == _zeros_sha256(big.stat().st_size) and not done["over_bound"]


def test_a_folder_gets_a_merkle_hash_once_all_its_files_are_hashed(tmp_path):
    folder = tmp_path / "set"
    folder.mkdir()
    (folder / "a").write_bytes(b"a")
    (folder / "b").write_bytes(b"b")
    target = tmp_path / "record.json"
    subprocess.run([sys.executable, "-I", str(STEP), str(target), str(folder)], check=True, timeout=30)
    [item] = json.loads(target.read_text())["inputs"]
    lines = "".join(f"{hashlib.sha256(name).hexdigest()}  {name.decode()}\n" for name in (b"a", b"b"))
    assert item["sha256"] == hashlib.sha256(lines.encode()).hexdigest() and not item["over_bound"]


def test_the_background_stops_with_the_jobs_shell(tmp_path):
    big, target = _big(tmp_path), tmp_path / "record.json"
    # The shell the step runs under exits at once, as a job's does when it ends.
    subprocess.run(["bash", "-c", f'"$0" -I {STEP} {target} {big}; exit 0', sys.executable], check=True,
                   timeout=30)
    _wait_gone(target.with_name(target.name + ".hashing"), 30)
    record = json.loads(target.read_text())
    assert record["background"]["state"] == "hashing" and record["inputs"][0]["sha256"] is None


# --- a run's dataset inputs (MLflow's log-inputs), which the record is logged as ---

def test_log_inputs_keeps_a_dataset_per_run_name_and_digest(db):
    from tests.tracking.conftest import _mlflow_of

    alice, bob = _mlflow_of("alice"), _mlflow_of("bob")
    run_id = alice.run()
    dataset = {"name": "mnist", "digest": "d1", "source_type": "local", "source": "{}"}
    for tags in ([], [{"key": "mlflow.data.context", "value": "training"}]):  # again: its tags replaced
        alice.post("runs/log-inputs", {"run_id": run_id, "datasets": [{"dataset": dataset, "tags": tags}]})
    inputs = alice.get("runs/get", {"run_id": run_id})["run"]["inputs"]["dataset_inputs"]
    assert inputs == [{"dataset": dataset, "tags": [{"key": "mlflow.data.context", "value": "training"}]}]
    missing = alice.post("runs/log-inputs", {"run_id": run_id, "datasets": [{"dataset": {"name": "x"}}]},
                         status=400)
    assert missing["error_code"] == "INVALID_PARAMETER_VALUE" and "digest" in missing["message"]
    long = {**dataset, "digest": "d" * 37}
    assert alice.post("runs/log-inputs", {"run_id": run_id, "datasets": [{"dataset": long}]},
                      status=400)["error_code"] == "INVALID_PARAMETER_VALUE"
    assert bob.post("runs/log-inputs", {"run_id": run_id, "datasets": [{"dataset": dataset}]},
                    status=404)["error_code"] == "RESOURCE_DOES_NOT_EXIST"


def test_the_cli_sends_inputs_as_a_list():
    from gpuportal_cli.jobs import parameters_of

    schema = {"inputs": {"type": "array", "items": {"type": "string"}}}
    assert parameters_of(("inputs=proj/a.bin, proj/set",), schema) == {"inputs": ["proj/a.bin", "proj/set"]}
    assert parameters_of(("inputs=a\nb\n",), schema) == {"inputs": ["a", "b"]}  # @FILE, one a line
