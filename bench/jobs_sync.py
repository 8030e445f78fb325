"""One status-sync cycle with 10^4 active jobs: this cycle's squeue result + one sacct.

  python bench/jobs_sync.py [--active 10000] [--left 1000] [--rounds 3]

`--active` portal jobs are RUNNING; the simulated queue still holds all but `--left` of them (10 %
of those changed: a new node list), and accounting answers for the ones that left. Slurm's output
is synthesized in its text format and parsed by the real parsers, so the figure covers parsing,
matching and the bulk database writes; the stock alternative (one `squeue -j`/`sacct -j` per job,
what per-job polling does) is counted as the calls it would make, not run.
"""

import argparse
import time
from datetime import UTC, datetime, timedelta

from jobs_common import history_fill, setup


class CannedSlurm:
    """Answers sacct with canned text, through the real parser; counts the calls."""

    def __init__(self, sacct_text: str, delimiter: str) -> None:
        self.sacct_text, self.delimiter, self.sacct_calls = sacct_text, delimiter, 0

    def accounting(self, **kwargs: object) -> object:
        from slurm.parsing import parse_sacct

        self.sacct_calls += 1
        return parse_sacct(self.sacct_text, self.delimiter)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--active", type=int, default=10_000)
    parser.add_argument("--left", type=int, default=1_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    setup()
    from django.utils import timezone

    from portal.accounts.models import User
    from portal.jobs.models import Job, JobState
    from portal.poll.cycle import queue_follow
    from slurm.parsing import new_delimiter, parse_squeue

    delimiter = new_delimiter()

    def rows(records: list[list[str]]) -> str:
        """Slurm's text as the adapter asks for it: every field followed by the delimiter."""
        return "".join("".join(f"{value}{delimiter}" for value in record) + "\n" for record in records)

    users = [User.objects.get_or_create(username=name)[0] for name in ("alice", "bob", "carol")]
    start_text = (datetime.now(UTC) - timedelta(minutes=5)).strftime("%Y-%m-%dT%H:%M:%S")
    for round_ in range(1, args.rounds + 1):
        history_fill(args.active, users, state_sql="'RUNNING'")
        jobs = list(Job.objects.values_list("slurm_job_id", "uuid", "user__username"))
        staying, leaving = jobs[args.left:], jobs[:args.left]
        squeue_text = rows([[
            job_id, "gpu", "RUNNING", user, "None", "1", "8", "gres/gpu:1", "vm2" if i % 10 == 0 else "vm",
            start_text, "N/A", "8:00:00", f"gpuportal:{uuid}", "job"]
            for i, (job_id, uuid, user) in enumerate(staying)])
        sacct_text = rows([[
            job_id, "COMPLETED", "0:0", start_text, start_text, start_text, "300", "vm",
            "billing=8,cpu=8,gres/gpu=1,mem=48G,node=1", "None", f"gpuportal:{uuid}", "sbatch --parsable",
            "gpu"] for job_id, uuid, _ in leaving])
        slurm = CannedSlurm(sacct_text, delimiter)
        begin = time.perf_counter()
        queue = parse_squeue(squeue_text, delimiter).rows
        parsed = time.perf_counter()
        report = queue_follow(queue=queue, queried_at=timezone.now(), slurm=slurm).kinds["jobs"]
        done = time.perf_counter()
        completed = Job.objects.filter(state=JobState.COMPLETED).count()
        print(f"round {round_}: {args.active:,} active jobs -> sync {1000 * (done - begin):7.1f} ms "
              f"(squeue parse {1000 * (parsed - begin):5.1f} ms, match + sacct parse + writes "
              f"{1000 * (done - parsed):6.1f} ms); updated from queue {report.from_queue:,}, "
              f"finished from sacct {report.from_accounting:,} (db: {completed:,}); "
              f"Slurm calls: 0 extra squeue + {slurm.sacct_calls} sacct")
    print(f"per-job polling would make {args.active:,} squeue -j calls per cycle "
          f"(+{args.left:,} sacct -j for the finished)")


if __name__ == "__main__":
    main()
