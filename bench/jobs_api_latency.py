"""Job history through the REST API at 10^5 and 10^6 rows: list, filters, next page, detail.

  python bench/jobs_api_latency.py [--rows 100000 1000000] [--requests 200]

Requests go through the whole Django + DRF stack in-process (URL routing, token authentication,
selectors, serializers, cursor pagination), without HTTP sockets, so the figures are the portal's
own cost. Target from issue 3: p99 <= 50 ms at 10^6 rows.
"""

import argparse
import time

from jobs_common import history_fill, setup, summary


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--requests", type=int, default=200)
    args = parser.parse_args()
    setup()
    from rest_framework.test import APIClient

    from portal.accounts.models import User
    from portal.accounts.services import api_token_create
    from portal.jobs.models import Job

    users = [User.objects.get_or_create(username=name, defaults={"is_staff": name == "ada"})[0]
             for name in ("alice", "bob", "ada", "carol", "dave")]
    clients = {}
    for user in (users[0], users[2]):
        _, key = api_token_create(user=user, name="bench")
        clients[user.username] = APIClient()
        clients[user.username].credentials(HTTP_AUTHORIZATION=f"Token {key}")
    for rows in args.rows:
        start = time.perf_counter()
        history_fill(rows, users)
        print(f"\n== {rows:,} jobs in history (filled in {time.perf_counter() - start:.1f} s; "
              f"alice owns {rows // len(users):,}) ==")
        alice, ada = clients["alice"], clients["ada"]
        middle = Job.objects.filter(user=users[0]).order_by("id")[rows // len(users) // 2].pk
        week_ago = Job.objects.filter(pk=middle).values_list("submitted_at", flat=True)[0]
        second_page = alice.get("/api/v1/jobs/").json()["next"].replace("http://testserver", "")
        cases = [
            ("list, newest 50 (alice)", alice, "/api/v1/jobs/"),
            ("list, next page (cursor)", alice, second_page),
            ("filter state=FAILED", alice, "/api/v1/jobs/?state=FAILED"),
            ("filter template=nccl-allreduce", alice, "/api/v1/jobs/?template=nccl-allreduce"),
            ("filter submitted_before (middle)", alice,
             "/api/v1/jobs/?submitted_before=" + week_ago.isoformat().replace("+00:00", "Z")),
            ("filter state+template", alice, "/api/v1/jobs/?state=TIMEOUT&template=custom"),
            ("admin: everybody, newest 50", ada, "/api/v1/jobs/"),
            ("admin: state=CANCELLED", ada, "/api/v1/jobs/?state=CANCELLED"),
            ("detail (alice's job)", alice, f"/api/v1/jobs/{middle}/"),
        ]
        for label, client, url in cases:
            assert client.get(url).status_code == 200, url
            times = []
            for _ in range(args.requests):
                start = time.perf_counter()
                response = client.get(url)
                times.append((time.perf_counter() - start) * 1000)
                assert response.status_code == 200
            print(f"{label:36s} {summary(times)}")


if __name__ == "__main__":
    main()
