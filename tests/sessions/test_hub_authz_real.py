"""The hub's proxy paths, table-driven like tests/test_authz.py: a running server of alice's, tried
as the owner, another user, an admin, anonymous, after a portal logout (revoked tokens) and after
alice was deprovisioned (left portal-users)."""

import time

import pytest
import requests

from portal.accounts.models import User
from portal.accounts.services import deprovision_reason, user_deprovision
from portal.sessions.models import Session
from portal.sessions.services.start import server_start
from tests.factories import UserFactory
from tests.hub import portal_login
from tests.sessions.test_servers_real import ready_server

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

PATHS = ["/user/alice/shared/lab", "/user/alice/shared/api/status", "/user/alice/shared/api/contents",
         "/user/alice/shared/terminals/1", "/hub/api/users/alice", "/hub/home"]
# Allowed statuses per path and principal: 200 for the owner, refused (403, or a redirect to log
# in, or 404 for the hub's API) for everybody else.
REFUSED = (302, 403, 404)
EXPECT = {
    "owner": {path: (200,) for path in PATHS},
    **{who: {path: REFUSED for path in PATHS} for who in ("other", "admin", "anonymous", "revoked",
                                                           "deprovisioned")},
}
EXPECT["owner"]["/hub/api/users/alice"] = (200, 403)  # a browser cookie may lack the API scope
EXPECT["owner"]["/user/alice/shared/terminals/1"] = (200, 404)  # no such terminal yet
for who in ("other", "admin"):
    EXPECT[who]["/hub/home"] = (200,)  # their own home page, nothing of alice's
# A hub admin (portal-admins) may read the user list, never open anybody's server.
EXPECT["admin"]["/hub/api/users/alice"] = (200,)


def _check(session: requests.Session, hub_url: str, who: str) -> list[str]:
    # Let the server's own OAuth dance with the hub run once (the owner ends with the server's
    # cookie, anybody else with a refusal), then look at each path's own answer.
    session.get(f"{hub_url}/user/alice/shared/lab")
    wrong = []
    for path in PATHS:
        status = session.get(f"{hub_url}{path}", allow_redirects=False).status_code
        if status not in EXPECT[who][path]:
            wrong.append(f"{who} {path}: {status}, expected {EXPECT[who][path]}")
    return wrong


def test_hub_proxy_paths(portal_hub, live_server):
    alice = UserFactory(username="alice")
    server_start(user=alice, name="shared", gpus=0, hours=1)
    ready_server(portal_hub, "alice", "shared")
    sessions = {who: portal_login(live_server, name) for who, name in
                (("owner", "alice"), ("other", "bob"), ("admin", "ada"))}
    for session in sessions.values():  # log in to the hub through the portal (one login)
        session.get(f"{portal_hub.url}/hub/home")
    wrong = []
    for who, session in sessions.items():
        wrong += _check(session, portal_hub.url, who)
    wrong += _check(requests.Session(), portal_hub.url, "anonymous")

    revoked = portal_login(live_server, "alice")
    revoked.get(f"{portal_hub.url}/user/alice/shared/api/status")
    revoked.post(f"{live_server.url}/accounts/logout/", headers={
        "X-CSRFToken": revoked.cookies["csrftoken"], "Referer": f"{live_server.url}/"})
    time.sleep(6)  # the hub and the server re-check every 5 s here
    wrong += _check(revoked, portal_hub.url, "revoked")

    deprovisioned = sessions["owner"]
    user_deprovision(user=User.objects.get(username="alice"))
    time.sleep(6)
    wrong += _check(deprovisioned, portal_hub.url, "deprovisioned")
    assert wrong == [], "\n".join(wrong)
    # Deprovisioning ended her server too (portal.poll.deprovisioned).
    shared = Session.objects.get(user__username="alice", name="shared")
    assert shared.ended_at and shared.end_detail == deprovision_reason()
    # Logging in started nothing: alice's one server is the only one (the hub may be stopping it).
    servers = {user["name"]: user["servers"] for user in portal_hub.request("GET", "/users").json()}
    assert set(servers.get("alice", {})) <= {"shared"} and not servers.get("bob") and not servers.get("ada")
