"""E-mail on job end through Django's SMTP backend, into a real SMTP server on loopback (aiosmtpd)."""

import pytest
from aiosmtpd.controller import Controller
from aiosmtpd.handlers import Message

from portal.jobs.models import Job
from portal.jobs.signals import jobs_ended
from portal.notifications.models import JobNotification
from tests.factories import JobFactory, UserFactory
from tests.ports import free_port

pytestmark = pytest.mark.django_db


class Inbox(Message):
    def __init__(self) -> None:
        super().__init__()
        self.messages = []

    def handle_message(self, message) -> None:
        self.messages.append(message)


@pytest.fixture
def inbox(settings):
    """An SMTP server on loopback, and Django's SMTP backend pointed at it."""
    handler = Inbox()
    controller = Controller(handler, hostname="127.0.0.1", port=free_port())
    controller.start()
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT = "127.0.0.1", controller.port
    settings.DEFAULT_FROM_EMAIL = "gpuportal@cluster.test"
    try:
        yield handler.messages
    finally:
        controller.stop()


def _email_on_job_end(user):
    user.email_on_job_end = True
    user.save(update_fields=["email_on_job_end"])


def test_opted_in_job_end_mails_its_owner_once(inbox, user):
    job = JobFactory(user=user, name="train\r\nBcc: x@evil.test", state="FAILED", exit_code=3,
                     notify_email=True)
    jobs_ended.send(sender=None, job_ids=[job.pk])
    assert len(inbox) == 1
    message = inbox[0]
    assert message["To"] == "alice@gpuportal.test" and message["From"] == "gpuportal@cluster.test"
    assert message["Subject"] == "[gpuportal] Job train Bcc: x@evil.test failed" and not message["Bcc"]
    body = message.get_payload()
    assert "Exit code: 3" in body and f"/jobs/{job.pk}/" in body
    jobs_ended.send(sender=None, job_ids=[job.pk])  # a repeated signal sends nothing more
    assert len(inbox) == 1 and JobNotification.objects.get(job=job).sent_at is not None


def test_the_users_default_applies_unless_the_job_chose(inbox, user):
    _email_on_job_end(user)
    by_default = JobFactory(user=user, name="a")
    opted_out = JobFactory(user=user, name="b", notify_email=False)
    quiet = JobFactory(user=UserFactory(username="bob"), name="c")  # bob kept the default: off
    no_address = JobFactory(user=UserFactory(username="carol", email=""), name="d")
    _email_on_job_end(no_address.user)
    jobs_ended.send(sender=None, job_ids=[by_default.pk, opted_out.pk, quiet.pk, no_address.pk])
    assert [m["Subject"] for m in inbox] == ["[gpuportal] Job a completed"]


def test_an_smtp_outage_never_breaks_the_poll_cycle(settings, user):
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT, settings.EMAIL_TIMEOUT = "127.0.0.1", free_port(), 1
    job = JobFactory(user=user, notify_email=True)
    jobs_ended.send(sender=None, job_ids=[job.pk])  # logged, not raised
    assert JobNotification.objects.get(job=job).sent_at is None  # released for a retry


def test_preference_api_and_page(token_client, client, user):
    assert token_client.get("/api/v1/notifications/").json() == {
        "email_on_job_end": False, "email": "alice@gpuportal.test"}
    response = token_client.put("/api/v1/notifications/", {"email_on_job_end": True}, format="json")
    assert response.status_code == 200 and response.json()["email_on_job_end"] is True
    for body in ({}, {"email_on_job_end": "maybe"}, {"email_on_job_end": True, "email": "x@y.z"}):
        response = token_client.put("/api/v1/notifications/", body, format="json")
        assert response.status_code == 400 and response.json()["fields"], body
    client.force_login(user)
    page = client.get("/notifications/").content.decode()
    assert 'id="id_email_on_job_end" checked' in page and "alice@gpuportal.test" in page
    client.post("/notifications/", {})
    user.refresh_from_db()
    assert user.email_on_job_end is False


def test_composer_opt_in_defaults_to_the_preference(client, user, partitions):
    client.force_login(user)
    assert 'id="id_notify_email" >' in client.get("/jobs/new/custom/").content.decode()
    _email_on_job_end(user)
    assert 'id="id_notify_email" checked' in client.get("/jobs/new/custom/").content.decode()


def test_api_submit_records_the_jobs_choice(token_client, partitions, monkeypatch):
    monkeypatch.setattr("portal.jobs.services.submission.job_submit_dispatch", lambda *, job: None)
    body = {"template": "custom", "notify_email": True, "parameters": {"commands": "true", "gpus": 0}}
    response = token_client.post("/api/v1/jobs/", body, format="json")
    assert response.status_code == 201, response.json()
    assert Job.objects.get(pk=response.json()["id"]).notify_email is True
    response = token_client.post("/api/v1/jobs/", {"template": "custom", "notify_email": "perhaps",
                                                   "parameters": {"commands": "true"}}, format="json")
    assert response.status_code == 400 and "notify_email" in response.json()["fields"]
