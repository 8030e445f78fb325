"""TensorBoard instances and benchmark history (/api/v1/tensorboards/, /api/v1/benchmarks/)."""

from typing import Any

import click

from gpuportal_cli.client import ApiError, Exit
from gpuportal_cli.context import State, common_options, pass_state, wait_until
from gpuportal_cli.output import emit_json, generic_columns, out, table

TENSORBOARD_COLUMNS = ("id", "state", "status", "logdir", "job", "session", "url", "created_at",
                       "ended_reason", "end_reason")
BENCHMARK_COLUMNS = ("id", "tool", "model", "framework", "precision", "gpus", "nodes", "gpu_type",
                     "partition", "value", "unit", "flagged", "parsed", "created_at", "job")
TENSORBOARD_SETTLED = ("ready", "ended", "failed")


@click.group()
def tensorboard() -> None:
    """TensorBoard on a job's, a session's or a folder's event files, served through the portal."""


@tensorboard.command("start")
@click.option("--logdir", help="A folder of yours (or under the shared data mount).")
@click.option("--job", "job_id", type=int, help="The log folder of this job.")
@click.option("--session", "session_name", help="The log folder of this session.")
@click.option("--wait", is_flag=True, help="Wait until it is ready, then print its URL.")
@click.option("--interval", type=click.FloatRange(0.2), default=2.0, show_default=True)
@common_options
@pass_state
def tensorboard_start(state: State, logdir: str | None, job_id: int | None, session_name: str | None,
                      wait: bool, interval: float) -> None:
    """Start TensorBoard (a small CPU Slurm job as you); give exactly one of the three sources."""
    given = {key: value for key, value in
             {"logdir": logdir, "job": job_id, "session": session_name}.items() if value is not None}
    if len(given) != 1:
        raise click.UsageError("Give exactly one of --logdir, --job, --session.")
    client = state.client()
    board = client.request("POST", "/tensorboards/", json=given)
    if wait:
        board = wait_until(lambda: client.get(f"/tensorboards/{board['id']}/"),
                           lambda b: b.get("state") in TENSORBOARD_SETTLED,
                           lambda b: f"tensorboard {b['id']}: {b.get('status') or b.get('state')}",
                           interval=interval, quiet=state.json, what=f"tensorboard {board['id']}")
    if state.json:
        emit_json(board)
    else:
        url = f": {board['url']}" if board.get("url") else ""
        out.print(f"TensorBoard {board['id']} {board.get('state', '')}{url}")
    if wait and board.get("state") != "ready":
        raise click.exceptions.Exit(Exit.UNSUCCESSFUL)


@tensorboard.command("list")
@common_options
@pass_state
def tensorboard_list(state: State) -> None:
    """Your TensorBoards."""
    rows = state.client().paged("/tensorboards/", limit=1000)
    if state.json:
        emit_json(rows)
        return
    table(rows, generic_columns(rows, TENSORBOARD_COLUMNS), empty="No TensorBoards.")


@tensorboard.command("stop")
@click.argument("board_id", type=int)
@common_options
@pass_state
def tensorboard_stop(state: State, board_id: int) -> None:
    """Stop a TensorBoard."""
    state.client().request("DELETE", f"/tensorboards/{board_id}/")
    if state.json:
        emit_json({"id": board_id, "stopped": True})
    else:
        out.print(f"TensorBoard {board_id} stopped.")


@click.command()
@click.option("--tool", help="fio, nccl, p2p, resnet50...")
@click.option("--model")
@click.option("--precision")
@click.option("--gpus", type=click.IntRange(1))
@click.option("--gpu-type")
@click.option("--partition")
@click.option("--flagged/--not-flagged", default=None, help="Only results outside (inside) their reference.")
@click.option("--after", help="Run after (ISO 8601).")
@click.option("--before", help="Run before (ISO 8601).")
@click.option("--limit", type=click.IntRange(1), default=50, show_default=True)
@common_options
@pass_state
def benchmarks(state: State, limit: int, flagged: bool | None, **filters: Any) -> None:
    """Benchmark results, newest first."""
    params = {key: value for key, value in filters.items() if value is not None}
    if flagged is not None:
        params["flagged"] = str(flagged).lower()
    try:
        rows = state.client().paged("/benchmarks/", limit=limit, **params)
    except ApiError as error:
        if error.status == 404 and error.code in ("not_found", "not_api"):
            error.detail = "This portal has no benchmark history (GET /api/v1/benchmarks/ is missing)."
        raise
    if state.json:
        emit_json(rows)
        return
    table(rows, generic_columns(rows, BENCHMARK_COLUMNS), empty="No benchmark results.")
