"""Notebook servers against the real stack: portal → JupyterHub → Slurm job → JupyterLab."""

import json
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

import pytest

from portal.policy.models import ResourceProfile
from portal.policy.services import policy_publish
from portal.poll.cycle import poll_cycle
from portal.sessions.models import Session
from portal.sessions.selectors import server_cards
from portal.sessions.services.hub_sync import servers_hub_sync
from portal.sessions.services.start import server_start
from portal.sessions.services.stop import server_stop
from tests.cluster.shape import gpu_nodes
from tests.factories import UserFactory
from tests.hub import (
    job_env,
    job_gpu_indexes,
    portal_login,
    wait_for,
)
from tests.notebook_templates import notebook_templates
from tests.policy.cases import OVER_LIMITS, POLICY_GROUPS, PROFILE
from tests.poll_helpers import slurm_poll
from tests.slurm_waits import SLURM_PATIENCE, squeue_state, wait_until_gone

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]
IDLE_TIMEOUT = 15  # the culler test's own culler (the test hub's waits CULL_TIMEOUT)


def expand(indexes: str) -> str:
    """Slurm's '0-1,3' -> CUDA's '0,1,3'."""
    out = []
    for part in indexes.split(","):
        low, _, high = part.partition("-")
        out += [str(n) for n in range(int(low), int(high or low) + 1)]
    return ",".join(out)


def ready_server(hub, username: str, name: str, timeout: float = 60) -> dict:
    def ready():
        server = (hub.request("GET", f"/users/{username}").json().get("servers") or {}).get(name)
        return server if server and server["ready"] else None
    return wait_for(ready, timeout, f"{username}/{name} to be ready")


def card(user, name):
    """Its card after the poll cycle's look at the hub (pages read only the database)."""
    servers_hub_sync()
    return next(c for c in server_cards(user=user) if c.name == name)


def test_two_gpu_server_gets_two_devices_and_stop_ends_the_job(portal_hub, live_server):
    alice = UserFactory(username="alice")
    server_start(user=alice, name="two-gpus", gpus=2, hours=1)
    hub_server = ready_server(portal_hub, "alice", "two-gpus")
    job_id = hub_server["state"]["job_id"]

    devices = job_env(job_id, "CUDA_VISIBLE_DEVICES")
    assert len(devices) == 1
    assert devices.pop() == expand(job_gpu_indexes(job_id))
    assert len(expand(job_gpu_indexes(job_id)).split(",")) == 2
    # The session's key is its job's comment (#32): the portal adopts and cleans up by it.
    comment = subprocess.run(["squeue", "-h", "-j", job_id, "-o", "%k"], capture_output=True, text=True,
                             check=True).stdout.strip()
    assert comment == Session.objects.get(user=alice, name="two-gpus").slurm_comment

    slurm_poll()
    ready = card(alice, "two-gpus")
    assert ready.state == "ready" and ready.node and ready.job_id == job_id
    assert ready.url == f"{portal_hub.url}/user/alice/two-gpus/lab"
    assert ready.time_left is not None and ready.time_left.total_seconds() <= 3600

    server_stop(server=Session.objects.get(user=alice, name="two-gpus"))
    wait_until_gone([job_id], "the stopped server's job")
    assert card(alice, "two-gpus").status == "ended: Stopped by you"


