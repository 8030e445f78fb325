"""GPU figures of a job or a notebook session (/api/v1/jobs/{id}/gpu/, /api/v1/sessions/{name}/gpu/):
the summary, then one line per GPU with its last sample and a sparkline of its recent minutes."""

from typing import Any

import click

from gpuportal_cli.context import State, common_options, pass_state
from gpuportal_cli.job_ids import JOB_ID, job_find
from gpuportal_cli.output import emit_json, err, out, table, when
from gpuportal_cli.sessions import complete_sessions

BLOCKS = "▁▂▃▄▅▆▇█"
SPARK_MINUTES = 30


def sparkline(values: list[float | None]) -> str:
    """Utilisation 0-100 % per minute as block characters; a blank where a minute has no figure."""
    return "".join(" " if v is None else BLOCKS[min(int(v / 100 * len(BLOCKS)), len(BLOCKS) - 1)]
                   for v in values)


def _number(value: float | None, unit: str, digits: int = 0) -> str:
    return "" if value is None else f"{value:.{digits}f}{unit}"


def _print(what: str, figures: dict[str, Any]) -> None:
    summary = figures["summary"]
    if not summary["samples"]:
        err.print(f"No GPU samples for {what} (yet): its sampler sends them while it runs on GPUs.",
                  markup=False)
        return
    out.print(f"{what}: utilisation mean {_number(summary['util_mean'], ' %', 1)}, "
              f"max {_number(summary['util_max'], ' %')} · "
              f"peak memory {_number(summary['mem_used_max_mib'], ' MiB')} · "
              f"energy {summary['energy_wh']:.2f} Wh · {summary['samples']} samples, "
              f"{when(summary['first_at'])} to {when(summary['last_at'])}", markup=False)
    series = {line["gpu"]: line["points"] for line in figures["series"]}
    rows = []
    for now in summary["current"]:
        points = series.get(now["gpu"], [])
        utils = [p["util"] for p in points if p["util"] is not None]
        rows.append({**now, "mean": sum(utils) / len(utils) if utils else None,
                     "spark": sparkline([p["util"] for p in points[-SPARK_MINUTES:]])})
    table(rows, [("GPU", lambda g: g["gpu"]), ("UTIL", lambda g: _number(g["util"], " %")),
                 ("MEM UTIL", lambda g: _number(g["mem_util"], " %")),
                 ("MEM USED", lambda g: _number(g["mem_used_mib"], " MiB")),
                 ("POWER", lambda g: _number(g["power_w"], " W", 1)), ("AS OF", lambda g: when(g["t"])),
                 ("MEAN", lambda g: _number(g["mean"], " %", 1)),
                 (f"LAST {SPARK_MINUTES} MIN", lambda g: g["spark"])], empty="No GPUs.")
    _print_idle(figures.get("idle"))


def _print_idle(idle: dict[str, Any] | None) -> None:
    """A warning, a flag or a reclaim (the Idle GPUs docs say what each means)."""
    if idle is None or idle["state"] == "ok":
        return
    minutes = idle["figures"].get("idle_minutes")
    since = f" for {minutes:.0f} min" if isinstance(minutes, int | float) else ""
    if idle["state"] == "warned":
        out.print(f"Idle GPUs{since}: stops at {when(idle['stop_at'])} unless used, or kept with "
                  "`gpuportal gpu keep NAME`.", markup=False)
    else:
        out.print(f"Idle GPUs{since}: {idle['state']} at {when(idle['flagged_at'] or idle['warned_at'])}.",
                  markup=False)


@click.group()
def gpu() -> None:
    """GPU figures of a job or a notebook session, as their GPU sampler pushed them (every 15 s)."""


@gpu.command("job")
@click.argument("job_id", type=JOB_ID)
@common_options
@pass_state
def gpu_job(state: State, job_id: str) -> None:
    """A job's GPUs: summary (mean and max utilisation, peak memory, energy) and each GPU's last
    sample with its recent minutes; --json: the 1-minute points too. JOB_ID: as for `job`."""
    client = state.client()
    number = job_find(client, job_id)["id"]
    figures = client.get(f"/jobs/{number}/gpu/")
    if state.json:
        emit_json(figures)
    else:
        _print(f"Job {number}", figures)


@gpu.command("session")
@click.argument("name", shell_complete=complete_sessions)
@common_options
@pass_state
def gpu_session(state: State, name: str) -> None:
    """A notebook session's GPUs (your newest session with that name), as for a job."""
    figures = state.client().get(f"/sessions/{name}/gpu/")
    if state.json:
        emit_json(figures)
    else:
        _print(f"Session {name}", figures)


@gpu.command("keep")
@click.argument("name", shell_complete=complete_sessions)
@common_options
@pass_state
def gpu_keep(state: State, name: str) -> None:
    """Keep it: a session warned for idle GPUs gets its idle window again (once per warning)."""
    answer = state.client().request("POST", f"/sessions/{name}/keep/")
    if state.json:
        emit_json(answer)
    else:
        out.print(f"Session {name} kept: its idle window starts again now.", markup=False)
