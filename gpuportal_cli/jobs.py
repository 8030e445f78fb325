"""Batch jobs: templates, submit (--wait), jobs, job, logs (--follow), cancel."""

import json
import re
import sys
import time
from pathlib import Path
from typing import Any

import click
from rich.markup import escape
from rich.text import Text

from gpuportal_cli.client import ApiError, Client, Exit
from gpuportal_cli.config import ConfigError
from gpuportal_cli.context import State, cluster_option, common_options, pass_state, wait_until
from gpuportal_cli.job_ids import JOB_ID, job_find
from gpuportal_cli.output import duration, emit_json, err, fields, out, state_text, table, when
from gpuportal_cli.waiting import waiting_show

# States a job can still leave (the portal's ACTIVE_STATES); anything else is its final state.
ACTIVE_STATES = ("QUEUED_IN_PORTAL", "PENDING", "RUNNING", "SUSPENDED")
STATES = (*ACTIVE_STATES, "COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "OUT_OF_MEMORY", "NODE_FAIL",
          "PREEMPTED", "BOOT_FAIL", "DEADLINE", "REJECTED")
_TRUE, _FALSE = {"true", "yes", "on", "1"}, {"false", "no", "off", "0"}


def complete_templates(ctx: click.Context, _param: click.Parameter, incomplete: str) -> list[str]:
    """Shell completion of template slugs, asked of the portal (quietly nothing on any failure)."""
    try:
        catalog = ctx.ensure_object(State).client().get("/templates/")
    except (ApiError, ConfigError, OSError):
        return []
    return [t["slug"] for t in catalog.get("templates", []) if t["slug"].startswith(incomplete)]


def _coerce(value: str, schema: dict[str, Any]) -> Any:
    """A --param value typed as the template's JSON Schema says; what does not parse is sent as
    text, so the portal's own message names the field."""
    kind = schema.get("type")
    try:
        if kind == "integer":
            return int(value)
        if kind == "number":
            return float(value)
    except ValueError:
        return value
    if kind == "boolean" and value.lower() in _TRUE | _FALSE:
        return value.lower() in _TRUE
    if kind == "array":  # paths (`inputs`): comma-separated, or one a line (@FILE)
        return [item.strip() for item in re.split(r"[,\n]", value) if item.strip()]
    return value


def _read_value(raw: str) -> str:
    """`@path` reads the value from a file, `@-` from stdin (scripts for the custom template)."""
    if not raw.startswith("@"):
        return raw
    if raw == "@-":
        return sys.stdin.read()
    try:
        return Path(raw[1:]).expanduser().read_text(encoding="utf-8")
    except OSError as error:
        raise click.BadParameter(f"cannot read {raw[1:]}: {error.strerror}", param_hint="--param") from None


def parameters_of(pairs: tuple[str, ...], properties: dict[str, Any]) -> dict[str, Any]:
    parameters: dict[str, Any] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"{pair!r} is not KEY=VALUE", param_hint="--param")
        parameters[key] = _coerce(_read_value(raw), properties.get(key, {}))
    return parameters


def on_cluster(chosen: str, work: dict[str, Any]) -> str:
    """Where the user chose a cluster, the words saying where the work went; nothing otherwise (a
    one-cluster site prints what it always did)."""
    return f" on {work['cluster']}" if chosen and work.get("cluster") else ""


def job_line(job: dict[str, Any]) -> str:
    where = f" on {job['node_list']}" if job.get("node_list") else ""
    reason = f" ({job['reason']})" if job.get("reason") else ""
    return f"job {job['id']} [bold]{job['state']}[/]{escape(reason)}{escape(where)}"


def job_wait(client: Client, job_id: int, *, interval: float, quiet: bool) -> dict[str, Any]:
    return wait_until(lambda: client.get(f"/jobs/{job_id}/"), lambda j: j["state"] not in ACTIVE_STATES,
                      job_line, interval=interval, quiet=quiet, what=f"job {job_id}")


