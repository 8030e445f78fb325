"""The hub keeps a named server that stopped without being removed (its job ended on its own: a time
limit, a failure) and counts it towards named_server_limit_per_user, 3 on the bed; the chaos soak
(#32) found every later start of that user refused. Against the real hub and Slurm: alice has three
such servers of sessions the portal has ended, and her fourth session starts all the same."""

import pytest
from django.utils import timezone

from portal.sessions.hub import JupyterHub
from portal.sessions.models import Session
from portal.sessions.services.start import server_start
from portal.sessions.services.stop import server_stop
from tests.factories import UserFactory
from tests.hub import wait_for
from tests.sessions.test_servers_real import ready_server

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def test_sessions_that_ended_on_their_own_do_not_use_up_the_hubs_named_servers(portal_hub):
    alice = UserFactory(username="alice")
    hub = JupyterHub.from_settings()
    names = ["short0", "short1", "short2"]
    try:
        for name in names:
            server_start(user=alice, name=name, gpus=0, hours=1)
            ready_server(portal_hub, "alice", name)
            # Stopped at the hub but not removed, as when its job ends under it; the portal has ended it.
            portal_hub.request("DELETE", f"/users/alice/servers/{name}")
            wait_for(lambda name=name: name not in hub.servers("alice"), 60, f"{name} to stop")
        Session.objects.filter(name__in=names).update(ended_at=timezone.now(),
                                                      end_reason=Session.EndReason.TIME_LIMIT)
        assert hub.stopped_servers("alice") == set(names)

        server_start(user=alice, name="fourth", gpus=0, hours=1)
        fourth = Session.objects.get(user=alice, name="fourth")
        assert (fourth.end_reason, fourth.end_detail) == ("", "")
        ready_server(portal_hub, "alice", "fourth")
        assert hub.stopped_servers("alice") == set()  # the ended sessions' servers are gone from the hub
    finally:
        for server in Session.objects.filter(user=alice, ended_at__isnull=True):
            server_stop(server=server)
