"""Request and task counters that every portal process adds to: gunicorn's workers and Celery's
worker are separate processes (on separate hosts, possibly), so they count in Redis, in a few
hashes under METRICS_KEY_PREFIX, and /metrics reads the totals from there. One pipelined round trip
per request or task; a Redis that is down or slow loses counts, never a request (short timeouts).

Chosen over prometheus_client's multiprocess mode, which needs one directory shared by every
process, emptied before any of them starts, and whose files pile up with each recycled worker:
the shipped units (deploy/systemd) run web and worker as separate services with private /tmp."""

import functools
import logging
import math
from dataclasses import dataclass

import redis
from django.conf import settings
from redis.backoff import NoBackoff
from redis.retry import Retry

logger = logging.getLogger(__name__)

# Seconds; the request latency histogram's upper bounds (+Inf implied).
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
SEP = "\t"  # between label values in a hash field: never in a route pattern, method or task name


@functools.cache
def _redis(url: str) -> redis.Redis:
    """One client (a fork-safe connection pool) per process and URL; no retries: a count is not
    worth holding a request for."""
    return redis.Redis.from_url(url, socket_connect_timeout=0.5, socket_timeout=0.5,
                                retry=Retry(NoBackoff(), 0))


def _key(name: str) -> str:
    return f"{settings.METRICS_KEY_PREFIX}:{name}"


def _bucket(seconds: float) -> str:
    for bound in LATENCY_BUCKETS:
        if seconds <= bound:
            return repr(bound)
    return "+Inf"


def request_count(*, route: str, method: str, status_class: str, seconds: float) -> None:
    pipe = _redis(settings.METRICS_REDIS_URL).pipeline(transaction=False)
    pipe.hincrby(_key("requests"), SEP.join((route, method, status_class)), 1)
    pipe.hincrby(_key("latency_buckets"), SEP.join((route, method, _bucket(seconds))), 1)
    pipe.hincrbyfloat(_key("latency_sum"), SEP.join((route, method)), seconds)
    _execute(pipe)


def task_count(*, name: str, state: str) -> None:
    pipe = _redis(settings.METRICS_REDIS_URL).pipeline(transaction=False)
    pipe.hincrby(_key("tasks"), SEP.join((name, state)), 1)
    _execute(pipe)


def _execute(pipe: redis.client.Pipeline) -> None:
    try:
        pipe.execute()
    except Exception as error:  # a count is never worth failing a request or a task
        logger.warning("metrics not counted: %s", error)


@dataclass(frozen=True)
class Counts:
    requests: dict[tuple[str, ...], int]  # (route, method, status class) -> requests
    latency_buckets: dict[tuple[str, ...], int]  # (route, method, upper bound) -> requests in that bucket
    latency_sum: dict[tuple[str, ...], float]  # (route, method) -> seconds
    tasks: dict[tuple[str, ...], int]  # (task name, state) -> tasks


def counts_read() -> Counts:
    """Everything counted so far. Raises redis.RedisError when Redis does not answer."""
    pipe = _redis(settings.METRICS_REDIS_URL).pipeline(transaction=False)
    for name in ("requests", "latency_buckets", "latency_sum", "tasks"):
        pipe.hgetall(_key(name))
    requests, buckets, sums, tasks = pipe.execute()

    def parsed(raw: dict[bytes, bytes], number: type) -> dict[tuple[str, ...], int | float]:
        out = {}
        for field, value in raw.items():
            figure = number(value)
            if math.isfinite(figure):
                out[tuple(field.decode(errors="replace").split(SEP))] = figure
        return out

    return Counts(requests=parsed(requests, int), latency_buckets=parsed(buckets, int),
                  latency_sum=parsed(sums, float), tasks=parsed(tasks, int))
