"""What a server's job and the hub tell the portal, and what its kernels log to it.

- The job reports itself (`report_lines`): started on this node, and its exit code, with the
  portal's batch-job reporting (templates/jobs/_common/report.sh, included as it is).
- A session with GPUs samples them for the portal (`gpu_sampler_lines`): the batch jobs' sampler.
- The hub reports a server whose job waits in Slurm's queue, and why (`report_post`).
- The session's tokens go into the job's environment, never its script (`token_env`); with the
  tracking token, the MLflow client in the server's kernels logs to the portal (portal.tracking).
"""

import json
import logging
from pathlib import Path
from typing import Any

from tornado.httpclient import AsyncHTTPClient, HTTPClientError

# The job's own reports to the portal (started on node X, exiting with code N): shared with the
# portal's batch-job scripts, included as it is.
REPORT_SH = Path(__file__).resolve().parents[1] / "templates/jobs/_common/report.sh"
# The GPU sampler of batch jobs (plain Python, standard library only), included as it is too.
GPU_SAMPLER = Path(__file__).resolve().parents[1] / "templates/jobs/_common/gpu_sampler.py"
# What the MLflow client in a session's kernels needs to log to the portal (portal.tracking).
TRACKING_ENV = ("MLFLOW_TRACKING_URI", "MLFLOW_TRACKING_TOKEN", "MLFLOW_EXPERIMENT_NAME")
# The MLflow experiment a session's kernels log to by default (MLFLOW_EXPERIMENT_NAME): one per
# session name, so a session started again under its name goes on in the same experiment.
SESSION_EXPERIMENT = "session-{name}"


def token_env(*, report_token: str, tracking_token: str, portal_url: str, name: str) -> dict[str, str]:
    """The job's variables for the session's tokens: with the tracking token, the MLflow client in the
    server's kernels logs to the portal, as this session, into the session's experiment."""
    env = {"GPUPORTAL_REPORT_TOKEN": report_token} if report_token else {}
    if tracking_token and portal_url:
        experiment = SESSION_EXPERIMENT.format(name=name or "default")
        env.update(zip(TRACKING_ENV, (portal_url.rstrip("/"), tracking_token, experiment), strict=True))
    return env


def report_lines(*, report_token: str, gres: str) -> str:
    """The job reports to the portal itself: started on this node (in the background, the server
    does not wait), and its exit code from an EXIT trap (scancel's SIGTERM included). "Ready" comes
    from the server (gpuportal_ready.py)."""
    if not report_token or not REPORT_SH.is_file():
        return ""
    return "\n".join([
        REPORT_SH.read_text(),
        'GPUPORTAL_NODE=${SLURMD_NODENAME:-$(hostname)}',
        'gpuportal_report "{\\"event\\":\\"started\\",\\"node\\":\\"$GPUPORTAL_NODE\\"}" &',
        'trap \'gpuportal_report "{\\"event\\":\\"exited\\",\\"exit_code\\":$?}"\' EXIT',
        "trap 'exit 143' TERM",
        *gpu_sampler_lines(gres),
    ])


def gpu_sampler_lines(gres: str) -> list[str]:
    """A session with GPUs (`gres`): the batch jobs' GPU sampler, in the background on the host (a
    container's server too: it reads the job's GPUs with the node's nvidia-smi), pushing
    nvidia-smi's figures with the session's token, which it takes from the job's environment
    (never a command line). It stops when the script's shell is gone."""
    if not gres or not GPU_SAMPLER.is_file():
        return []
    source = GPU_SAMPLER.read_text()
    if "\nGPUPORTAL_GPU_SAMPLER_PY\n" in f"\n{source}\n":
        return []  # would end the here-document early
    return [
        'if [[ -n ${SLURM_JOB_GPUS:-${CUDA_VISIBLE_DEVICES:-}} && -n ${GPUPORTAL_REPORT_TOKEN:-} ]] \\',
        "    && command -v nvidia-smi >/dev/null 2>&1 && command -v python3 >/dev/null 2>&1; then",
        "  python3 - >/dev/null 2>&1 <<'GPUPORTAL_GPU_SAMPLER_PY' &",
        source.rstrip("\n"),
        "GPUPORTAL_GPU_SAMPLER_PY",
        "fi",
    ]


async def report_post(*, portal_url: str, report_token: str, body: dict[str, Any],
                      log: logging.Logger | logging.LoggerAdapter, who: str) -> None:
    """POST one report about `who`'s server to the portal; a lost one waits for its next poll."""
    try:
        await AsyncHTTPClient().fetch(
            f"{portal_url.rstrip('/')}/api/v1/reports/", method="POST", body=json.dumps(body),
            request_timeout=5, headers={"Authorization": f"Report {report_token}",
                                        "Content-Type": "application/json"})
    except (OSError, HTTPClientError) as error:
        log.warning("report %s of %s to the portal failed: %s", body["event"], who, error)
