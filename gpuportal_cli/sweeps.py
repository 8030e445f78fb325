"""`gpuportal sweep`: start a sweep (one Slurm job array, /api/v1/sweeps/), list them, show one's
progress, runs and best run, and cancel the rest."""

import json
from pathlib import Path
from typing import Any

import click
from rich.markup import escape

from gpuportal_cli.context import State, cluster_option, common_options, pass_state
from gpuportal_cli.jobs import parameters_of
from gpuportal_cli.output import emit_json, out, table, when


def _value(text: str) -> int | float | str:
    """A varied value as JSON has it: 32 stays a number, 1e-3 too, anything else is text."""
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            continue
    return text


def space_of(pairs: tuple[str, ...]) -> dict[str, Any]:
    """--vary lr=0.001,0.01 (a list) or --vary lr=1e-4:1e-1 (a range; :log for a log scale)."""
    space: dict[str, Any] = {}
    for pair in pairs:
        name, sep, raw = pair.partition("=")
        if not sep or not name or not raw:
            raise click.BadParameter(f"{pair!r} is not NAME=V1,V2,... or NAME=MIN:MAX[:log]",
                                     param_hint="--vary")
        parts = raw.split(":")
        if len(parts) in (2, 3) and "," not in raw and (len(parts) == 2 or parts[2] == "log"):
            space[name] = {"min": _value(parts[0]), "max": _value(parts[1]), "log": len(parts) == 3}
        else:
            space[name] = [_value(item) for item in raw.split(",")]
    return space


@click.group()
def sweep() -> None:
    """Hyperparameter sweeps: one template, many values of your script's options, one Slurm job array."""


@sweep.command("start")
@click.argument("template")
@click.option("--vary", "pairs", multiple=True, metavar="NAME=V1,V2|MIN:MAX[:log]",
              help="An option of your script to vary, passed as --NAME VALUE (repeatable).")
@click.option("--list", "listed", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="A JSON file with the tasks instead: [{\"lr\": 0.1}, ...].")
@click.option("--random", "samples", type=click.IntRange(1), help="Draw this many tasks instead of the grid.")
@click.option("--seed", type=int, help="With --random: the seed.")
@click.option("--param", "-p", "params", multiple=True, metavar="KEY=VALUE",
              help="A template parameter, the same for every task (repeatable).")
@click.option("--concurrency", "-k", type=click.IntRange(1), required=True, help="Tasks running at once.")
@click.option("--objective", required=True, help="The metric to optimise, as the script logs it.")
@click.option("--direction", type=click.Choice(["min", "max"]), required=True)
@click.option("--name", help="A name for the sweep.")
@cluster_option
@common_options
@pass_state
def sweep_start(state: State, template: str, pairs: tuple[str, ...], listed: Path | None, samples: int | None,
                seed: int | None, params: tuple[str, ...], concurrency: int, objective: str, direction: str,
                name: str | None) -> None:
    """Start a sweep of TEMPLATE: a grid of every --vary combination, --random N draws, or --list."""
    client = state.client()
    catalog = client.get("/templates/")
    found = next((t for t in catalog["templates"] if t["slug"] == template), None)
    properties = found["parameters_schema"].get("properties", {}) if found else {}
    body: dict[str, Any] = {
        "template": template, "concurrency": concurrency, "objective": objective, "direction": direction,
        "parameters": parameters_of(params, properties)}
    if listed is not None:
        body.update(method="list", space=json.loads(listed.read_text(encoding="utf-8")))
    elif samples is not None:
        body.update(method="random", space=space_of(pairs), samples=samples, seed=seed)
    else:
        body.update(method="grid", space=space_of(pairs))
    if name:
        body["name"] = name
    if cluster := state.cluster():
        body["cluster"] = cluster
    created = client.request("POST", "/sweeps/", json=body)
    if state.json:
        emit_json(created)
        return
    made = created["sweep"]
    out.print(f"Started sweep {made['id']} ({escape(made['name'])}): {made['task_count']} tasks, at most "
              f"{made['concurrency']} at once, as one Slurm job array — follow it with "
              f"`gpuportal sweep show {made['id']}`")


@sweep.command("list")
@common_options
@pass_state
def sweep_list(state: State) -> None:
    """Your sweeps, newest first."""
    rows = state.client().paged("/sweeps/", limit=100)
    if state.json:
        emit_json(rows)
        return
    table(rows, [("ID", lambda s: s["id"]), ("NAME", lambda s: s["name"]),
                 ("TEMPLATE", lambda s: s["template"]),
                 ("TASKS", lambda s: s["task_count"]), ("STATE", lambda s: s["state"]),
                 ("OBJECTIVE", lambda s: f"{s['direction']} {s['objective']}"),
                 ("STARTED", lambda s: when(s["created_at"]))], empty="No sweeps yet.")


@sweep.command("show")
@click.argument("sweep_id", type=int)
@common_options
@pass_state
def sweep_show(state: State, sweep_id: int) -> None:
    """A sweep's progress, each task's values and final objective, and the best run (marked *)."""
    body = state.client().get(f"/sweeps/{sweep_id}/")
    if state.json:
        emit_json(body)
        return
    found, objective = body["sweep"], body["sweep"]["objective"]
    progress = " · ".join(f"{count} {key}" for key, count in body["progress"].items())
    array = found["slurm_job_id"] or "-"
    out.print(f"Sweep {found['id']} ({found['name']}), job {found['job_id']}, Slurm job {array}: {progress}",
              markup=False)
    table(body["tasks"], [("TASK", lambda t: f"{t['index']}{' *' if t['best'] else ''}"),
                          ("STATE", lambda t: t["state"]),
                          ("VALUES", lambda t: " ".join(f"{k}={v}" for k, v in t["values"].items())),
                          (objective.upper(), lambda t: "" if t["metrics"].get(objective) is None
                           else f"{t['metrics'][objective]:.4g}")], empty="No tasks.")


@sweep.command("cancel")
@click.argument("sweep_id", type=int)
@common_options
@pass_state
def sweep_cancel(state: State, sweep_id: int) -> None:
    """Cancel the rest of a sweep: its running tasks stop, the waiting ones never start."""
    body = state.client().request("POST", f"/sweeps/{sweep_id}/cancel/")
    if state.json:
        emit_json(body)
    else:
        out.print(f"Cancelling the rest of sweep {sweep_id}.")
