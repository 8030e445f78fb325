"""Cluster status served from the portal's snapshot vs. asking Slurm on every page view.

Needs `make up`. Prints latency per view and the slurmctld RPCs (from `sdiag`) that N views cost:
  python bench/cluster_status.py [--views 200]

The stock alternative is what a hand-rolled portal does: run `sinfo` + `squeue` per request.
RPC counts are deltas of the shared slurmctld, so other traffic during the run shows up too.
"""

import argparse
import json
import statistics
import subprocess
import time
import urllib.request

from measure import percentile, rpc_total

PORTAL = "http://127.0.0.1:8000"
def measure(label: str, views: int, view) -> dict:
    before = rpc_total()
    times = []
    for _ in range(views):
        start = time.perf_counter()
        view()
        times.append((time.perf_counter() - start) * 1000)
    rpcs = rpc_total() - before
    return {"how": label, "p50_ms": statistics.median(times), "p99_ms": percentile(times, 99),
            "rpcs": rpcs, "rpcs_per_view": rpcs / views}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--views", type=int, default=200)
    args = parser.parse_args()

    request = urllib.request.Request(
        f"{PORTAL}/api/v1/tokens/", method="POST", headers={"Content-Type": "application/json"},
        data=json.dumps({"username": "alice", "password": "alice-pw", "name": "bench"}).encode())
    with urllib.request.urlopen(request) as response:
        token = json.load(response)["token"]

    def portal_view() -> None:
        req = urllib.request.Request(f"{PORTAL}/api/v1/cluster/",
                                     headers={"Authorization": f"Token {token}"})
        with urllib.request.urlopen(req) as response:
            json.load(response)

    def stock_view() -> None:
        subprocess.run(["sinfo", "--noheader", "--Node", "-O", "NodeHost,Partition,Gres,GresUsed"],
                       capture_output=True, check=True)
        subprocess.run(["squeue", "--noheader", "--all"], capture_output=True, check=True)

    rows = [measure("gpuportal GET /api/v1/cluster/ (snapshot)", args.views, portal_view),
            measure("stock: sinfo + squeue per view", args.views, stock_view)]
    print(f"{args.views} views each")
    print(f"{'':46} {'p50 ms':>8} {'p99 ms':>8} {'slurmctld RPCs':>15} {'RPCs/view':>10}")
    for row in rows:
        print(f"{row['how']:46} {row['p50_ms']:8.1f} {row['p99_ms']:8.1f} {row['rpcs']:15d} "
              f"{row['rpcs_per_view']:10.2f}")


if __name__ == "__main__":
    main()
