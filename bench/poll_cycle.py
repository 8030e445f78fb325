"""One whole poll cycle at 1,000 live jobs and 200 live sessions, printed beside its budget.

  python bench/poll_cycle.py [--jobs 1000] [--sessions 200] [--rounds 3]

`poll_cycle()` itself (portal/poll/cycle.py), every step, on a database of its own (`bench_jobs`):
Slurm answers from canned text through the real parsers (the queue, 16 nodes' sinfo rows; no job
pending, so no squeue --start/sprio/sshare; no project), and the hub's listing is the 200 sessions,
ready. What it measures is the portal's own work per cycle: parsing, matching, the writes, the idle
and efficiency passes. Printed with POLL_CYCLE_BUDGET_SECONDS and Celery's hard kill beside it,
and the calls per-job and per-server polling (what stock batchspawner and a per-job poller do)
would make in the same cycle.
"""

import argparse
import time
from datetime import UTC, datetime, timedelta

from jobs_common import history_fill, setup


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=1_000)
    parser.add_argument("--sessions", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    setup()
    from django.conf import settings
    from django.db import connection
    from django.utils import timezone

    from portal.accounts.models import User
    from portal.jobs.models import Job
    from portal.poll.cycle import poll_cycle
    from portal.sessions.hub import HubServer, JupyterHub
    from portal.sessions.models import Session
    from slurm.parsing import NodeInPartition, Parsed, new_delimiter, parse_squeue

    delimiter = new_delimiter()
    users = [User.objects.get_or_create(username=f"user{n:03d}")[0] for n in range(50)]
    start = datetime.now(UTC) - timedelta(minutes=5)
    nodes = [NodeInPartition(node=f"gpu{n:02d}", partition="gpu", is_default_partition=True, state="mixed",
                             cpus_allocated=64, cpus_total=128, memory_mb=1_024_000,
                             memory_allocated_mb=512_000,
                             gpus={"a100": 8}, gpus_used={"a100": 6}, partition_max_time=timedelta(days=2))
             for n in range(16)]

    class CannedSlurm:
        """The queue as squeue prints it (parsed by the real parser on each call), nothing else to say."""

        def __init__(self, squeue_text: str) -> None:
            self.squeue_text, self.calls = squeue_text, 0

        def nodes(self) -> Parsed:
            self.calls += 1
            return Parsed(rows=nodes)

        def queue(self, *, finished: bool = False) -> Parsed:
            self.calls += 1
            return parse_squeue(self.squeue_text, delimiter)

        def accounting(self, **kwargs: object) -> Parsed:
            self.calls += 1
            return Parsed(rows=[])

        def efficiency(self, job_ids: list[str]) -> Parsed:
            self.calls += 1
            return Parsed(rows=[])

    class ListedHub:
        """The hub's one listing: every session running and ready."""

        def __init__(self, listing: dict) -> None:
            self.listing, self.calls = listing, 0

        def active_servers(self) -> dict:
            self.calls += 1
            return self.listing

    def rows(records: list[list[str]]) -> str:
        return "".join("".join(f"{value}{delimiter}" for value in record) + "\n" for record in records)

    start_text = start.strftime("%Y-%m-%dT%H:%M:%S")
    budget = settings.POLL_CYCLE_BUDGET_SECONDS
    for round_ in range(1, args.rounds + 1):
        history_fill(args.jobs, users, state_sql="'RUNNING'")
        with connection.cursor() as cursor:
            cursor.execute("TRUNCATE servers_session RESTART IDENTITY CASCADE")
        sessions = Session.objects.bulk_create([Session(
            user=users[n % len(users)], name=f"s{n}", partition="gpu", gpus=1, hours=8, nodes=1,
            job_id=str(2_000_000 + n), hub_accepted_at=start, started_at=start, ready_at=start)
            for n in range(args.sessions)])
        jobs = list(Job.objects.values_list("slurm_job_id", "uuid", "user__username"))
        queue = [[job_id, "gpu", "RUNNING", user, "None", "1", "8", "gres/gpu:1", "gpu01", start_text, "N/A",
                  "8:00:00", f"gpuportal:{uuid}", "job"] for job_id, uuid, user in jobs]
        queue += [[s.job_id, "gpu", "RUNNING", s.user.username, "None", "1", "8", "gres/gpu:1", "gpu02",
                   start_text, "N/A", "8:00:00", s.slurm_comment, f"jupyterhub:{s.name}"] for s in sessions]
        listing: dict = {}
        for s in sessions:
            listing.setdefault(s.user.username, {})[s.name] = HubServer(
                name=s.name, ready=True, pending=None, url=f"/user/{s.user.username}/{s.name}/",
                last_activity=timezone.now(), job_id=s.job_id, job_status="RUNNING gpu02")
        slurm, hub = CannedSlurm(rows(queue)), ListedHub(listing)
        JupyterHub.from_settings = classmethod(lambda cls, listed=hub, **_: listed)  # the cycle's hub
        began = time.perf_counter()
        report = poll_cycle(slurm=slurm)
        took = time.perf_counter() - began
        print(f"round {round_}: {args.jobs:,} jobs + {args.sessions} sessions live -> cycle {took:6.2f} s "
              f"(budget {budget:g} s, Celery's hard kill {settings.CELERY_TASK_TIME_LIMIT} s); "
              f"skipped {report.skipped or 'nothing'}; Slurm calls {slurm.calls}, hub calls {hub.calls}")
    print(f"per-job and per-server polling would make {args.jobs:,} squeue -j + {args.sessions} squeue -j "
          f"(one per server poll) calls a cycle; the cycle makes {slurm.calls} Slurm calls and {hub.calls} "
          f"hub call")


if __name__ == "__main__":
    main()
