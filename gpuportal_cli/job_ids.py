"""A job named by any of its three ids: the portal's job number (140, as in /jobs/140/), its Slurm job
id as squeue shows it (496, or 496_3 for a task of a sweep's job array) or its Portal ID (a UUID)."""

import re
import uuid
from typing import Any

import click

from gpuportal_cli.client import ApiError, Client, Exit
from gpuportal_cli.output import err

_NUMBER = re.compile(r"[0-9]{1,18}")
_TASK = re.compile(r"[0-9]{1,18}_[0-9]{1,9}")
_FORMS = "a job number (140), a Slurm job id (496, or 496_3 for a sweep's task) or a Portal ID (a UUID)"


def _is_uuid(text: str) -> bool:
    try:
        uuid.UUID(text)
    except ValueError:
        return False
    return True


class JobIdType(click.ParamType):
    """Checked before anything is asked of the portal: a typo is a usage error (exit code 2)."""

    name = "job"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        text = str(value).strip()
        if _NUMBER.fullmatch(text) or _TASK.fullmatch(text) or _is_uuid(text):
            return text
        self.fail(f"{value!r} is not {_FORMS}.", param, ctx)


JOB_ID = JobIdType()


def job_find(client: Client, job_id: str) -> dict[str, Any]:
    """The job (GET /jobs/{id}/) that `job_id` names. A number is a job number first and, when no job
    has it, a Slurm job id; stderr then says which job was taken."""
    if _NUMBER.fullmatch(job_id):
        try:
            return client.get(f"/jobs/{job_id}/")
        except ApiError as error:
            if error.status != 404:
                raise
    by, what = ("uuid", "Portal ID") if _is_uuid(job_id) else ("slurm", "Slurm job")
    try:
        job = client.get(f"/jobs/{job_id}/", by=by)
    except ApiError as error:
        if error.status != 404:
            raise
        kind = {"uuid": "Portal ID", "slurm": "Slurm job id"}[by]
        if _NUMBER.fullmatch(job_id):
            kind = "job number or Slurm job id"
        raise ApiError(f"No job of yours has the {kind} {job_id}.", exit_code=Exit.NOT_FOUND, status=404,
                       code="not_found") from None
    err.print(f"job {job_id} is {what} {job_id}: portal job {job['id']}", markup=False)
    return job
