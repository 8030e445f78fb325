"""The app types the portal ships, and the rules every type's form and command follow.

A type's form is written as a job template's [parameters] (portal.jobs.job_templates), so a field
means the same in both; its command is bash rendered like a job script (every value shell-quoted).
Admins add or change types in the admin; `manage.py apps_catalog_sync` writes the built-in ones.
"""

import shlex
from typing import Any

import jinja2
from django.conf import settings

from portal.core.errors import InvalidInput
from portal.core.paths import path_problem, user_roots
from portal.jobs.job_templates import (
    Parameter,
    ParameterInvalid,
    ShellWords,
    TemplateError,
    parameter_from_spec,
    shell_template,
)
from portal.webapps.models import AppType

# Each command ends the script: it runs under the runner, which gives it $PORT (inside the job's own
# network namespace) and lets only the gateway's connections through.
BUILTIN: tuple[dict[str, Any], ...] = (
    {
        "slug": "tensorboard", "name": "TensorBoard",
        "description": "TensorBoard on a folder of event files: a job's, a session's ~/logs or any of yours.",
        "command": ('exec {{ tools.tensorboard }} --logdir {{ params.logdir }} --host 127.0.0.1 '
                    '--port "$PORT"'),
        "form": {"logdir": {"type": "path", "label": "Log folder", "required": True, "max_length": 1024,
                            "help": "The folder TensorBoard reads, e.g. logs (your ~/logs)"}},
        "idle_minutes": 60,
    },
    {
        "slug": "vscode", "name": "VS Code",
        "description": "VS Code in the browser (code-server) on your home directory, with its terminal.",
        # No password of its own (--auth none): only the gateway, signing with the app's secret,
        # gets through.
        "command": ('exec {{ tools.code_server }} --auth none --disable-telemetry --disable-update-check '
                    '--disable-workspace-trust --ignore-last-opened --bind-addr "127.0.0.1:$PORT" '
                    '{{ params.folder or "." }}'),
        "form": {"folder": {"type": "path", "label": "Folder to open", "max_length": 1024,
                            "help": "Relative to your home; empty: your home"}},
        "idle_minutes": 120,
    },
    {
        "slug": "web-app", "name": "My web app",
        "description": ("Your own command serving HTTP on $PORT (at 127.0.0.1), e.g. Streamlit, Gradio, Dash "
                        "or an MLflow UI, reached only by you through the apps gateway."),
        "command": "cd {{ params.folder or '.' }}\nexec bash -c {{ params.command }}",
        "form": {
            "command": {"type": "text", "label": "Command", "required": True, "max_length": 4000,
                        "help": 'Bash that serves HTTP on 127.0.0.1:$PORT, e.g. streamlit run app.py '
                                '--server.address 127.0.0.1 --server.port "$PORT"'},
            "folder": {"type": "path", "label": "Working folder", "max_length": 1024,
                       "help": "Relative to your home; empty: your home"},
        },
        "idle_minutes": 60,
    },
)


def form_of(app_type: AppType) -> tuple[Parameter, ...]:
    """The type's form fields; raises TemplateError naming what an admin wrote wrong."""
    if not isinstance(app_type.form, dict):
        raise TemplateError("the form must be an object of fields")
    return tuple(parameter_from_spec(name, spec, f"app type {app_type.slug!r}")
                 for name, spec in app_type.form.items())


def parameters_clean(*, app_type: AppType, given: Any, username: str, home: str) -> dict[str, Any]:
    """The form's values from `given` (a JSON object), each checked; relative paths start at the home
    and every path must lie under the user's folders. Raises InvalidInput: {"parameters": {field:
    [why]}}, naming every field refused, unknown ones included."""
    if not isinstance(given, dict):
        raise InvalidInput({"parameters": ["Must be an object."]})
    try:
        form = form_of(app_type)
    except TemplateError as error:
        raise InvalidInput({"type": [f"This app type is misconfigured ({error}); tell an admin."]}) from None
    problems: dict[str, list[str]] = {}
    for unknown in sorted(set(given) - {p.name for p in form}):
        problems[str(unknown)[:64]] = [f"Unknown parameter for app type {app_type.slug!r}."]
    values: dict[str, Any] = {}
    roots = user_roots(home=home, username=username)
    for parameter in form:
        try:
            value = parameter.clean(given.get(parameter.name))
        except ParameterInvalid as error:
            problems[parameter.name] = [str(error)]
            continue
        if parameter.type == "path" and value:
            if problem := path_problem(value, roots=roots, relative=True):
                problems[parameter.name] = [problem]
                continue
            value = value if value.startswith("/") else f"{roots.home}/{value}"
        values[parameter.name] = value
    if problems:
        raise InvalidInput({"parameters": problems})
    return values


def command_render(*, app_type: AppType, values: dict[str, Any]) -> str:
    """The type's command with these (checked) values; raises TemplateError if it does not render."""
    tools = {"tensorboard": _words(settings.TENSORBOARD_COMMAND),
             "code_server": _words(settings.CODE_SERVER_COMMAND)}
    try:
        return shell_template(app_type.command).render(params=values, tools=tools)
    except jinja2.TemplateError as error:
        raise TemplateError(f"app type {app_type.slug!r}: its command does not render: {error}") from None


def _words(command: str) -> ShellWords:
    return ShellWords(" ".join(shlex.quote(word) for word in shlex.split(command)))


def catalog_sync() -> list[str]:
    """Write the built-in types (new ones created, changed ones updated); returns their slugs."""
    for spec in BUILTIN:
        AppType.objects.update_or_create(slug=spec["slug"], defaults={**spec, "builtin": True})
    return [spec["slug"] for spec in BUILTIN]