def _job_result(job: dict[str, Any], state: State) -> None:
    """Final state of a waited-for job; the exit code says whether it succeeded."""
    if state.json:
        emit_json(job)
    else:
        code = "" if job.get("exit_code") is None else f", exit code {job['exit_code']}"
        elapsed = f", {duration(job['elapsed_seconds'])}" if job.get("elapsed_seconds") is not None else ""
        why = f": {job['reason']}" if job.get("reason") and job["state"] != "COMPLETED" else ""
        err.print(f"job {job['id']} ", state_text(job["state"]), Text(f"{code}{elapsed}{why}"), sep="")
    if job["state"] != "COMPLETED":
        raise click.exceptions.Exit(Exit.UNSUCCESSFUL)


@click.command()
@click.argument("slug", required=False, shell_complete=complete_templates)
@common_options
@pass_state
def templates(state: State, slug: str | None) -> None:
    """Job templates; with SLUG, that template's parameters."""
    catalog = state.client().get("/templates/")
    if slug is None:
        if state.json:
            emit_json(catalog)
            return
        table(catalog["templates"], [("SLUG", lambda t: t["slug"]), ("NAME", lambda t: t["name"]),
                                     ("SMOKE", lambda t: t.get("smoke_parameter")),
                                     ("DESCRIPTION", lambda t: t["description"])],
              empty="No templates.")
        return
    found = next((t for t in catalog["templates"] if t["slug"] == slug), None)
    if found is None:
        raise ApiError(f"No template {slug!r}.", exit_code=Exit.NOT_FOUND, code="not_found")
    if state.json:
        emit_json(found)
        return
    out.print(f"[bold]{escape(found['name'])}[/] ({escape(slug)}): {escape(found['description'])}")
    properties = found["parameters_schema"].get("properties", {})
    table([{"name": name, **spec} for name, spec in properties.items()], [
        ("PARAMETER", lambda p: p["name"]), ("TYPE", lambda p: p.get("type")),
        ("DEFAULT", lambda p: p.get("default")),
        ("ALLOWED", lambda p: p.get("enum") or (
            f"{p['minimum']}..{p['maximum']}" if "minimum" in p and "maximum" in p else "")),
        ("HELP", lambda p: p.get("description") or p.get("title")),
    ], empty="No parameters.")


@click.command()
@click.argument("template", required=False, shell_complete=complete_templates)
@click.option("--param", "-p", "pairs", multiple=True, metavar="KEY=VALUE",
              help="A template parameter (repeatable); VALUE @FILE reads a file, @- stdin.")
@click.option("--gpus", type=click.IntRange(0), help="Shortcut for the template's GPU parameter.")
@click.option("--partition", help="Shortcut for --param partition=...")
@click.option("--time", "time_limit", type=click.IntRange(1), metavar="MINUTES",
              help="Shortcut for --param time_limit=...")
@click.option("--name", help="A name for the job (default: the template's).")
@click.option("--account", help="Submit under this project's Slurm account (see `gpuportal projects`).")
@click.option("--wait", is_flag=True, help="Wait for the job to end; the exit code says how it ended.")
@click.option("--batch", "batch_file", type=click.File("r", encoding="utf-8"), metavar="FILE.json",
              help="Submit a JSON list of up to 100 job objects (as the API takes them) in one request, "
                   "instead of TEMPLATE; - reads stdin.")
@click.option("--interval", type=click.FloatRange(0.2), default=2.0, show_default=True,
              help="Seconds between checks while waiting.")
