"""A real Prometheus (Debian's package) on loopback scrapes the live server's /metrics with a scrape
token: the GPU series are there, and there are as many series with 100 finished jobs as with 10."""

import shutil
import subprocess
import time

import pytest
import requests

from portal.jobs.models import JobState
from portal.metrics.services import scrape_token_create
from tests.metrics.conftest import gpu_jobs_plant
from tests.ports import free_port

PROMETHEUS = shutil.which("prometheus") or "/usr/bin/prometheus"


@pytest.fixture
def prometheus(live_server, transactional_db, tmp_path):
    """Scrapes the live server every second; yields a function that runs an instant query."""
    key = scrape_token_create(name="test prometheus")[1]
    (tmp_path / "token").write_text(key)
    target = live_server.url.removeprefix("http://")
    (tmp_path / "prometheus.yml").write_text(f"""
global: {{scrape_interval: 1s, scrape_timeout: 1s}}
scrape_configs:
  - job_name: gpuportal
    metrics_path: /metrics
    authorization: {{type: Bearer, credentials_file: {tmp_path / "token"}}}
    static_configs: [{{targets: ["{target}"]}}]
""")
    port = free_port()
    log = (tmp_path / "prometheus.log").open("w")
    process = subprocess.Popen([PROMETHEUS, f"--config.file={tmp_path / 'prometheus.yml'}",
                                f"--storage.tsdb.path={tmp_path / 'data'}",
                                f"--web.listen-address=127.0.0.1:{port}"],
                               stdout=log, stderr=subprocess.STDOUT)
    api = f"http://127.0.0.1:{port}/api/v1"

    def query(expr: str) -> list[dict]:
        answer = requests.get(f"{api}/query", params={"query": expr}, timeout=5).json()
        assert answer["status"] == "success", answer
        return answer["data"]["result"]

    try:
        yield query
    finally:
        process.terminate()
        process.wait(timeout=10)
        log.close()


def _scraped_after(query, moment: float, timeout: float = 30) -> None:
    """Waits for a successful scrape that began after `moment`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            up = query('up{job="gpuportal"}')
        except (requests.ConnectionError, ValueError):  # not listening, or "Service Unavailable" yet
            up = []
        if up and float(up[0]["value"][0]) > moment + 1.5 and up[0]["value"][1] == "1":
            return
        time.sleep(0.3)
    raise AssertionError(f"no successful scrape after {moment}: {up}")


def _count(query, selector: str) -> int:
    result = query(f"count({selector})")
    return int(result[0]["value"][1]) if result else 0


def test_prometheus_scrapes_gpu_series_and_their_count_does_not_grow_with_jobs(prometheus, partitions):
    query = prometheus
    gpu_jobs_plant(1, state=JobState.RUNNING, node_list="vm", gpus=2, util=60)
    gpu_jobs_plant(10, node_list="vm", util=90)
    _scraped_after(query, time.time())

    util = query('gpuportal_node_gpu_utilization_percent{node="vm"}')
    assert [float(row["value"][1]) for row in util] == [60.0]
    assert float(query('gpuportal_partition_gpus{partition="gpu"}')[0]["value"][1]) == 4
    assert float(query('gpuportal_partition_gpus_sampled{partition="gpu"}')[0]["value"][1]) == 2
    # A request is counted once answered: the scrapes show from the second scrape on.
    _scraped_after(query, time.time())
    assert query('gpuportal_http_requests_total{route="/metrics", method="GET", status="2xx"}')
    gpu_series = '{__name__=~"gpuportal_(node|partition)_.*"}'
    every_series = '{job="gpuportal"}'
    with_10 = _count(query, gpu_series), _count(query, every_series)
    # 5 gauges each for partitions gpu and debug and node vm, and utilisation where GPUs were sampled.
    assert with_10[0] == 3 * 5 + 2
    gpu_jobs_plant(90, node_list="vm", util=90)
    _scraped_after(query, time.time())
    with_100 = _count(query, gpu_series), _count(query, every_series)
    assert with_100 == with_10
