"""`gpuportal jobstats ID`: an ended job's (or session's) efficiency, laid out as Princeton's `jobstats`
prints it: the job, a bar per resource, then the notes (the portal's advice). From
/api/v1/jobs/{id}/efficiency/ and /api/v1/sessions/{name}/efficiency/."""

from typing import Any

import click

from gpuportal_cli.context import State, common_options, pass_state
from gpuportal_cli.job_ids import JOB_ID, job_find
from gpuportal_cli.output import emit_json, out, when

WIDTH = 80
BAR = 46  # inside the brackets, as jobstats draws them
MIB_PER_GIB = 1024


def meter(fraction: float | None, width: int = BAR) -> str:
    """`[|||||       25%]`: bars for the share, the percentage right-aligned inside."""
    if fraction is None:
        return f"[{'unknown'.rjust(width)}]"
    label = f"{round(fraction * 100)}%"
    bars = "|" * min(round(fraction * width), width - len(label) - 1)
    return f"[{bars}{label.rjust(width - len(bars))}]"


def clock(seconds: float | None) -> str:
    """Slurm's [D-]HH:MM:SS."""
    if seconds is None:
        return "unknown"
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    days, hours = divmod(hours, 24)
    text = f"{hours:02d}:{minutes:02d}:{secs:02d}"
    return f"{days}-{text}" if days else text


def _gigabytes(mib: float | None) -> str:
    return "unknown" if mib is None else f"{mib / MIB_PER_GIB:.1f}GB".replace(".0GB", "GB")


def _title(text: str) -> list[str]:
    return ["", text.center(WIDTH).rstrip(), "=" * WIDTH]


def jobstats_lines(stats: dict[str, Any]) -> list[str]:
    """What `gpuportal jobstats` prints for one /efficiency/ answer."""
    is_job = stats["kind"] == "job"
    header = [("Job ID", stats["slurm_job_id"] or "unknown"),
              ("Portal job" if is_job else "Session", stats["job"] if is_job else stats["session"]),
              ("User", stats["user"]), ("Job Name", stats["name"]), ("State", stats["state"] or "unknown"),
              ("Partition", stats["partition"]), ("Nodes", stats["nodes"]),
              ("CPU Cores", f"{stats['cpu']['allocated']:g}"),
              ("CPU Memory", _gigabytes(stats["memory"]["allocated"])),
              ("GPUs", f"{stats['gpu']['allocated']:g}"), ("End Time", when(stats["ended_at"])),
              ("Run Time", clock(stats["time"]["used"])), ("Time Limit", clock(stats["time"]["allocated"]))]
    lines = ["=" * WIDTH, "Slurm Job Statistics".center(WIDTH).rstrip(), "=" * WIDTH]
    lines += [f"{label:>15}: {value}" for label, value in header]
    lines += _title("Overall Utilization")
    rows = [("CPU utilization", stats["cpu"]), ("CPU memory usage", stats["memory"])]
    if stats["gpu"]["allocated"]:
        rows.append(("GPU utilization", stats["gpu"]))
    rows.append(("Time used", stats["time"]))
    lines += [f"  {label:<17}{meter(resource['efficiency'])}" for label, resource in rows]
    lines += _title("Notes")
    notes = [advice["text"] for advice in stats["advice"]] or ["It used what it asked for: no advice."]
    lines += [f"  * {note}" for note in notes]
    return lines


@click.command()
@click.argument("job_id", type=JOB_ID, required=False)
@click.option("--session", "session_name", metavar="NAME",
              help="A notebook session instead: your newest ended session with that name.")
@common_options
@pass_state
def jobstats(state: State, job_id: str | None, session_name: str | None) -> None:
    """What an ended job used of what it asked for, as Princeton's jobstats prints it: CPU, memory,
    GPU and time used against what was allocated, and notes with the values to ask for next time
    (--json: the API's object). JOB_ID: as for `job`."""
    if (job_id is None) == (session_name is None):
        raise click.UsageError("Give a JOB_ID or --session NAME.")
    client = state.client()
    if session_name is not None:
        stats = client.get(f"/sessions/{session_name}/efficiency/")
    else:
        stats = client.get(f"/jobs/{job_find(client, job_id)['id']}/efficiency/")
    if state.json:
        emit_json(stats)
        return
    for line in jobstats_lines(stats):
        out.print(line, markup=False)
