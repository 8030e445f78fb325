"""Submission rate: POST /api/v1/jobs/ (validate, render, store, sbatch as the user) vs raw sbatch.

  python bench/jobs_submit_rate.py [--jobs 40]

Both sides submit the same tiny job (`true`, no GPU, partition debug) as alice on the local
cluster, alternating one by one so that load from other users affects both alike. Raw sbatch runs
through the same exec prefix (`runuser -u alice --`), as any portal must to submit as the user.
Target from issue 3: the API's rate >= 0.8 x raw sbatch. Requests run in-process (no HTTP socket).
"""

import argparse
import statistics
import subprocess
import time

from jobs_common import setup


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=40)
    args = parser.parse_args()
    setup()
    from rest_framework.test import APIClient

    from portal.accounts.models import User
    from portal.accounts.services import api_token_create
    from tests.poll_helpers import slurm_poll
    from portal.jobs.services import job_prepare

    assert slurm_poll().error == "", "Slurm must be up"
    alice, _ = User.objects.get_or_create(username="alice")
    _, key = api_token_create(user=alice, name="bench")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    payload = {"template": "custom", "name": "bench",
               "parameters": {"commands": "true", "gpus": 0, "partition": "debug", "time_limit": 1}}
    script = job_prepare(user=alice, template="custom", parameters=payload["parameters"], name="bench").script
    raw_times, api_times = [], []
    for _ in range(args.jobs):
        start = time.perf_counter()
        subprocess.run(["/usr/sbin/runuser", "-u", "alice", "--", "sbatch", "--parsable"], input=script,
                       text=True, capture_output=True, check=True)
        raw_times.append(time.perf_counter() - start)
        start = time.perf_counter()
        response = client.post("/api/v1/jobs/", payload, format="json")
        api_times.append(time.perf_counter() - start)
        assert response.status_code == 201 and response.json()["slurm_job_id"], response.json()
    raw_rate, api_rate = len(raw_times) / sum(raw_times), len(api_times) / sum(api_times)
    for label, rate, times in (("raw sbatch (runuser -u alice)", raw_rate, raw_times),
                               ("POST /api/v1/jobs/", api_rate, api_times)):
        print(f"{label:31s} {rate:6.1f} jobs/s   mean {1000 / rate:6.1f} ms   "
              f"median {1000 * statistics.median(times):6.1f} ms per job")
    print(f"API / raw = {api_rate / raw_rate:.2f} (target >= 0.8)")


if __name__ == "__main__":
    main()
