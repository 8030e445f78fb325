"""One portal in front of 1 and of 2 clusters (#38): Slurm RPCs per poll cycle per cluster, and the
cluster page's p99, side by side.

  python bench/clusters.py [--cycles 3] [--requests 200]

A database of its own (`bench_clusters`, created and migrated on the portal's PostgreSQL server),
never the portal's. With 1 cluster the portal reads no cluster file (the SLURM_* settings'
`gpuportal`); with 2, a folder of its own holds `gpuportal.toml` (default) and `cluster-b.toml`, as
on the bed. Each configuration runs the real cycles of every configured cluster (beat's work), whose
Slurm commands run as the otherwise unused user `nobody` (wrappers in the bench's own bin dir, as
SLURM_BIN_DIR), so each controller's `sdiag` (`sdiag` and `sdiag -M cluster-b`), by user, counts
exactly the cycles' RPCs whatever else the shared bed does. The cluster page (`/cluster/`) and
`GET /api/v1/cluster/` go through the whole Django stack in-process, logged in, the two
configurations asked in turn so that both share whatever else the machine does. Target: with 2
clusters, p99 within 1.2x of 1 cluster's.
"""

import argparse
import os
import subprocess
import tempfile
import time
from pathlib import Path

from measure import django_on, percentile, timed
from slurm_rpcs import by_user, wrappers

STATE = Path(tempfile.mkdtemp(prefix="bench-clusters-"))
USER = "nobody"
TARGET_RATIO = 1.2
B = "cluster-b"
CONTROLLERS = {"gpuportal": ["sdiag"], B: ["sdiag", "-M", B]}
os.environ.update(
    SLURM_BIN_DIR=str(wrappers(STATE / "bin-nobody", USER)), LOG_LEVEL="ERROR",
    # Never the running portal's hub or the files it publishes for its hub.
    JUPYTERHUB_API_URL="http://127.0.0.1:9/hub/api", JUPYTERHUB_TIMEOUT_SECONDS="1",
    GPUPORTAL_POLICY_FILE=str(STATE / "policy.json"), GPUPORTAL_QUEUE_FILE=str(STATE / "queue.json"),
)


def controller_rpcs() -> dict[str, int]:
    """Each controller's RPCs from the cycles' user so far."""
    return {name: by_user(subprocess.run(command, capture_output=True, text=True, check=True).stdout
                          .split("Pending RPC")[0], USER)
            for name, command in CONTROLLERS.items()}


def configure(clusters: int) -> list[str]:
    """Point the portal at 1 or 2 clusters; the configured clusters' names, the default first."""
    from django.conf import settings

    if clusters == 1:
        settings.CLUSTERS_DIR = str(STATE / "no-clusters.d")
        return ["gpuportal"]
    folder = STATE / "clusters.d"
    if not folder.exists():
        folder.mkdir()
        (folder / "gpuportal.toml").write_text('name = "gpuportal"\ntitle = "GPU cluster"\ndefault = true\n')
        (folder / "cluster-b.toml").write_text(f'name = "{B}"\ntitle = "Cluster B"\n')
    settings.CLUSTERS_DIR = str(folder)
    return ["gpuportal", B]


def cycles(clusters: int, count: int) -> dict[str, tuple[float, float]]:
    """Per configured cluster: RPCs on its own controller per cycle, and seconds per cycle."""
    from portal.poll.cycle import cluster_poll_cycle, poll_cycle

    names = configure(clusters)
    figures = {}
    for name in names:
        before, start = controller_rpcs(), time.perf_counter()
        for _ in range(count):
            report = poll_cycle() if name == "gpuportal" else cluster_poll_cycle(cluster=name)
            assert report.ran and report.status.error == "", (name, report.status.error)
        seconds, after = time.perf_counter() - start, controller_rpcs()
        others = {other: after[other] - before[other] for other in CONTROLLERS if other != name}
        assert not any(others.values()), f"{name}'s cycle asked another controller: {others}"
        figures[name] = ((after[name] - before[name]) / count, seconds / count)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cycles", type=int, default=3)
    parser.add_argument("--requests", type=int, default=200)
    args = parser.parse_args()
    django_on("bench_clusters")
    from django.test import Client

    from portal.accounts.models import User

    rpcs = {clusters: cycles(clusters, args.cycles) for clusters in (1, 2)}
    print(f"\n== Slurm RPCs per poll cycle per cluster (sdiag of each controller, the cycles' user "
          f"{USER}), {args.cycles} cycles each ==")
    print(f"{'clusters configured':>20} {'cluster':>10} {'RPCs / cycle':>13} {'s / cycle':>10}")
    for clusters, figures in rpcs.items():
        for name, (per_cycle, seconds) in figures.items():
            print(f"{clusters:>20} {name:>10} {per_cycle:>13.1f} {seconds:>10.2f}")

    # Both clusters' snapshots are stored now (the cycles above): 1 cluster reads only its own.
    user, _ = User.objects.get_or_create(username="bench-clusters", defaults={
        "ldap_groups": ["portal-users"], "gid_number": 10000, "home_directory": "/home/bench-clusters"})
    client = Client()
    client.force_login(user)
    paths = ["/cluster/", "/api/v1/cluster/"]
    results: dict[tuple[int, str], list[float]] = {(c, p): [] for c in (1, 2) for p in paths}
    for clusters in (1, 2):  # warm: templates, the cluster files
        configure(clusters)
        for path in paths:
            timed(client, path, 10)
    for _ in range(args.requests // 10):
        for clusters in (1, 2):
            configure(clusters)
            for path in paths:
                results[clusters, path] += timed(client, path, 10)
    print(f"\n== {args.requests} GETs per page and configuration, in turn ==")
    print(f"{'page':>18} {'1 cluster p50':>14} {'p99':>8} {'2 clusters p50':>15} {'p99':>8} "
          f"{'p99 ratio':>10}")
    for path in paths:
        one, two = results[1, path], results[2, path]
        ratio = percentile(two, 99) / percentile(one, 99)
        print(f"{path:>18} {percentile(one, 50):>11.2f} ms {percentile(one, 99):>5.2f} ms "
              f"{percentile(two, 50):>12.2f} ms {percentile(two, 99):>5.2f} ms {ratio:>9.2f}x "
              f"({'met' if ratio <= TARGET_RATIO else 'NOT met'}: <= {TARGET_RATIO}x)")


if __name__ == "__main__":
    main()
