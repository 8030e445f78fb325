"""slurmctld load from the portal and its hub with N real running notebook servers (sdiag, by user).

Needs the portal up (`make up`): its beat runs the poll cycle every SLURM_POLL_SECONDS and publishes
that squeue for the hub. Starts our hub and a stock batchspawner hub as bench/spawn_latency.py does,
then counts the RPCs slurmctld got from the portal (user gpuportal) and the hubs (user jupyterhub)
over equal windows:
  1. no server running;
  2. N CPU-only servers (2 CPUs, 8 GB each) running on our hub, all ready;
  3. M servers running on the stock hub (JupyterHub's default 30 s poll, `squeue -j` per server).
The local nodes are declared with 64 CPUs and 515 GB each (slurm/dev/services/slurm.sh), so 50
servers fit. Run:
  python bench/slurm_load.py [--servers 50] [--stock-servers 10] [--window 300]
"""

import argparse
import shutil
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor

from measure import rpc_by_users
from spawn_latency import CPU_ONLY, HUBS, ROOT, USER, api, bench_policy, hub_env, start, stop, until_ready

SENDERS = {"gpuportal", "jupyterhub"}


def per_hour(window: float) -> float:
    before, started = rpc_by_users(SENDERS), time.monotonic()
    time.sleep(window)
    return (rpc_by_users(SENDERS) - before) * 3600 / (time.monotonic() - started)


def running(env: dict, name: str, count: int) -> list[str]:
    names = [f"load-{i}" for i in range(count)]
    started = time.monotonic()
    with ThreadPoolExecutor(10) as pool:
        list(pool.map(lambda server: start(env, server, CPU_ONLY[name]), names))
    print(f"{count} servers on the {name} hub ready after {until_ready(env, names, started):.0f} s")
    return names


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--servers", type=int, default=50)
    parser.add_argument("--stock-servers", type=int, default=10)
    parser.add_argument("--window", type=float, default=300, help="seconds per measurement")
    args = parser.parse_args()
    bench_policy(max(args.servers, args.stock_servers))
    envs = {name: hub_env(name, max(args.servers, args.stock_servers)) for name in HUBS}
    for env in envs.values():
        subprocess.run([ROOT / "spawners/hub.sh", "stop"], env=env, check=True)
        shutil.rmtree(env["HUB_STATE_DIR"], ignore_errors=True)
        subprocess.run([ROOT / "spawners/hub.sh", "start"], env=env, check=True)
        api(env, "POST", f"/users/{USER}")
    try:
        idle = per_hour(args.window)
        names = running(envs["ours"], "ours", args.servers)
        ours = per_hour(args.window)
        stop(envs["ours"], names)
        names = running(envs["stock"], "stock", args.stock_servers)
        stock = per_hour(args.window)
        stop(envs["stock"], names)
    finally:
        for env in envs.values():
            subprocess.run([ROOT / "spawners/hub.sh", "stop"], env=env, check=False)
    print(f"\nslurmctld RPCs per hour from the portal + hubs (users {', '.join(sorted(SENDERS))}), "
          f"{args.window:.0f} s windows")
    print(f"{'':<32} {'per hour':>9} {'extra per server-hour':>22}")
    print(f"{'no server running':<32} {idle:>9.0f} {'':>22}")
    print(f"{f'ours, {args.servers} servers running':<32} {ours:>9.0f} "
          f"{(ours - idle) / args.servers + 0.0:>22.1f}")
    print(f"{f'stock, {args.stock_servers} servers running':<32} {stock:>9.0f} "
          f"{(stock - idle) / args.stock_servers:>22.1f}")


if __name__ == "__main__":
    main()
