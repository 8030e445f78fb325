"""TensorBoard, one of the web apps (portal.webapps): opened on a folder, on one of the user's jobs
(its TENSORBOARD_LOGDIR) or on one of their sessions (its ~/logs). This resolves which folder, then
starts the `tensorboard` app type on it; an active one on the same folder is reused."""

from typing import Any

from django.conf import settings

from portal.accounts.models import User
from portal.core.errors import InvalidInput
from portal.jobs.models import Job
from portal.jobs.services.prepare import job_logdir, unix_account
from portal.sessions.models import Session
from portal.webapps.models import App
from portal.webapps.services import app_start

TYPE = "tensorboard"


def tensorboard_start(*, user: User, logdir: Any = None, job: Any = None,
                      session: Any = None) -> tuple[App, bool]:
    """Start TensorBoard as `user` on exactly one of a folder, one of their jobs' log directory or
    one of their sessions' logs; returns it and whether it is new. Raises InvalidInput naming the
    field, Conflict at the per-user limit of apps."""
    given = [name for name, value in (("logdir", logdir), ("job", job), ("session", session))
             if value not in (None, "")]
    if len(given) != 1:
        raise InvalidInput({"non_field_errors": ["Give exactly one of logdir, job or session."]})
    home = unix_account(user.username).pw_dir.rstrip("/")
    found_job = found_session = None
    if job not in (None, ""):
        found_job = _own_job(user, job)
        logdir = job_logdir(home=home, job_uuid=found_job.uuid)
    elif session not in (None, ""):
        found_session = _own_session(user, session)
        logdir = settings.TENSORBOARD_SESSION_LOGDIR.format(home=home)
    if not isinstance(logdir, str) or not logdir.startswith("/"):
        raise InvalidInput({"logdir": ["Must be an absolute path (starting with /)."]})
    try:
        # A job's or a session's TensorBoard runs on its cluster, beside its logs (#38).
        beside = found_job or found_session
        return app_start(user=user, type=TYPE, parameters={"logdir": logdir}, job=found_job,
                         session=found_session, cluster=beside.cluster if beside else "")
    except InvalidInput as error:  # this API's field is logdir, not parameters.logdir
        nested = error.fields.pop("parameters", None)
        raise InvalidInput({**error.fields, **(nested if isinstance(nested, dict) else {})}) from None


def _own_job(user: User, value: Any) -> Job:
    if isinstance(value, bool) or not isinstance(value, int | str) or not str(value).isdigit():
        raise InvalidInput({"job": ["Give a job's id (a whole number)."]})
    found = Job.objects.filter(user=user, pk=int(value)).first() if int(value) < 2**63 else None
    if found is None:
        raise InvalidInput({"job": [f"You have no job {value}."]})
    return found


def _own_session(user: User, value: Any) -> Session:
    if not isinstance(value, str) or len(value) > 30:
        raise InvalidInput({"session": ["Give a session's name."]})
    found = Session.objects.filter(user=user, name=value).order_by("-created_at").first()
    if found is None:
        raise InvalidInput({"session": [f"You have no session {value!r}."]})
    return found
