"""Notebook servers (sessions), `open`, and the software environments they can use."""

import sys
import webbrowser
from typing import Any

import click
from rich.markup import escape

from gpuportal_cli.client import ApiError, Client, Exit
from gpuportal_cli.config import ConfigError
from gpuportal_cli.context import State, cluster_option, common_options, pass_state, wait_until
from gpuportal_cli.output import duration, emit_json, err, fields, out, state_text, table
from gpuportal_cli.waiting import waiting_show

SETTLED = ("ready", "ended")


def complete_sessions(ctx: click.Context, _param: click.Parameter, incomplete: str) -> list[str]:
    try:
        rows = ctx.ensure_object(State).client().get("/sessions/")
    except (ApiError, ConfigError, OSError):
        return []
    return [row["name"] for row in rows if row["name"].startswith(incomplete) and row["state"] != "ended"]


def _show(card: dict[str, Any]) -> None:
    card = {**card, "time_left": duration(card.get("time_left_seconds"))}
    fields(card, [("Session", "name"), ("State", "state"), ("Status", "status"), ("Cluster", "cluster"),
                  ("Partition", "partition"),
                  ("GPUs", "gpus"), ("Nodes", "nodes"), ("Hours", "hours"), ("Environment", "environment"),
                  ("Project", "account"), ("Slurm job", "job_id"), ("Node", "node"),
                  ("Time left", "time_left"), ("JupyterLab", "url"), ("Ended", "ended_at"),
                  ("End reason", "end_reason")])
    waiting_show(card.get("waiting"))


@click.command()
@click.option("--all", "show_all", is_flag=True, help="Also the sessions that have ended.")
@common_options
@pass_state
def sessions(state: State, show_all: bool) -> None:
    """Your notebook servers."""
    rows = state.client().get("/sessions/")
    if not show_all:
        rows = [row for row in rows if row["state"] != "ended"]
    if state.json:
        emit_json(rows)
        return
    table(rows, [("NAME", lambda s: s["name"]), ("STATE", lambda s: state_text(s["state"])),
                 ("STATUS", lambda s: s["status"]), ("PARTITION", lambda s: s["partition"]),
                 ("GPUS", lambda s: s["gpus"]), ("NODE", lambda s: s["node"]),
                 ("TIME LEFT", lambda s: duration(s.get("time_left_seconds"))), ("URL", lambda s: s["url"])],
          empty="No sessions; start one with `gpuportal session start`.")


@click.group()
def session() -> None:
    """Start, show or stop a notebook server."""


def _session_wait(client: Client, name: str, *, interval: float, quiet: bool) -> dict[str, Any]:
    return wait_until(lambda: client.get(f"/sessions/{name}/"), lambda s: s["state"] in SETTLED,
                      lambda s: f"session {escape(name)}: [bold]{escape(s['status'])}[/]",
                      interval=interval, quiet=quiet, what=f"session {name}")


@session.command("start")
@click.option("--name", default="my-server", show_default=True,
              help="1-30 lowercase letters, digits or hyphens.")
@click.option("--gpus", type=click.IntRange(0), help="GPUs (default 1).")
@click.option("--hours", type=click.FloatRange(0, min_open=True),
              help="Session length (default 8 h, at most the partition's limit).")
@click.option("--partition", help="Slurm partition (default: the cluster's default).")
@click.option("--nodes", type=click.IntRange(1), help="Nodes; the server runs on the first one.")
@click.option("--environment", help="A software environment (see `gpuportal environments`).")
@click.option("--account", help="Charge it to this project's Slurm account (see `gpuportal projects`).")
@click.option("--wait", is_flag=True, help="Wait until JupyterLab is ready (exit 1 if the session ends).")
@click.option("--interval", type=click.FloatRange(0.2), default=2.0, show_default=True)
@cluster_option
@common_options
@pass_state
def session_start(state: State, name: str, gpus: int | None, hours: float | None, partition: str | None,
                  nodes: int | None, environment: str | None, account: str | None, wait: bool,
                  interval: float) -> None:
    """Start a notebook server (sent with an Idempotency-Key: a retry starts it once)."""
    options = {"gpus": gpus, "hours": hours, "partition": partition, "nodes": nodes,
               "environment": environment, "account": account, "cluster": state.cluster() or None}
    body = {"name": name, **{key: value for key, value in options.items() if value is not None}}
    client = state.client()
    card = client.request("POST", "/sessions/", json=body, idempotent_create=True)
    if wait:
        card = _session_wait(client, name, interval=interval, quiet=state.json)
    if state.json:
        emit_json(card)
    elif card["state"] == "ready":
        out.print(f"Session {name} is ready: {card['url']}", markup=False)
    else:
        out.print(f"Session {name}: {card['status']} — `gpuportal open {name}` once ready.", markup=False)
    if wait and card["state"] != "ready":
        raise click.exceptions.Exit(Exit.UNSUCCESSFUL)


@session.command("show")
@click.argument("name", shell_complete=complete_sessions)
@common_options
@pass_state
def session_show(state: State, name: str) -> None:
    """One notebook server."""
    card = state.client().get(f"/sessions/{name}/")
    if state.json:
        emit_json(card)
    else:
        _show(card)


@session.command("stop")
@click.argument("name", shell_complete=complete_sessions)
@common_options
@pass_state
def session_stop(state: State, name: str) -> None:
    """Stop a notebook server (cancels its Slurm job)."""
    state.client().request("DELETE", f"/sessions/{name}/")
    if state.json:
        emit_json({"name": name, "stopped": True})
    else:
        out.print(f"Session {name} stopped.", markup=False)


@click.command("open")
@click.argument("name", required=False, shell_complete=complete_sessions)
@click.option("--browser", is_flag=True, help="Open it in your web browser too.")
@common_options
@pass_state
def open_(state: State, name: str | None, browser: bool) -> None:
    """Print the JupyterLab URL of a ready session (NAME may be left out when only one is ready)."""
    client = state.client()
    if name is None:
        ready = [row for row in client.get("/sessions/") if row["state"] == "ready"]
        if len(ready) != 1:
            names = ", ".join(row["name"] for row in ready) or "none"
            raise ApiError(f"Name the session to open (ready: {names}).", exit_code=Exit.USAGE,
                           code="which_session")
        card = ready[0]
    else:
        card = client.get(f"/sessions/{name}/")
    if card["state"] != "ready" or not card["url"]:
        raise ApiError(f"Session {card['name']} is not ready: {card['status']}.", exit_code=Exit.CONFLICT,
                       code="not_ready")
    if state.json:
        emit_json(card)
    else:
        sys.stdout.write(f"{card['url']}\n")  # whole, for `$(gpuportal open)`
    if browser and not webbrowser.open(card["url"]):
        err.print("No web browser could be started here; open the URL above yourself.")


@click.command()
@common_options
@pass_state
def environments(state: State) -> None:
    """Software environments for sessions and jobs, with their framework versions."""
    rows = state.client().get("/environments/")
    if state.json:
        emit_json(rows)
        return
    table(rows, [("NAME", lambda e: e["name"]), ("TITLE", lambda e: e["title"]),
                 ("KIND", lambda e: e["kind"]),
                 ("FRAMEWORKS", lambda e: ", ".join(f"{k} {v}" for k, v in e["frameworks"].items())),
                 ("KERNEL", lambda e: e.get("kernel")),
                 ("HEALTHY", lambda e: e["healthy"] if e["healthy"] else state_text("no"))],
          empty="No environments.")