@cluster_option
@common_options
@pass_state
def submit(state: State, template: str | None, pairs: tuple[str, ...], gpus: int | None,
           partition: str | None, time_limit: int | None, name: str | None, account: str | None, wait: bool,
           batch_file: Any, interval: float) -> None:
    """Submit a job from TEMPLATE (see `gpuportal templates TEMPLATE` for its parameters), or with
    --batch a list of jobs in one request. --cluster: the cluster it runs on (with --batch: of each job
    that names none).

    The request carries an Idempotency-Key and is retried with it, so a network failure never
    submits twice."""
    if batch_file is not None:
        options = (gpus, partition, time_limit, name, account)
        if template or pairs or wait or any(option is not None for option in options):
            raise click.UsageError("--batch takes the jobs from its file: no TEMPLATE or other options.")
        _submit_batch(state, batch_file)
        return
    if template is None:
        raise click.UsageError("Missing argument 'TEMPLATE' (or --batch FILE.json).")
    client = state.client()
    catalog = client.get("/templates/")
    found = next((t for t in catalog["templates"] if t["slug"] == template), None)
    properties = found["parameters_schema"].get("properties", {}) if found else {}
    parameters = parameters_of(pairs, properties)
    if gpus is not None:
        parameters["gpus_per_node" if "gpus_per_node" in properties else "gpus"] = gpus
    if partition is not None:
        parameters["partition"] = partition
    if time_limit is not None:
        parameters["time_limit"] = time_limit
    body: dict[str, Any] = {"template": template, "parameters": parameters}
    if name:
        body["name"] = name
    if account:
        body["account"] = account
    if cluster := state.cluster():
        body["cluster"] = cluster
    job = client.request("POST", "/jobs/", json=body, idempotent_create=True)
    submitted = f"Submitted job {job['id']} ({escape(job['name'])}){escape(on_cluster(cluster, job))}"
    if not wait:
        if state.json:
            emit_json(job)
        else:
            out.print(f"{submitted}: ", state_text(job["state"]),
                      f" — follow it with `gpuportal logs {job['id']} --follow`", sep="")
        return
    if not state.json:
        err.print(f"{submitted}; waiting for it to end.")
    _job_result(job_wait(client, job["id"], interval=interval, quiet=state.json), state)


def _submit_batch(state: State, batch_file: Any) -> None:
    """One result per job, in the file's order; exit code 4 when the portal refused any of them (the
    others are submitted all the same)."""
    try:
        jobs = json.load(batch_file)
    except ValueError as error:
        raise click.BadParameter(f"not JSON: {error}", param_hint="--batch") from None
    if not isinstance(jobs, list):
        raise click.BadParameter("a JSON list of job objects", param_hint="--batch")
    if cluster := state.cluster():  # the jobs that name no cluster of their own
        jobs = [{"cluster": cluster, **item} if isinstance(item, dict) else item for item in jobs]
    answer = state.client().request("POST", "/jobs/", json=jobs, idempotent_create=True)
    if state.json:
        emit_json(answer)
    else:
        table(answer["results"], [
            ("#", lambda r: r["index"]), ("STATUS", lambda r: r["status"]),
            ("JOB", lambda r: r["job"]["id"] if "job" in r else ""),
            ("STATE", lambda r: r["job"]["state"] if "job" in r else "refused"),
            ("DETAIL", lambda r: json.dumps(r["errors"]["fields"] or r["errors"]["detail"])
             if "errors" in r else r["job"]["name"]),
        ], empty="No jobs.")
        err.print(f"{answer['submitted']} submitted, {answer['refused']} refused.")
    if answer["refused"]:
        raise click.exceptions.Exit(Exit.INVALID)


@click.command()
@common_options
@pass_state
def projects(state: State) -> None:
    """Your projects: the account to submit under and the GPU-hour budget, used and left."""
    rows = state.client().get("/projects/")
    if state.json:
        emit_json(rows)
        return
    table(rows, [
        ("PROJECT", lambda p: p["name"]), ("ACCOUNT", lambda p: p["account"]),
        ("BUDGET GPU-H", lambda p: "none" if p["limit_gpu_hours"] is None else _hours(p["limit_gpu_hours"])),
        ("USED", lambda p: _hours(p["used_gpu_hours"])), ("LEFT", lambda p: _hours(p["left_gpu_hours"])),
        ("RUNS OUT", lambda p: p["run_out"] or "—"),
        ("NOTE", lambda p: {"warning": "80 % used", "exhausted": "used up"}.get(p["level"], "")),
    ], empty="You are in no project: submit under your default account.")


