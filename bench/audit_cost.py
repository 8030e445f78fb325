"""What the audit trail (portal.audit) adds to a write request.

  DJANGO_SETTINGS_MODULE=portal.settings.test python bench/audit_cost.py [--requests 400] [--blocks 8]

A representative write through the real stack in this process (Django's test client, token
authentication, the REST view, the service, PostgreSQL): `POST /api/v1/registry-keys/`, which
replaces the user's key (an UPDATE of a tracked row, so one event each time). Measured in
alternating blocks on a throwaway database (bench_audit):
  - with the audit: its middleware (the pghistory context sent with each query) and its triggers;
  - without: the middleware left out and the audit's triggers uninstalled (pgtrigger.uninstall),
    i.e. the portal as it was.
Blocks are short and many, so that the load of a shared machine falls on both alike. Prints
p50/p95/p99 of each and what the audit adds. Target from issue 22: p99 added <= 2 ms.

Request timings carry the machine's noise; the trigger's own time does not: PostgreSQL's
`EXPLAIN ANALYZE` of the same UPDATE reports each trigger's time, printed as a second figure.
"""

import argparse
import logging
import os
import sys
import time
from pathlib import Path

sys.path.insert(1, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings.test")
os.environ["TEST_DATABASE_NAME"] = "bench_audit"

import django

django.setup()

import pgtrigger  # noqa: E402
from django.conf import settings  # noqa: E402
from django.db import connection  # noqa: E402
from django.test.utils import override_settings, setup_test_environment  # noqa: E402
from measure import percentile  # noqa: E402
from pghistory.trigger import Event  # noqa: E402
from rest_framework.test import APIClient  # noqa: E402

AUDIT_MIDDLEWARE = "portal.audit.middleware.AuditMiddleware"


def audit_trigger_uris() -> list[str]:
    return [f"{model._meta.label}:{trigger.name}" for model, trigger in pgtrigger.registered()
            if isinstance(trigger, Event)]


def block(client: APIClient, count: int, start: int) -> list[float]:
    times = []
    for i in range(start, start + count):
        body = {"registry": "127.0.0.1:5000", "username": "u", "key": f"key-{i}"}
        began = time.perf_counter()
        response = client.post("/api/v1/registry-keys/", body, format="json")
        times.append((time.perf_counter() - began) * 1000)
        assert response.status_code == 201, response.content
    return times


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=1000, help="per variant")
    parser.add_argument("--blocks", type=int, default=40)
    args = parser.parse_args()
    logging.getLogger("pgtrigger").setLevel(logging.WARNING)
    setup_test_environment()
    connection.creation.create_test_db(verbosity=0, keepdb=True)
    from portal.accounts.models import User
    from portal.accounts.services import api_token_create
    from portal.audit.models import RegistryKeyEvent

    user, _ = User.objects.get_or_create(username="bench-audit")
    _, key = api_token_create(user=user, name="bench")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    without_middleware = [m for m in settings.MIDDLEWARE if m != AUDIT_MIDDLEWARE]
    uris = audit_trigger_uris()
    per_block = args.requests // args.blocks
    block(client, 50, 0)  # warm-up: connections, caches, the first queries' plans
    timings: dict[str, list[float]] = {"with audit": [], "without": []}
    events_before = RegistryKeyEvent.objects.count()
    n = 100
    for _ in range(args.blocks):
        timings["with audit"] += block(client, per_block, n)
        n += per_block
        pgtrigger.uninstall(*uris)
        try:
            with override_settings(MIDDLEWARE=without_middleware):
                timings["without"] += block(client, per_block, n)
                n += per_block
        finally:
            pgtrigger.install(*uris)
    recorded = RegistryKeyEvent.objects.count() - events_before
    print(f"POST /api/v1/registry-keys/ (replaces the key: one tracked UPDATE), {per_block * args.blocks} "
          f"requests each, {args.blocks} alternating blocks; {recorded} events recorded")
    print(f"{'':12} {'p50 ms':>8} {'p95 ms':>8} {'p99 ms':>8}")
    for name, values in timings.items():
        print(f"{name:12}" + "".join(f" {percentile(values, p):8.2f}" for p in (50, 95, 99)))
    added = {p: percentile(timings["with audit"], p) - percentile(timings["without"], p)
             for p in (50, 95, 99)}
    print(f"{'added':12} {added[50]:8.2f} {added[95]:8.2f} {added[99]:8.2f}   (target: p99 added <= 2 ms)")
    trigger_ms = trigger_times(user.pk, args.requests)
    print(f"the UPDATE's audit trigger alone (EXPLAIN ANALYZE, {len(trigger_ms)} updates): "
          f"p50 {percentile(trigger_ms, 50):.3f} ms, p99 {percentile(trigger_ms, 99):.3f} ms")


def trigger_times(user_id: int, count: int) -> list[float]:
    """The audit trigger's time in each of `count` UPDATEs of the user's registry key, as
    PostgreSQL measures it (rolled back: nothing is kept)."""
    import json

    from django.db import transaction

    times = []
    for i in range(count):
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute("EXPLAIN (ANALYZE, FORMAT JSON) UPDATE containers_registrycredential "
                           "SET secret = %s WHERE user_id = %s", [f"x{i}".encode(), user_id])
            plan = cursor.fetchone()[0]
            plan = json.loads(plan) if isinstance(plan, str) else plan
            times.append(sum(t["Time"] for t in plan[0].get("Triggers", [])))
            transaction.set_rollback(True)
    return times


if __name__ == "__main__":
    main()
