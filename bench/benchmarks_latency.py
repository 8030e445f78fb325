"""Benchmark history, compare and charts at 10^5 results and 10^6 jobs, beside naive baselines.

  python bench/benchmarks_latency.py [--results 100000] [--jobs 1000000] [--requests 200]

A database of its own (`bench_benchmarks` on the portal's PostgreSQL server), filled server-side
with INSERT ... SELECT generate_series. Requests go through the whole Django stack in-process
(routing, session or token auth, selectors, serializers, templates, chart specs), without sockets.
Target (issue 11): p99 <= 50 ms for history, compare and charts. Baselines, timed the same way in the
same run: the same history page read the naive way (one query per row for its user, job and
reference), and Django's admin changelist of the same table.
"""

import argparse
import time

from jobs_common import history_fill, summary
from measure import django_on


def results_fill(total: int, users: list, jobs: int) -> None:
    """`total` results over 7 tools' worth of series: models, precisions, 1-8 GPUs, two GPU types and
    partitions, 1 % flagged, 2 % unparsed; every 10th came from a job, each from its own."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("TRUNCATE benchmarks_benchmarkresult RESTART IDENTITY")
        cursor.execute("""
            INSERT INTO benchmarks_benchmarkresult (tool, "case", source, model, framework, framework_version,
                precision, batch_size_per_gpu, gpus, nodes, gpu_type, environment, partition, run_at, user_id,
                job_id, metric, value, unit, parsed, reason, data, flagged, flag_reason, created_at)
            SELECT tool,
                CASE WHEN tool = 'fio'
                     THEN (ARRAY['write 1M','read 1M','randwrite 4k','randread 4k'])[1 + i %% 4] ELSE '' END,
                'job',
                CASE WHEN tool = 'tf_cnn_benchmarks'
                     THEN (ARRAY['resnet50','resnet101','inception3'])[1 + i %% 3] ELSE '' END,
                'PyTorch', '2.14.1', (ARRAY['fp32','amp'])[1 + i %% 2], 64, g, 1,
                (ARRAY['a100','h100'])[1 + i %% 2], 'pytorch', (ARRAY['gpu','debug'])[1 + i %% 2],
                now() - (%s - i) * interval '1 minute', (%s::bigint[])[1 + i %% %s],
                CASE WHEN i %% 10 = 0 AND i / 10 <= %s THEN i / 10 END,  -- one result per job (its case)
                CASE tool WHEN 'fio' THEN 'bw_mib_s' WHEN 'nccl' THEN 'busbw_gbps' ELSE 'images_per_sec' END,
                CASE WHEN i %% 50 = 0 THEN NULL ELSE 100 * g * (0.8 + random() * 0.2) END,
                CASE tool WHEN 'fio' THEN 'MiB/s' WHEN 'nccl' THEN 'GB/s' ELSE 'images/s' END,
                i %% 50 <> 0, CASE WHEN i %% 50 = 0 THEN 'no total images/sec line' ELSE '' END,
                '{"parsed": true, "rows": []}'::jsonb, i %% 100 = 0,
                CASE WHEN i %% 100 = 0 THEN 'outside its reference' ELSE '' END, now()
            FROM generate_series(1, %s) AS i,
                LATERAL (SELECT
                    (ARRAY['tf_cnn_benchmarks','tf_cnn_benchmarks','fio','nccl','p2p'])[1 + i %% 5] AS tool,
                    (ARRAY[1, 2, 4, 8])[1 + (i / 5) %% 4] AS g) AS pick
        """, [total, [u.pk for u in users], len(users), jobs, total])
        cursor.execute("ANALYZE benchmarks_benchmarkresult")


def naive_history(users_by_pk: dict) -> int:
    """The same 50 rows, each row's user, job and reference fetched on its own (the N+1 pattern)."""
    from portal.benchmarks.models import BenchmarkResult

    touched = 0
    for result in BenchmarkResult.objects.order_by("-run_at", "-id")[:50]:
        touched += len(result.user.username) + (result.job.pk if result.job_id else 0)
        touched += result.reference.pk if result.reference_id else 0
    return touched


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--results", type=int, default=100_000)
    parser.add_argument("--jobs", type=int, default=1_000_000)
    parser.add_argument("--requests", type=int, default=200)
    args = parser.parse_args()
    django_on("bench_benchmarks")
    from django.test import Client
    from rest_framework.test import APIClient

    from portal.accounts.models import User
    from portal.accounts.services import api_token_create
    from portal.benchmarks.models import BenchmarkResult
    from portal.benchmarks.services import published_load

    users = [User.objects.get_or_create(username=name, defaults={"is_staff": name == "ada",
                                                                 "is_superuser": name == "ada"})[0]
             for name in ("alice", "bob", "ada", "carol", "dave")]
    published_load()
    start = time.perf_counter()
    history_fill(args.jobs, users)
    results_fill(args.results, users, args.jobs)
    print(f"== {args.results:,} benchmark results, {args.jobs:,} jobs "
          f"(filled in {time.perf_counter() - start:.1f} s) ==")
    _, key = api_token_create(user=users[0], name="bench")
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    page, admin = Client(), Client()
    page.force_login(users[0])
    admin.force_login(users[2])
    ids = ",".join(str(pk) for pk in BenchmarkResult.objects.order_by("?").values_list("pk", flat=True)[:20])
    middle = BenchmarkResult.objects.order_by("id").values_list("run_at", flat=True)[args.results // 2]
    second = api.get("/api/v1/benchmarks/").json()["next"].replace("http://testserver", "")
    one = BenchmarkResult.objects.filter(tool="nccl").values_list("pk", flat=True).first()
    cases = [
        ("history page (HTML), newest 50", page, "/benchmarks/"),
        ("history page, flagged only", page, "/benchmarks/?flagged=1"),
        ("history page, model+precision+GPUs", page, "/benchmarks/?model=resnet50&precision=amp&gpus=4"),
        ("API list, newest 50", api, "/api/v1/benchmarks/"),
        ("API list, next page (cursor)", api, second),
        ("API tool=fio&gpu_type=h100", api, "/api/v1/benchmarks/?tool=fio&gpu_type=h100"),
        ("API flagged=true", api, "/api/v1/benchmarks/?flagged=true"),
        ("API partition=debug&run_before=middle", api,
         "/api/v1/benchmarks/?partition=debug&run_before=" + middle.isoformat().replace("+00:00", "Z")),
        ("API detail", api, f"/api/v1/benchmarks/{one}/"),
        ("API compare, 20 ids", api, f"/api/v1/benchmarks/compare/?ids={ids}"),
        ("compare page, 20 ids", page, f"/benchmarks/compare/?ids={ids}"),
        ("chart: scaling + published overlay", page,
         "/benchmarks/charts/?kind=scaling&model=resnet50&precision=fp32"),
        ("chart: AMP vs FP32", page, "/benchmarks/charts/?kind=precision&model=resnet50"),
        ("chart: storage (fio)", page, "/benchmarks/charts/?kind=storage"),
        ("chart: NCCL busbw vs size", page, "/benchmarks/charts/?kind=nccl"),
        ("chart: history + references", page,
         "/benchmarks/charts/?kind=history&tool=tf_cnn_benchmarks&model=resnet50&precision=fp32&gpus=4&references=1"),
        ("result page (NCCL chart)", page, f"/benchmarks/{one}/"),
        ("usage API, 12 weeks of 10^6 jobs (admin)", admin, "/api/v1/usage/"),
        ("baseline: Django admin changelist", admin, "/admin/benchmarks/benchmarkresult/"),
    ]
    for label, client, url in cases:
        assert client.get(url).status_code == 200, url
        times = []
        for _ in range(args.requests):
            start = time.perf_counter()
            response = client.get(url)
            times.append((time.perf_counter() - start) * 1000)
            assert response.status_code == 200
        print(f"{label:44s} {summary(times)}")
    by_pk = {u.pk: u for u in users}
    times = []
    for _ in range(args.requests):
        start = time.perf_counter()
        naive_history(by_pk)
        times.append((time.perf_counter() - start) * 1000)
    print(f"{'baseline: naive per-row history (ORM only)':44s} {summary(times)}")


if __name__ == "__main__":
    main()
