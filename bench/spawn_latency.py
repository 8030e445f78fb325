"""Spawn-to-ready latency of notebook servers: our spawner vs stock batchspawner.SlurmSpawner.

Starts two hubs side by side (spawners/hub.sh; ours with spawners/jupyterhub_config.py, stock with
bench/stock_hub_config.py) and, through each hub's REST API (what the portal's Start button does):
- single starts of a 1-GPU server (8 CPUs, 48 GB, 1 h), alternating hubs: request -> hub says ready;
- bursts of N simultaneous CPU-only starts (2 CPUs, 8 GB each): request -> all ready, with the
  slurmctld RPCs the hub and the user sent meanwhile (sdiag, by user; the same users' traffic over an
  idle window just before is subtracted).
Both hubs read a copy of the portal's published policy allowing N sessions per user. Needs the local
cluster up:
  python bench/spawn_latency.py [--rounds 12] [--burst 10] [--burst-rounds 3]
"""

import argparse
import json
import os
import secrets
import shutil
import statistics
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import requests
from measure import percentile, rpc_by_users

ROOT = Path(__file__).resolve().parents[1]
HUBS = {"ours": (28081, 28001, 28002, None),
        "stock": (38081, 38001, 38002, ROOT / "bench/stock_hub_config.py")}
USER = "alice"
RPC_USERS = {"jupyterhub", USER}  # the hub's own squeue/scontrol, and sbatch/scancel as the user
POLICY = Path("/tmp/gpuportal-bench-policy.json")
# The same sizes through each spawner's options: ours by the portal's policy, stock's merged into its
# batch script's variables as batchspawner does.
SINGLE = {"ours": {"gpus": 1, "hours": 1}, "stock": {}}
CPU_ONLY = {"ours": {"gpus": 0, "hours": 1}, "stock": {"gres": "", "nprocs": "2", "memory": "8G"}}


def bench_policy(sessions: int) -> None:
    """The portal's published policy, with room for `sessions` servers per user."""
    policy = json.loads(Path("/var/lib/gpuportal/policy/policy.json").read_text())
    for limits in policy["groups"].values():
        limits["max_sessions"] = max(limits["max_sessions"], sessions)
    POLICY.write_text(json.dumps(policy))
    POLICY.chmod(0o644)


def hub_env(name: str, sessions: int) -> dict[str, str]:
    port, proxy, proxy_api, config = HUBS[name]
    env = {**os.environ, "HUB_STATE_DIR": f"/tmp/gpuportal-bench-{name}", "HUB_PORT": str(port),
           "HUB_PROXY_PORT": str(proxy), "HUB_PROXY_API_PORT": str(proxy_api),
           "JUPYTERHUB_API_TOKEN": secrets.token_hex(32), "CONFIGPROXY_AUTH_TOKEN": secrets.token_hex(32),
           "JUPYTERHUB_CRYPT_KEY": secrets.token_hex(32), "HUB_CULLER_TOKEN": secrets.token_hex(32),
           "GPUPORTAL_POLICY_FILE": str(POLICY), "HUB_SERVERS_PER_USER": str(sessions)}
    if config:
        env["HUB_CONFIG"] = str(config)
    return env


def api(env: dict, method: str, path: str, **kwargs: object) -> requests.Response:
    return requests.request(method, f"http://127.0.0.1:{env['HUB_PORT']}/hub/api{path}", timeout=120,
                            headers={"Authorization": f"token {env['JUPYTERHUB_API_TOKEN']}"}, **kwargs)


def servers(env: dict) -> dict:
    return api(env, "GET", f"/users/{USER}").json()["servers"]


def start(env: dict, name: str, options: dict) -> None:
    response = api(env, "POST", f"/users/{USER}/servers/{name}", json={"user_options": options})
    assert response.status_code in (201, 202), response.text


def until_ready(env: dict, names: list[str], started: float) -> float:
    while not all((servers(env).get(name) or {}).get("ready") for name in names):
        if time.monotonic() - started > 300:
            raise RuntimeError(f"not all of {names} ready after 300 s")
        time.sleep(0.05)
    return time.monotonic() - started


