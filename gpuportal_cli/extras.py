"""TensorBoard instances and benchmark history (/api/v1/tensorboards/, /api/v1/benchmarks/)."""

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import click
from rich.markup import escape
from rich.text import Text

from gpuportal_cli.client import ApiError, Exit
from gpuportal_cli.context import State, common_options, pass_state, wait_until
from gpuportal_cli.job_ids import JOB_ID, job_find
from gpuportal_cli.output import emit_json, out, state_text, table, when

TENSORBOARD_SETTLED = ("ready", "ended")


@contextmanager
def _endpoint(path: str) -> Iterator[None]:
    """A collection endpoint cannot be 'not found' unless this portal lacks it (an older version)."""
    try:
        yield
    except ApiError as problem:
        if problem.status == 404:
            problem.detail = f"This portal has no {path} API (an older version?)."
        raise


def _board_url(state: State, board: dict[str, Any]) -> dict[str, Any]:
    """The API gives the portal path TensorBoard is served under; people want the whole URL."""
    url = board.get("url") or ""
    return {**board, "url": f"{state.settings().url}{url}" if url.startswith("/") else url}


def _board_line(board: dict[str, Any]) -> str:
    reason = f": {escape(board['reason'])}" if board.get("reason") else ""
    return f"TensorBoard {board['id']} {board['state']}{reason}"


@click.group()
def tensorboard() -> None:
    """TensorBoard on a job's, a session's or a folder's event files, served through the portal."""


@tensorboard.command("start")
@click.option("--logdir", help="A folder of yours (or under the shared data mount).")
@click.option("--job", "job_id", type=JOB_ID, help="The log folder of this job (any of its ids).")
@click.option("--session", "session_name", help="The log folder of this session.")
@click.option("--wait", is_flag=True, help="Wait until it is ready, then print its URL.")
@click.option("--interval", type=click.FloatRange(0.2), default=2.0, show_default=True)
@common_options
@pass_state
def tensorboard_start(state: State, logdir: str | None, job_id: str | None, session_name: str | None,
                      wait: bool, interval: float) -> None:
    """Start TensorBoard (a small CPU Slurm job as you); give exactly one of the three sources."""
    given = {key: value for key, value in
             {"logdir": logdir, "job": job_id, "session": session_name}.items() if value is not None}
    if len(given) != 1:
        raise click.UsageError("Give exactly one of --logdir, --job, --session.")
    client = state.client()
    if job_id is not None:
        given["job"] = job_find(client, job_id)["id"]
    with _endpoint("/api/v1/tensorboards/"):
        board = client.request("POST", "/tensorboards/", json=given)  # one per folder: a retry gets it back
    if wait:
        board = wait_until(lambda: client.get(f"/tensorboards/{board['id']}/"),
                           lambda b: b["state"] in TENSORBOARD_SETTLED, _board_line,
                           interval=interval, quiet=state.json, what=f"TensorBoard {board['id']}")
    board = _board_url(state, board)
    if state.json:
        emit_json(board)
    elif board["state"] == "ready":
        out.print(f"TensorBoard {board['id']} is ready: {board['url']}", markup=False)
    else:
        out.print(_board_line(board))
    if wait and board["state"] != "ready":
        raise click.exceptions.Exit(Exit.UNSUCCESSFUL)


@tensorboard.command("list")
@common_options
@pass_state
def tensorboard_list(state: State) -> None:
    """Your TensorBoards."""
    with _endpoint("/api/v1/tensorboards/"):
        rows = [_board_url(state, board) for board in state.client().get("/tensorboards/")]
    if state.json:
        emit_json(rows)
        return
    table(rows, [("ID", lambda b: b["id"]), ("STATE", lambda b: state_text(b["state"])),
                 ("LOGDIR", lambda b: b["logdir"]), ("JOB", lambda b: b.get("job")),
                 ("SESSION", lambda b: b.get("session")), ("REASON", lambda b: b.get("reason")),
                 ("URL", lambda b: b["url"] if b["state"] == "ready" else "")],
          empty="No TensorBoards; start one with `gpuportal tensorboard start`.")


@tensorboard.command("stop")
@click.argument("board_id", type=int)
@common_options
@pass_state
def tensorboard_stop(state: State, board_id: int) -> None:
    """Stop a TensorBoard."""
    board = _board_url(state, state.client().request("DELETE", f"/tensorboards/{board_id}/"))
    if state.json:
        emit_json(board)
    else:
        out.print(_board_line(board))


@click.command()
@click.option("--tool", help="fio, nccl, p2p, resnet50...")
@click.option("--model")
@click.option("--precision")
@click.option("--gpus", type=click.IntRange(0))
@click.option("--gpu-type")
@click.option("--partition")
@click.option("--user", help="Only this user's runs.")
@click.option("--flagged/--not-flagged", default=None, help="Only results outside (inside) their reference.")
@click.option("--after", "run_after", help="Run at or after (ISO 8601).")
@click.option("--before", "run_before", help="Run before (ISO 8601).")
@click.option("--limit", type=click.IntRange(1), default=50, show_default=True)
@common_options
@pass_state
def benchmarks(state: State, limit: int, flagged: bool | None, **filters: Any) -> None:
    """Benchmark results of this site, newest first."""
    params = {key: value for key, value in filters.items() if value is not None}
    if flagged is not None:
        params["flagged"] = str(flagged).lower()
    with _endpoint("/api/v1/benchmarks/"):
        rows = state.client().paged("/benchmarks/", limit=limit, page_size=min(limit, 200), **params)
    if state.json:
        emit_json(rows)
        return
    table(rows, [("ID", lambda r: r["id"]), ("TOOL", lambda r: r["tool"]), ("CASE", lambda r: r.get("case")),
                 ("MODEL", lambda r: r.get("model")), ("PRECISION", lambda r: r.get("precision")),
                 ("GPUS", lambda r: r.get("gpus")), ("GPU TYPE", lambda r: r.get("gpu_type")),
                 ("PARTITION", lambda r: r.get("partition")), ("METRIC", lambda r: r.get("metric")),
                 ("VALUE", lambda r: _value(r)), ("RUN", lambda r: when(r.get("run_at"))),
                 ("JOB", lambda r: r.get("job"))],
          empty="No benchmark results.")


def _value(result: dict[str, Any]) -> str | Text:
    if not result.get("parsed"):
        return Text(f"unparsed: {result.get('reason', '')}", style="red")
    value = "" if result.get("value") is None else f"{result['value']:.4g} {result.get('unit', '')}"
    return Text(f"{value} (flagged: {result.get('flag_reason', '')})", style="red") if result.get(
        "flagged") else value
