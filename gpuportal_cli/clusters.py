"""`gpuportal clusters`: the clusters the portal fronts (GET /api/v1/cluster/), by the name that
--cluster takes, with their GPUs and jobs."""

import click

from gpuportal_cli.client import ApiError, Exit
from gpuportal_cli.context import State, common_options, pass_state
from gpuportal_cli.output import emit_json, state_text, table


@click.command()
@common_options
@pass_state
def clusters(state: State) -> None:
    """The portal's clusters, the default one first: NAME is what --cluster takes."""
    listed = state.client().get("/cluster/").get("clusters")
    if listed is None:
        raise ApiError("This portal lists no clusters (an older version?): it has one.",
                       exit_code=Exit.NOT_FOUND, code="not_found")
    if state.json:
        emit_json(listed)
        return
    table([{**row, "default": index == 0} for index, row in enumerate(listed)], [
        ("NAME", lambda c: c["name"]),
        ("TITLE", lambda c: c["title"]), ("DEFAULT", lambda c: "yes" if c["default"] else ""),
        ("NODES", lambda c: c["figures"]["nodes"]),
        ("GPUS FREE", lambda c: f"{c['figures']['gpus_free']}/{c['figures']['gpus_total']}"),
        ("RUNNING", lambda c: c["figures"]["running_jobs"]),
        ("PENDING", lambda c: c["figures"]["pending_jobs"]),
        ("STATUS", lambda c: state_text("stale") if c["stale"] else "up to date"),
    ], empty="No clusters.")
