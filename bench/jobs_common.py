"""Shared set-up for the job benchmarks: Django on a database of their own (`bench_jobs`).

The benchmarks never touch the portal's database: they create `bench_jobs` on the same PostgreSQL
server, migrate it, and fill it with synthetic history in one server-side INSERT ... SELECT.
"""

import statistics

from measure import django_on, percentile


def setup() -> None:
    django_on("bench_jobs")


def history_fill(total: int, users: list, *, state_sql: str | None = None) -> None:
    """Replace the jobs table with `total` finished jobs spread over `users`, oldest first."""
    from django.db import connection

    templates = ["custom", "pytorch-train", "pytorch-multinode", "resnet50-benchmark", "nccl-allreduce",
                 "storage-benchmark", "gpu-p2p-bandwidth"]
    # Literal SQL (no parameters inside): '%' is doubled for the driver.
    states = state_sql or ("(ARRAY['COMPLETED','COMPLETED','COMPLETED','FAILED','CANCELLED','TIMEOUT'])"
                           "[1 + i %% 6]")
    with connection.cursor() as cursor:
        # CASCADE: tables that reference jobs (metrics, ...) are emptied with it.
        cursor.execute("TRUNCATE jobs_job RESTART IDENTITY CASCADE")
        cursor.execute(f"""
            INSERT INTO jobs_job (uuid, user_id, name, template, parameters, script, partition, nodes,
                gpus_per_node, cpus_per_node, mem_mb_per_node, time_limit, output_dir, state, reason,
                slurm_job_id, submit_attempts, submitted_at, slurm_submitted_at, started_at, ended_at,
                elapsed, node_list, gpus_allocated, gpu_hours, exit_code, exit_signal, updated_at,
                idempotency_key, request_digest, pending_reasons, slurm_duplicates)
            SELECT gen_random_uuid(), (%s::bigint[])[1 + i %% %s], 'job-' || i, (%s::text[])[1 + i %% 7],
                '{{"gpus": 1}}'::jsonb, '#!/bin/bash\nset -euo pipefail\ntrue\n', 'gpu', 1, 1, 8, 49152,
                interval '8 hours', '/home/u/gpuportal/jobs', {states}, '', (1000000 + i)::text, 1,
                t, t, t, t + interval '5 minutes', interval '5 minutes', 'vm', 1, 0.0833, 0, 0, now(), '', '',
                '[]'::jsonb, '[]'::jsonb
            FROM generate_series(1, %s) AS i,
                LATERAL (SELECT now() - (%s - i) * interval '10 seconds' AS t) AS at
        """, [[u.pk for u in users], len(users), templates, total, total])
        cursor.execute("ANALYZE jobs_job")


def summary(times_ms: list[float]) -> str:
    return (f"p50 {statistics.median(times_ms):7.2f} ms   p99 {percentile(times_ms, 99):7.2f} ms   "
            f"max {max(times_ms):7.2f} ms   (n={len(times_ms)})")