def _hours(value: float | None) -> str:
    return "—" if value is None else f"{value:g}"


@click.command()
@click.option("--state", "job_state", type=click.Choice(STATES, case_sensitive=False),
              help="Only jobs in this state.")
@click.option("--template", help="Only jobs from this template.")
@click.option("--user", help="Admins: only this user's jobs.")
@click.option("--after", help="Submitted after (ISO 8601, e.g. 2026-11-01 or 2026-11-01T08:00Z).")
@click.option("--before", help="Submitted before (ISO 8601).")
@click.option("--limit", type=click.IntRange(1), default=50, show_default=True, help="At most this many.")
@common_options
@pass_state
def jobs(state: State, job_state: str | None, template: str | None, user: str | None, after: str | None,
         before: str | None, limit: int) -> None:
    """Your jobs, newest first (admins: everybody's)."""
    rows = state.client().paged("/jobs/", limit=limit, page_size=min(limit, 200),
                                state=job_state.upper() if job_state else None, template=template,
                                user=user, submitted_after=after, submitted_before=before)
    if state.json:
        emit_json(rows)
        return
    users = {row["user"] for row in rows}
    clusters = {row.get("cluster") for row in rows}
    columns = [("ID", lambda j: j["id"]), ("NAME", lambda j: j["name"]),
               ("TEMPLATE", lambda j: j["template"]), ("STATE", lambda j: state_text(j["state"])),
               ("PARTITION", lambda j: j["partition"]), ("GPUS", lambda j: j["nodes"] * j["gpus_per_node"]),
               ("SUBMITTED", lambda j: when(j["submitted_at"])),
               ("ELAPSED", lambda j: duration(j.get("elapsed_seconds"))),
               ("EXIT", lambda j: j.get("exit_code"))]
    if len(clusters) > 1:  # jobs on several clusters (ids are per cluster): say which is where
        columns.insert(4, ("CLUSTER", lambda j: j["cluster"]))
    if len(users) > 1 or user:
        columns.insert(1, ("USER", lambda j: j["user"]))
    table(rows, columns, empty="No jobs.")


@click.command()
@click.argument("job_id", type=JOB_ID)
@click.option("--script", is_flag=True, help="Print only the batch script that was submitted.")
@common_options
@pass_state
def job(state: State, job_id: str, script: bool) -> None:
    """One job: state, resources, timings, parameters. JOB_ID is its number, or its Slurm job id (496,
    496_3 for a sweep's task) or Portal ID."""
    detail = job_find(state.client(), job_id)
    if state.json:
        emit_json(detail)
        return
    if script:
        sys.stdout.write(detail["script"])
        return
    detail = {**detail, "gpus": f"{detail['nodes']} node(s) x {detail['gpus_per_node']}",
              "elapsed": duration(detail.get("elapsed_seconds")), "submitted": when(detail["submitted_at"]),
              "started": when(detail.get("started_at")), "ended": when(detail.get("ended_at"))}
    fields(detail, [("Job", "id"), ("Slurm job", "slurm_job_id"), ("Portal ID", "uuid"), ("Name", "name"),
                    ("Template", "template"), ("User", "user"), ("State", "state"), ("Reason", "reason"),
                    ("Exit code", "exit_code"), ("Signal", "exit_signal"), ("Cluster", "cluster"),
                    ("Partition", "partition"),
                    ("GPUs", "gpus"), ("Time limit (min)", "time_limit_minutes"), ("Nodes", "node_list"),
                    ("Submitted", "submitted"), ("Started", "started"), ("Ended", "ended"),
                    ("Elapsed", "elapsed"), ("GPU-hours", "gpu_hours"), ("Parameters", "parameters"),
                    ("Stdout", "stdout_path"), ("Stderr", "stderr_path")])
    waiting_show(detail.get("waiting"))