def test_request_that_cannot_fit_is_queued_with_the_reason_and_stop_cancels_it(portal_hub, slurm):
    # Hold one GPU on every node with a plain job of bob's, so 4 more cannot fit whatever else runs.
    blocker = subprocess.run(
        ["/usr/sbin/runuser", "-u", "bob", "--", "sbatch", "--parsable", f"--nodes={len(gpu_nodes())}",
         "--ntasks-per-node=1", "--gres=gpu:1", "--time=5", "-o", "/dev/null", "--wrap", "sleep 300"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()
    try:
        wait_for(lambda: squeue_state(blocker) == "RUNNING", SLURM_PATIENCE, "the blocking job to run")
        alice = UserFactory(username="alice")
        server_start(user=alice, name="too-big", gpus=4, hours=1)

        def queued_job():
            server = (portal_hub.request("GET", "/users/alice").json()["servers"] or {}).get("too-big")
            return server and server["state"].get("job_id")
        job_id = wait_for(queued_job, SLURM_PATIENCE, "the server's job id")
        wait_for(lambda: squeue_state(job_id) == "PENDING", SLURM_PATIENCE, "the job to pend")
        slurm_poll(slurm=slurm)  # what Celery beat does every cycle
        queued = card(alice, "too-big")
        assert queued.state == "queued"
        assert queued.status == "queued: Resources"

        server_stop(server=Session.objects.get(user=alice, name="too-big"))
        wait_until_gone([job_id], "the pending job, cancelled")
    finally:
        subprocess.run(["scancel", blocker], check=False)


def test_bob_cannot_reach_alices_server(portal_hub, live_server):
    alice = UserFactory(username="alice")
    server_start(user=alice, name="private", gpus=0, hours=1)
    ready_server(portal_hub, "alice", "private")

    bob = portal_login(live_server, "bob")
    assert bob.get(f"{live_server.url}/api/v1/sessions/private/").status_code == 404
    assert bob.delete(f"{live_server.url}/api/v1/sessions/private/",
                      headers={"X-CSRFToken": bob.cookies["csrftoken"]}).status_code in (403, 404)
    # Through the proxy: bob's hub login (via the portal) does not open alice's server.
    response = bob.get(f"{portal_hub.url}/user/alice/private/lab")
    assert response.status_code == 403
    # The owner gets in with the same single login.
    alice_session = portal_login(live_server, "alice")
    response = alice_session.get(f"{portal_hub.url}/user/alice/private/lab")
    assert response.status_code == 200 and "JupyterLab" in response.text


def test_hub_api_refuses_the_over_limit_table_and_script_overrides(portal_hub, settings):
    """The shared table (tests/policy/cases.py) through the real hub's API: the same messages as the
    form and the REST API, from the policy file this portal published."""
    settings.POLICY_GROUPS = POLICY_GROUPS
    UserFactory(username="alice")  # in portal-users, as LDAP says at login
    ResourceProfile.objects.create(**PROFILE)  # publishes the policy, the users' groups with it
    portal_hub.request("POST", "/users/alice")
    before = subprocess.run(["squeue", "-h", "-u", "alice", "-o", "%i"], capture_output=True,
                            text=True, check=True).stdout.split()
    for options, _field, message in OVER_LIMITS:
        response = portal_hub.request("POST", "/users/alice/servers/evil", json={"user_options": options})
        assert (response.status_code, response.json()["message"]) == (400, message), options
    for options in ({"gpus": 1, "cmd": "/bin/sh -c 'id'"}, {"gpus": 1, "options": "--uid=0"},
                    {"gpus": 1, "prologue": "touch /tmp/pwned"}):
        response = portal_hub.request("POST", "/users/alice/servers/evil", json={"user_options": options})
        assert response.status_code == 400, (options, response.text)
    after = subprocess.run(["squeue", "-h", "-u", "alice", "-o", "%i"], capture_output=True,
                           text=True, check=True).stdout.split()
    assert set(after) <= set(before)  # no job was submitted


def test_killing_and_restarting_the_hub_keeps_a_running_server(portal_hub, live_server):
    alice = UserFactory(username="alice")
    server_start(user=alice, name="survivor", gpus=1, hours=1)
    job_id = ready_server(portal_hub, "alice", "survivor")["state"]["job_id"]
    session = portal_login(live_server, "alice")
    assert session.get(f"{portal_hub.url}/user/alice/survivor/lab").status_code == 200

    portal_hub.kill()
    # The proxy keeps routing to the server while the hub is down.
    assert session.get(f"{portal_hub.url}/user/alice/survivor/api/status").status_code == 200
    portal_hub.command("start")

    server = ready_server(portal_hub, "alice", "survivor", timeout=30)
    assert server["state"]["job_id"] == job_id
    assert squeue_state(job_id) == "RUNNING"
    assert session.get(f"{portal_hub.url}/user/alice/survivor/lab").status_code == 200


def test_portal_logout_ends_hub_access(portal_hub, live_server):
    alice = UserFactory(username="alice")
    server_start(user=alice, name="logout", gpus=0, hours=1)
    ready_server(portal_hub, "alice", "logout")
    session = portal_login(live_server, "alice")
    assert session.get(f"{portal_hub.url}/user/alice/logout/lab").status_code == 200
    assert session.get(f"{portal_hub.url}/user/alice/logout/api/status").status_code == 200
    assert session.get(f"{portal_hub.url}/hub/home").status_code == 200

    response = session.post(f"{live_server.url}/accounts/logout/",
                            headers={"X-CSRFToken": session.cookies["csrftoken"],
                                     "Referer": f"{live_server.url}/"})
    assert response.ok

    # The server and the hub re-check at their next cycle (HUB_SERVER_AUTH_CACHE and
    # HUB_AUTH_REFRESH_AGE are 5 s here): the revoked tokens no longer let alice in.
    time.sleep(6)
    assert session.get(f"{portal_hub.url}/user/alice/logout/api/status").status_code == 403
    response = session.get(f"{portal_hub.url}/hub/home")
    assert "/accounts/login/" in response.url


def test_slurm_refusing_the_job_says_why(portal_hub, settings):
    # A policy whose share of memory per GPU no node has: the hub lets it through, Slurm refuses.
    sizes = settings.POLICY_PARTITION_RESOURCES["*"]
    settings.POLICY_PARTITION_RESOURCES = {"*": {**sizes, "mem_gb_per_gpu": 4000}}
    policy_publish()
    portal_hub.request("POST", "/users/alice")
    response = portal_hub.request("POST", "/users/alice/servers/huge", json={"user_options": {"gpus": 1}})
    assert response.status_code == 400
    assert "Memory specification can not be satisfied" in response.json()["message"]


def test_workspace_gets_templates_without_clobbering_edits_the_data_mount_and_both_kernels(
        portal_hub, live_server):
    home = Path("/home/alice")
    templates = home / "templates"
    templates.mkdir(exist_ok=True)
    shipped = [t.name for t in notebook_templates()]
    edited = templates / shipped[0]
    edited.write_text('{"edited": "by alice"}')
    (templates / "README.md").unlink(missing_ok=True)
    subprocess.run(["chown", "-R", "alice", str(templates)], check=True)

    alice = UserFactory(username="alice")
    server_start(user=alice, name="workspace", gpus=0, hours=1)
    ready_server(portal_hub, "alice", "workspace")

    assert edited.read_text() == '{"edited": "by alice"}'
    assert (templates / "README.md").exists()  # what was missing comes back
    assert all((templates / name).exists() for name in shipped)
    r_notebook = next(t.name for t in notebook_templates() if t.kernel == "ir")
    assert json.loads((templates / r_notebook).read_text())["metadata"]["kernelspec"]["name"] == "ir"
    assert (home / "data").resolve() == Path("/data")
    session = portal_login(live_server, "alice")
    assert session.get(f"{portal_hub.url}/user/alice/workspace/lab").status_code == 200
    kernels = session.get(f"{portal_hub.url}/user/alice/workspace/api/kernelspecs").json()["kernelspecs"]
    assert {"python3", "ir"} <= set(kernels)
    edited.unlink()


def test_idle_culler_stops_an_unused_server_and_the_card_says_so(portal_hub, settings):
    settings.SERVERS_IDLE_TIMEOUT_SECONDS = IDLE_TIMEOUT
    alice = UserFactory(username="alice")
    server_start(user=alice, name="idle", gpus=0, hours=1)
    job_id = ready_server(portal_hub, "alice", "idle")["state"]["job_id"]
    assert card(alice, "idle").state == "ready"  # the portal notes its last activity

    def culled():
        return "idle" not in (portal_hub.request("GET", "/users/alice").json()["servers"] or {})
    with portal_hub.culler(IDLE_TIMEOUT):
        wait_for(culled, IDLE_TIMEOUT + 40, "the idle culler", interval=1)
    wait_until_gone([job_id], "the culled server's job")
    # The hub let it go; its job reported its exit (ended), or the poll has yet to see it (stopping).
    assert card(alice, "idle").state in ("stopping", "ended")

    def ended():
        slurm_poll()  # what beat runs every cycle: the end comes from Slurm's accounting
        return card(alice, "idle").status == "ended: Stopped by the idle culler"
    wait_for(ended, SLURM_PATIENCE,
             "Slurm's record of the end (after the job's report, or by the poll cycle)")


def test_tensorboard_in_the_server_for_its_owner_only(portal_hub, live_server, tmp_path):
    """JupyterLab's TensorBoard tile (jupyter-server-proxy) shows ~/logs; %tensorboard finds its URL."""
    alice = UserFactory(username="alice")
    server_start(user=alice, name="tb", gpus=0, hours=1)
    job_id = ready_server(portal_hub, "alice", "tb")["state"]["job_id"]
    # A run of alice's, written as alice with TensorBoard's own writer.
    writer = ("from tensorboard.summary import Writer; w = Writer('/home/alice/logs/tb-test/run1'); "
              "[w.add_scalar('loss', 1.0 / (step + 1), step) for step in range(5)]; w.close()")
    subprocess.run(["/usr/sbin/runuser", "-u", "alice", "--", sys.executable, "-c", writer], check=True,
                   cwd="/")
    session = portal_login(live_server, "alice")
    assert session.get(f"{portal_hub.url}/user/alice/tb/lab").status_code == 200
    page = wait_for(lambda: (r := session.get(f"{portal_hub.url}/user/alice/tb/tensorboard/")).ok and r,
                    60, "TensorBoard to start")
    assert "<tf-tensorboard" in page.text or "TensorBoard" in page.text
    runs = session.get(f"{portal_hub.url}/user/alice/tb/tensorboard/data/runs").json()
    assert "tb-test/run1" in runs
    assert job_env(job_id, "TENSORBOARD_PROXY_URL") == {"/user/alice/tb/proxy/%PORT%/"}
    bob = portal_login(live_server, "bob")
    assert bob.get(f"{portal_hub.url}/user/alice/tb/tensorboard/").status_code == 403


def _blocker(gpus_per_node: int = 1) -> str:
    """A plain job of bob's holding a GPU on every node, so a 4-GPU session has to queue for Resources."""
    job_id = subprocess.run(
        ["/usr/sbin/runuser", "-u", "bob", "--", "sbatch", "--parsable", f"--nodes={len(gpu_nodes())}",
         "--ntasks-per-node=1", f"--gres=gpu:{gpus_per_node}", "--time=5", "-o", "/dev/null",
         "--wrap", "sleep 300"], capture_output=True, text=True, check=True).stdout.strip()
    try:  # other tests on the shared cluster may hold GPUs for a while
        wait_for(lambda: squeue_state(job_id) == "RUNNING", 240, "the blocking job to run", interval=1)
    except BaseException:
        subprocess.run(["scancel", job_id], check=False)
        raise
    return job_id


def test_a_start_answers_at_once_and_a_pending_job_is_queued_not_starting(portal_hub, live_server,
                                                                           spawn_in_background):
    blocker = _blocker()
    try:
        alice = UserFactory(username="alice")
        session = portal_login(live_server, "alice")
        started = time.monotonic()
        response = session.post(f"{live_server.url}/api/v1/sessions/", json={"name": "waits", "gpus": 4},
                                headers={"X-CSRFToken": session.cookies["csrftoken"]})
        elapsed = time.monotonic() - started
        assert response.status_code == 202 and response.json()["state"] == "starting", response.text
        assert elapsed < 1.0, elapsed
        # The spawner sees the job pend within a second or so, and Slurm's reason once its scheduler
        # has looked at it; no poll cycle needed.
        def state():
            return session.get(f"{live_server.url}/api/v1/sessions/waits/").json()
        body = wait_for(lambda: (b := state())["state"] != "starting" and b, SLURM_PATIENCE,
                        "it to leave starting")
        assert body["state"] == "queued", body
        queued = time.monotonic() - started
        body = wait_for(lambda: (b := state())["queue_reason"] and b, SLURM_PATIENCE,
                        "Slurm's pending reason")
        assert (body["state"], body["queue_reason"]) == ("queued", "Resources"), body
        print(f"\nPOST /api/v1/sessions/ answered in {elapsed * 1000:.0f} ms; queued {queued:.1f} s and "
              f"queued: Resources {time.monotonic() - started:.1f} s after the POST")
        server = Session.objects.get(user=alice, name="waits")
        assert server.hub_accepted_at is not None and server.pending_reasons[-1][1] == "Resources"
    finally:
        subprocess.run(["scancel", blocker], check=False)
    # The GPUs free up: it runs, and the node and time left show before any poll cycle.
    body = wait_for(lambda: (b := state())["state"] == "ready" and b, 60, "the session to be ready")
    assert body["node"] in gpu_nodes() and 0 < body["time_left_seconds"] <= 8 * 3600
    assert body["started_at"] and body["ready_at"] and body["created_at"] <= body["started_at"]
    csv_text = session.get(f"{live_server.url}/servers/timing.csv").text
    assert csv_text.splitlines()[0].startswith("name,partition,gpus") and "Resources" in csv_text


def test_a_session_still_queued_after_its_timeout_is_cancelled_by_the_poll_cycle(portal_hub, slurm):
    blocker = _blocker()
    try:
        alice = UserFactory(username="alice")
        server_start(user=alice, name="impatient", gpus=4, hours=1, queue_timeout_minutes=1)
        server = Session.objects.get(user=alice, name="impatient")
        job_id = wait_for(lambda: portal_hub.request("GET", "/users/alice").json()["servers"]["impatient"]
                          ["state"].get("job_id"), SLURM_PATIENCE, "the session's job id")
        wait_for(lambda: squeue_state(job_id) == "PENDING", SLURM_PATIENCE, "the job to pend")
        slurm_poll(slurm=slurm)
        assert Session.objects.get(pk=server.pk).ended_at is None  # not yet a minute
        two_minutes_ago = server.created_at - timedelta(minutes=2)
        Session.objects.filter(pk=server.pk).update(created_at=two_minutes_ago)
        report = poll_cycle(slurm=slurm)
        assert report.steps["servers_cancelled"] == 1
        wait_until_gone([job_id], "the queued job, cancelled")
        server.refresh_from_db()
        assert server.end_reason == Session.EndReason.QUEUE_TIMEOUT and server.started_at is None
        assert card(alice, "impatient").status == "ended: Still queued after the time you set"
    finally:
        subprocess.run(["scancel", blocker], check=False)
