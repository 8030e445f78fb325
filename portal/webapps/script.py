"""The batch script of an app's job: written by the portal, every value shell-quoted.

The app's own command runs under the in-job runner (templates/apps/runner.py): in a network
namespace of its own, reached only through the runner's port by requests the gateway signed with the
app's secret (the job holds its SHA-256, the key the signatures are checked with), and the runner
reports "ready" with the app's report token once the app answers. What the job needs (the secret's
SHA-256, the token, the portal's address) comes in sbatch's environment, never in the script or on
a command line.
"""

import hashlib
import shlex
from datetime import timedelta

from django.conf import settings

from portal.environments.models import Environment
from portal.tokens.report import report_token
from portal.webapps.models import App
from slurm.parsing import format_duration

_BODY = """set -uo pipefail
echo "gpuportal app {uuid} ({name}, Slurm job ${{SLURM_JOB_ID:-?}}) on $(hostname) at $(date -Is)"
# The job's own folder holds its log; the app starts in its owner's home (forms say "relative to
# your home", and an empty folder means the home).
cd "$HOME"
{activation}exec {python} {runner} serve -- bash -c {command}
"""


def output_paths(*, app: App, output_dir: str) -> tuple[str, str]:
    """Its stdout and stderr: where the job-files helper reads a job's output, by its UUID."""
    return f"{output_dir}/job-{app.uuid}.out", f"{output_dir}/job-{app.uuid}.err"


def app_script(*, app: App, command: str, output_dir: str, environment: Environment | None) -> str:
    stdout, stderr = output_paths(app=app, output_dir=output_dir)
    options: list[tuple[str, object]] = [
        ("job-name", f"app-{app.type.slug}"), ("comment", app.slurm_comment), ("nodes", 1),
        ("ntasks", 1), ("cpus-per-task", app.type.cpus), ("mem", f"{settings.APPS_MEM_MB}M"),
        ("time", format_duration(timedelta(minutes=app.time_limit_minutes))),
        ("chdir", output_dir), ("output", stdout), ("error", stderr),
    ]
    if settings.APPS_PARTITION:
        options.insert(2, ("partition", settings.APPS_PARTITION))
    header = ["#!/bin/bash"] + [f"#SBATCH --{key}={shlex.quote(str(value))}" for key, value in options]
    body = _BODY.format(uuid=app.uuid, name=shlex.quote(app.type.name), activation=_activation(environment),
                        python=shlex.quote(settings.APPS_PYTHON), runner=shlex.quote(settings.APPS_RUNNER),
                        command=shlex.quote(command))
    return "\n".join(header) + "\n" + body


def _activation(environment: Environment | None) -> str:
    if environment is None:
        return ""
    if environment.kind == Environment.Kind.MODULES:
        modules = " ".join(shlex.quote(name) for name in environment.modules)
        return ("command -v module >/dev/null 2>&1 || source /etc/profile.d/modules.sh\n"
                f"module load {modules}\n")
    return f"source {shlex.quote(environment.path + '/bin/activate')}\n"


def app_job_environment(*, app: App) -> dict[str, str]:
    """sbatch's environment for the job: the key the runner checks the gateway's signatures with
    (the secret's hash, never the secret), and how it reports "ready" (a token for this app alone,
    the portal's address)."""
    return {"GPUPORTAL_APP_SECRET_SHA256": hashlib.sha256(app.secret.encode()).hexdigest(),
            "GPUPORTAL_REPORT_TOKEN": report_token("app", app.pk),
            "GPUPORTAL_URL": settings.PORTAL_URL_FOR_JOBS.rstrip("/"),
            "GPUPORTAL_APP_READY_TIMEOUT": f"{settings.APPS_START_TIMEOUT_SECONDS:g}"}
