"""The audit trail shipped to syslog (#33), to a real Unix datagram socket standing in for /dev/log:
each event once, one JSON object a datagram, with syslog's priority and tag; nothing sent is lost when
the socket is gone."""

import json
import socket
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pghistory
import pytest

from portal.audit.models import SyslogMark
from portal.audit.syslog import IDENT, audit_ship
from portal.jobs.models import Job
from tests.factories import JobFactory, UserFactory

pytestmark = pytest.mark.django_db
NOW = timedelta(0)  # no lag: the test's events are all committed


@pytest.fixture
def dev_log(tmp_path: Path, settings) -> Iterator[socket.socket]:
    path = tmp_path / "log"
    receiver = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    receiver.bind(str(path))
    receiver.settimeout(0.5)
    settings.AUDIT_SYSLOG_ADDRESS = str(path)
    settings.AUDIT_SYSLOG_FACILITY = "authpriv"
    yield receiver
    receiver.close()


def _received(receiver: socket.socket) -> list[dict]:
    lines = []
    while True:
        try:
            datagram = receiver.recv(1 << 20)
        except TimeoutError:
            return lines
        priority, _, message = datagram.decode().partition(">")
        assert priority == "<86" and message.startswith(IDENT) and message.endswith("\0")  # authpriv.info
        lines.append(json.loads(message.removeprefix(IDENT).removesuffix("\0")))


def test_each_event_goes_to_syslog_once_as_a_json_line(dev_log):
    admin = UserFactory(username="ada", is_staff=True)
    with pghistory.context(user=admin.pk, source="admin"):
        job = JobFactory(name="train")
        Job.objects.filter(pk=job.pk).update(state="RUNNING")
    assert audit_ship(lag=NOW) == 4  # ada's and alice's accounts, the job's create and update
    lines = _received(dev_log)
    jobs = [line for line in lines if line["object_type"] == "jobs.Job"]
    assert [(line["action"], line["actor"], line["source"]) for line in jobs] == \
        [("create", "ada", "admin"), ("update", "ada", "admin")]
    assert jobs[1]["object_id"] == str(job.pk) and jobs[1]["id"].startswith("audit.JobEvent:")
    assert jobs[1]["changes"]["state"][1] == "RUNNING" and jobs[1]["data"]["name"] == "train"
    assert {line["object_type"] for line in lines} == {"accounts.User", "jobs.Job"}
    assert audit_ship(lag=NOW) == 0 and _received(dev_log) == []  # once
    Job.objects.filter(pk=job.pk).update(state="COMPLETED")
    assert audit_ship() == 0  # younger than the lag: its transaction could still be open
    assert audit_ship(lag=NOW) == 1 and _received(dev_log)[0]["changes"]["state"][1] == "COMPLETED"


def test_nothing_is_marked_shipped_when_syslog_is_not_there(dev_log, settings):
    JobFactory()
    settings.AUDIT_SYSLOG_ADDRESS = str(Path(dev_log.getsockname()).with_name("missing"))
    with pytest.raises(OSError):
        audit_ship(lag=NOW)
    assert not SyslogMark.objects.filter(last_id__gt=0).exists()
    settings.AUDIT_SYSLOG_ADDRESS = dev_log.getsockname()
    assert audit_ship(lag=NOW) == 2 and len(_received(dev_log)) == 2


def test_an_empty_address_sends_nothing(settings):
    settings.AUDIT_SYSLOG_ADDRESS = ""
    JobFactory()
    assert audit_ship(lag=NOW) == 0 and not SyslogMark.objects.exists()
