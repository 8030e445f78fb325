"""A job's provenance as an RO-Crate (Workflow Run Crate profile, https://w3id.org/ro/wfrun/workflow):
the rendered script as the workflow, a CreateAction for the run with the inputs as its objects,
and the environment's lock, the code's diff and the input manifest as files."""

import io
import json
import tempfile
from pathlib import Path

from rocrate.model.computerlanguage import ComputerLanguage
from rocrate.model.contextentity import ContextEntity
from rocrate.rocrate import ROCrate

from portal.jobs.models import JobState
from portal.provenance.models import Provenance

PROFILES = ["https://w3id.org/ro/wfrun/process/0.5", "https://w3id.org/ro/wfrun/workflow/0.5",
            "https://w3id.org/workflowhub/workflow-ro-crate/1.0"]


def provenance_crate(record: Provenance) -> bytes:
    """The crate as a zip, in memory (a few files of bounded size)."""
    job, captured = record.job, record.captured or {}
    crate = ROCrate()
    crate.name = f"gpuportal job {job.uuid}"
    crate.description = f"{record.template} job {job.name!r}, as the portal recorded it"
    crate.license = "https://spdx.org/licenses/CC-BY-4.0"
    crate.root_dataset["conformsTo"] = [{"@id": profile} for profile in PROFILES]
    for profile in PROFILES:
        crate.add(ContextEntity(crate, profile, properties={"@type": "CreativeWork", "name": profile}))
    bash = crate.add(ComputerLanguage(crate, "#bash", properties={
        "name": "Bash", "identifier": {"@id": "https://www.gnu.org/software/bash/"},
        "url": {"@id": "https://www.gnu.org/software/bash/"}}))
    script = crate.add_workflow(io.BytesIO(record.script.encode()), "script.sh", main=True, lang=bash,
                                properties={"name": f"{record.template} batch script"})
    files = {
        "environment.lock": (record.environment_lock, f"Lock of environment {record.environment or '(none)'} "
                                                      f"({record.environment_lock_source})"),
        "code.diff": ("\n".join(item.get("diff", "") for item in captured.get("code", [])),
                      "Uncommitted changes of the code's work trees (capped)"),
        "inputs.json": (json.dumps(captured.get("inputs", []), indent=1),
                        "Input manifest: size, modification time and SHA-256 per file"),
        "provenance.json": (json.dumps(_document(record), indent=1), "The whole record"),
    }
    added = {name: crate.add_file(io.BytesIO(text.encode()), name,
                                  properties={"name": name, "description": description})
             for name, (text, description) in files.items()}
    inputs = [crate.add(ContextEntity(crate, f"#input-{index}", properties={
        "@type": "File" if item.get("kind") == "file" else "Dataset", "name": item.get("path", ""),
        "contentSize": item.get("size"), "sha256": item.get("sha256") or None}))
        for index, item in enumerate(captured.get("inputs", []))]
    properties = {"name": f"Run of job {job.uuid}", "actionStatus": "http://schema.org/CompletedActionStatus"
                  if job.state == JobState.COMPLETED else "http://schema.org/FailedActionStatus"}
    if job.started_at:
        properties["startTime"] = job.started_at.isoformat()
    if job.ended_at:
        properties["endTime"] = job.ended_at.isoformat()
    crate.add_action(script, identifier=f"#run-{job.uuid}", object=[*inputs, added["inputs.json"]],
                     result=[added["provenance.json"]], properties=properties)
    with tempfile.TemporaryDirectory() as folder:
        path = crate.write_zip(Path(folder) / "crate.zip")
        return Path(path).read_bytes()


def _document(record: Provenance) -> dict:
    return {"job": str(record.job.uuid), "template": record.template, "parameters": record.parameters,
            "resources": record.resources, "image": {"reference": record.image_reference,
                                                    "digest": record.image_digest,
                                                    "status": record.image_status,
                                                    "reason": record.image_reason},
            "environment": {"name": record.environment, "hash": record.environment_hash,
                            "source": record.environment_lock_source},
            "captured": record.captured, "capture_state": record.capture_state}
