"""The home page's server time with 20 things of each kind, beside the cluster status page (the old `/`).

  python bench/home_page.py [--items 20] [--requests 200]

A database of its own (`bench_home`, created and migrated on the portal's PostgreSQL server), never
the portal's. One user gets `--items` of each kind (tests/home/fill.py): running and waiting
sessions, apps and jobs (each waiting one with its why-waiting row), idle-GPU warnings, flagged
jobs, failed jobs, decided extensions, projects over 80 % of their budget, presets and runs. Requests
go through the whole Django stack in-process (middleware, session login, selectors, templates),
without HTTP sockets, so the figures are the portal's own cost; pages are asked in turn, so both
share whatever else the machine is doing. Target from issue 34: home p99 <= 50 ms.
"""

import argparse
import statistics
import time

from measure import django_on, percentile, timed

TARGET_P99_MS = 50.0


def world(items: int):
    """A fresh user with `items` of each kind, and a cluster snapshot for the status page."""
    from django.utils import timezone

    from portal.accounts.models import User
    from portal.cluster.models import Node, Partition, PartitionGpu, PollStatus
    from tests.home.fill import home_fill

    username = f"bench{int(time.time())}"
    user = User.objects.create(username=username, ldap_groups=["portal-users"], gid_number=10000,
                               home_directory=f"/home/{username}")
    home_fill(user, items)
    now = timezone.now()
    PollStatus.objects.update_or_create(pk=1, defaults={"refreshed_at": now, "hub_refreshed_at": now,
                                                        "checked_at": now})
    for name in ("gpu", "debug"):
        partition, _ = Partition.objects.get_or_create(name=name,
                                                       defaults={"node_count": 2, "cpus_total": 128})
        PartitionGpu.objects.get_or_create(partition=partition, gpu_type="a100", defaults={"total": 8})
    for number in (1, 2):
        Node.objects.get_or_create(name=f"gpu-node{number}", defaults={
            "state": "mixed", "partitions": ["gpu", "debug"], "cpus_total": 64, "memory_mb": 515000,
            "gpus": {"a100": 4}, "gpus_used": {"a100": 2}})
    return user


def summary(times_ms: list[float]) -> str:
    return (f"p50 {statistics.median(times_ms):7.2f} ms   p99 {percentile(times_ms, 99):7.2f} ms   "
            f"max {max(times_ms):7.2f} ms   (n={len(times_ms)})")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--items", type=int, default=20)
    parser.add_argument("--requests", type=int, default=200)
    args = parser.parse_args()
    django_on("bench_home")
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    user = world(args.items)
    client = Client()
    client.force_login(user)
    pages = [("home /", "/"), ("home live part /home/part/", "/home/part/"),
             ("cluster status /cluster/ (the old /)", "/cluster/")]
    for _, path in pages:  # warm: templates, the job template catalog, the policy
        timed(client, path, 10)
    print(f"\n== {args.items} of each kind for {user.username}; "
          f"{args.requests} requests per page, in turn ==")
    results: dict[str, list[float]] = {label: [] for label, _ in pages}
    for _ in range(args.requests // 10):
        for label, path in pages:
            results[label] += timed(client, path, 10)
    for label, path in pages:
        with CaptureQueriesContext(connection) as queries:
            client.get(path)
        print(f"{label:38s} {summary(results[label])}   {len(queries)} queries")
    home_p99 = percentile(results["home /"], 99)
    print(f"\nhome p99 {home_p99:.2f} ms: target <= {TARGET_P99_MS:.0f} ms "
          f"{'met' if home_p99 <= TARGET_P99_MS else 'NOT met'}")


if __name__ == "__main__":
    main()