@click.command()
@click.argument("job_id", type=JOB_ID)
@click.option("--stream", type=click.Choice(["stdout", "stderr"]), default="stdout", show_default=True)
@click.option("--follow", "-f", is_flag=True, help="Keep printing new output until the job ends.")
@click.option("--interval", type=click.FloatRange(0.2), default=1.0, show_default=True,
              help="Seconds between checks while following.")
@common_options
@pass_state
def logs(state: State, job_id: str, stream: str, follow: bool, interval: float) -> None:
    """A job's output (stdout, or stderr with --stream stderr). JOB_ID: as for `job`."""
    client = state.client()
    number = job_find(client, job_id)["id"]
    offset, text, chunk = 0, [], {}
    try:
        while True:
            chunk = client.get(f"/jobs/{number}/log/", stream=stream, offset=offset)
            if state.json:
                text.append(chunk["text"])
            else:
                sys.stdout.write(chunk["text"])
                sys.stdout.flush()
            offset = chunk["next_offset"]
            if chunk["complete"]:
                break
            if offset < chunk["size"]:
                continue  # more is there already (a chunk is at most 64 KiB)
            if not follow:
                break
            time.sleep(interval)
    except KeyboardInterrupt:
        raise click.exceptions.Exit(Exit.INTERRUPTED) from None
    if state.json:
        emit_json({**chunk, "job": number, "text": "".join(text), "offset": 0})


@click.command()
@click.argument("job_id", type=JOB_ID)
@click.option("--wait", is_flag=True, help="Wait until the job has ended.")
@click.option("--interval", type=click.FloatRange(0.2), default=2.0, show_default=True)
@common_options
@pass_state
def cancel(state: State, job_id: str, wait: bool, interval: float) -> None:
    """Cancel a job (scancel as you); its state follows at the portal's next poll. JOB_ID: as for `job`."""
    client = state.client()
    number = job_find(client, job_id)["id"]
    detail = client.request("POST", f"/jobs/{number}/cancel/")
    if wait:
        detail = job_wait(client, number, interval=interval, quiet=state.json)
    if state.json:
        emit_json(detail)
    elif wait:
        out.print(f"job {number} ", state_text(detail["state"]), sep="")
    else:
        out.print(f"Cancel requested for job {number} (now {detail['state']}).")


@click.command()
@click.argument("job_id", type=JOB_ID)
@click.option("--run-anyway", is_flag=True,
              help="Re-run even though inputs changed or went missing since the run (they are named).")
@click.option("--wait", is_flag=True, help="Wait until the new job has ended.")
@click.option("--interval", type=click.FloatRange(0.2), default=2.0, show_default=True)
@common_options
@pass_state
def rerun(state: State, job_id: str, run_anyway: bool, wait: bool, interval: float) -> None:
    """Re-run a job exactly, from its provenance: the same parameters and resources, image by digest,
    environment by its lock, code at its commit with its uncommitted diff. The inputs are checked
    first: a changed or missing one is named and nothing is submitted, unless --run-anyway.
    JOB_ID: as for `job`."""
    client = state.client()
    number = job_find(client, job_id)["id"]
    detail = client.request("POST", f"/jobs/{number}/rerun/", json={"run_anyway": run_anyway})
    if wait:
        detail = job_wait(client, detail["id"], interval=interval, quiet=state.json)
    if state.json:
        emit_json(detail)
    elif wait:
        out.print(f"job {detail['id']} (a re-run of {number}) ", state_text(detail["state"]), sep="")
    else:
        out.print(f"Submitted job {detail['id']}, a re-run of job {number} ({detail['state']}).")
