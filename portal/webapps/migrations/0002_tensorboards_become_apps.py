"""TensorBoards become apps of the `tensorboard` type (portal.tensorboards keeps only its API's shape).

Each TensorBoard row is copied as an App; an active one is ended, since its job runs without the
runner and the gateway cannot reach it (its Slurm job ends at its time limit). `apps_catalog_sync`
(run by scripts/up.sh and the deployment) writes the type's command and form.
"""

from django.db import migrations


def copy(apps, schema_editor) -> None:
    TensorBoard = apps.get_model("tensorboards", "TensorBoard")
    AppType = apps.get_model("webapps", "AppType")
    App = apps.get_model("webapps", "App")
    if not TensorBoard.objects.exists():
        return
    app_type, _ = AppType.objects.get_or_create(slug="tensorboard", defaults={
        "name": "TensorBoard", "command": "exit 1", "builtin": True})
    for board in TensorBoard.objects.all().iterator():
        ended = board.state == "ended"
        App.objects.create(
            uuid=board.uuid, user_id=board.user_id, type=app_type, parameters={"logdir": board.logdir},
            job_id=board.job_id, session_id=board.session_id, time_limit_minutes=8 * 60, idle_minutes=60,
            slurm_job_id=board.slurm_job_id, state="ended", host=board.host, port=board.port,
            reason=board.reason if ended else "Ended by the upgrade to web apps; open it again.",
            created_at=board.created_at, submitted_at=board.submitted_at, started_at=board.started_at,
            ready_at=board.ready_at, ended_at=board.ended_at or board.created_at, last_access=board.last_access)


class Migration(migrations.Migration):
    dependencies = [
        ("webapps", "0001_initial"),
        ("tensorboards", "0002_tensorboard_submit_engine"),
    ]

    operations = [migrations.RunPython(copy, migrations.RunPython.noop)]
