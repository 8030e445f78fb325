"""Spawn-to-ready latency of a 1-GPU notebook server: our spawner vs stock batchspawner.SlurmSpawner.

Starts two hubs side by side (spawners/hub.sh; ours with spawners/jupyterhub_config.py, stock with
bench/stock_hub_config.py: same resources, 1 GPU + 8 CPUs + 48 GB, 1 h) and alternates spawns as
alice through each hub's REST API — what the portal's Start button does. Times the request until
the hub reports the server ready, then stops it. Needs the local cluster up:
  python bench/spawn_latency.py [--rounds 10]
"""

import argparse
import os
import secrets
import shutil
import statistics
import subprocess
import time
from pathlib import Path

import requests

ROOT = Path(__file__).resolve().parents[1]
HUBS = {"ours": (28081, 28001, 28002, None),
        "stock": (38081, 38001, 38002, ROOT / "bench/stock_hub_config.py")}


def hub_env(name: str) -> dict[str, str]:
    port, proxy, proxy_api, config = HUBS[name]
    env = {**os.environ, "HUB_STATE_DIR": f"/tmp/gpuportal-bench-{name}", "HUB_PORT": str(port),
           "HUB_PROXY_PORT": str(proxy), "HUB_PROXY_API_PORT": str(proxy_api),
           "JUPYTERHUB_API_TOKEN": secrets.token_hex(32), "CONFIGPROXY_AUTH_TOKEN": secrets.token_hex(32),
           "JUPYTERHUB_CRYPT_KEY": secrets.token_hex(32), "HUB_CULLER_TOKEN": secrets.token_hex(32)}
    if config:
        env["HUB_CONFIG"] = str(config)
    return env


def api(env: dict, method: str, path: str, **kwargs: object) -> requests.Response:
    return requests.request(method, f"http://127.0.0.1:{env['HUB_PORT']}/hub/api{path}", timeout=60,
                            headers={"Authorization": f"token {env['JUPYTERHUB_API_TOKEN']}"}, **kwargs)


def spawn(env: dict, name: str, options: dict) -> float:
    started = time.monotonic()
    response = api(env, "POST", f"/users/alice/servers/{name}", json={"user_options": options})
    assert response.status_code in (201, 202), response.text
    while not (api(env, "GET", "/users/alice").json()["servers"].get(name) or {}).get("ready"):
        if time.monotonic() - started > 120:
            raise RuntimeError(f"{name} not ready after 120 s")
        time.sleep(0.05)
    elapsed = time.monotonic() - started
    api(env, "DELETE", f"/users/alice/servers/{name}", json={"remove": True})
    while api(env, "GET", "/users/alice").json()["servers"].get(name):
        time.sleep(0.2)
    return elapsed


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=10)
    args = parser.parse_args()
    envs = {name: hub_env(name) for name in HUBS}
    for env in envs.values():
        subprocess.run([ROOT / "spawners/hub.sh", "stop"], env=env, check=True)
        shutil.rmtree(env["HUB_STATE_DIR"], ignore_errors=True)
        subprocess.run([ROOT / "spawners/hub.sh", "start"], env=env, check=True)
        api(env, "POST", "/users/alice")
    times: dict[str, list[float]] = {name: [] for name in HUBS}
    try:
        for n in range(args.rounds):
            # Alternate which goes first, so neither always meets a warmer cluster.
            for name in (("ours", "stock") if n % 2 == 0 else ("stock", "ours")):
                options = {"gpus": 1, "hours": 1} if name == "ours" else {}
                times[name].append(spawn(envs[name], f"bench-{n}", options))
    finally:
        for env in envs.values():
            subprocess.run([ROOT / "spawners/hub.sh", "stop"], env=env, check=False)
    print(f"spawn request -> server ready, 1 GPU, {args.rounds} rounds (seconds)")
    print(f"{'':>6} {'median':>8} {'p95':>8} {'min':>8} {'max':>8}")
    for name, values in times.items():
        print(f"{name:>6} {statistics.median(values):>8.2f} {p95(values):>8.2f} {min(values):>8.2f} "
              f"{max(values):>8.2f}")
    ratio = statistics.median(times["ours"]) / statistics.median(times["stock"])
    print(f"ours / stock (median): {ratio:.2f}")


if __name__ == "__main__":
    main()