def stop(env: dict, names: list[str]) -> None:
    for name in names:
        api(env, "DELETE", f"/users/{USER}/servers/{name}", json={"remove": True})
    while set(servers(env)) & set(names):
        time.sleep(0.2)


def single(env: dict, name: str, options: dict) -> float:
    started = time.monotonic()
    start(env, name, options)
    elapsed = until_ready(env, [name], started)
    stop(env, [name])
    return elapsed


def burst(env: dict, tag: str, count: int, options: dict) -> tuple[float, float]:
    """Seconds until all `count` servers are ready, and slurmctld RPCs per spawn."""
    names = [f"{tag}-{i}" for i in range(count)]
    idle_from, idle_start = rpc_by_users(RPC_USERS), time.monotonic()
    time.sleep(5)
    background_rate = (rpc_by_users(RPC_USERS) - idle_from) / (time.monotonic() - idle_start)
    before, started = rpc_by_users(RPC_USERS), time.monotonic()
    with ThreadPoolExecutor(count) as pool:
        list(pool.map(lambda name: start(env, name, options), names))
    elapsed = until_ready(env, names, started)
    rpcs = rpc_by_users(RPC_USERS) - before - background_rate * elapsed
    stop(env, names)
    return elapsed, max(rpcs, 0.0) / count


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=12)
    parser.add_argument("--burst", type=int, default=10)
    parser.add_argument("--burst-rounds", type=int, default=3)
    args = parser.parse_args()
    bench_policy(args.burst)
    envs = {name: hub_env(name, args.burst) for name in HUBS}
    for env in envs.values():
        subprocess.run([ROOT / "spawners/hub.sh", "stop"], env=env, check=True)
        shutil.rmtree(env["HUB_STATE_DIR"], ignore_errors=True)
        subprocess.run([ROOT / "spawners/hub.sh", "start"], env=env, check=True)
        api(env, "POST", f"/users/{USER}")
    singles: dict[str, list[float]] = {name: [] for name in HUBS}
    bursts: dict[str, list[tuple[float, float]]] = {name: [] for name in HUBS}
    try:
        for n in range(args.rounds):
            # Alternate which goes first, so neither always meets a warmer cluster.
            for name in (("ours", "stock") if n % 2 == 0 else ("stock", "ours")):
                singles[name].append(single(envs[name], f"single-{n}", SINGLE[name]))
                print(f"single {n} {name}: {singles[name][-1]:.2f} s", flush=True)
        for n in range(args.burst_rounds):
            for name in (("ours", "stock") if n % 2 == 0 else ("stock", "ours")):
                bursts[name].append(burst(envs[name], f"burst{n}", args.burst, CPU_ONLY[name]))
                print(f"burst {n} {name}: {bursts[name][-1][0]:.2f} s, {bursts[name][-1][1]:.1f} RPCs/spawn",
                      flush=True)
    finally:
        for env in envs.values():
            subprocess.run([ROOT / "spawners/hub.sh", "stop"], env=env, check=False)
    print(f"spawn request -> server ready, 1 GPU, {args.rounds} rounds (seconds)")
    print(f"{'':>6} {'median':>8} {'p95':>8} {'min':>8} {'max':>8}")
    for name, values in singles.items():
        print(f"{name:>6} {statistics.median(values):>8.2f} {percentile(values, 95):>8.2f} "
              f"{min(values):>8.2f} {max(values):>8.2f}")
    ratio = statistics.median(singles["ours"]) / statistics.median(singles["stock"])
    print(f"ours / stock (median): {ratio:.2f}")
    print(f"\nburst of {args.burst} simultaneous CPU-only starts -> all ready, {args.burst_rounds} rounds")
    print(f"{'':>6} {'median s':>9} {'max s':>7} {'RPCs/spawn':>11}")
    for name, values in bursts.items():
        seconds = [value[0] for value in values]
        rpcs = [value[1] for value in values]
        print(f"{name:>6} {statistics.median(seconds):>9.2f} {max(seconds):>7.2f} "
              f"{statistics.median(rpcs):>11.1f}")
    ratio = statistics.median(v[0] for v in bursts["ours"]) / statistics.median(v[0] for v in bursts["stock"])
    print(f"ours / stock (median): {ratio:.2f}")


if __name__ == "__main__":
    main()
