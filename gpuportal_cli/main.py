"""`gpuportal`: the command group, login/logout/whoami, and the one place errors become exit codes."""

import getpass
import socket
import sys
from urllib.parse import urlsplit

import click
from rich.markup import escape

from gpuportal_cli import __version__, config
from gpuportal_cli.client import EXIT_CODES_HELP, ApiError, Client, Exit
from gpuportal_cli.clusters import clusters
from gpuportal_cli.context import CLUSTER_HELP, State, common_options, pass_state
from gpuportal_cli.efficiency import jobstats
from gpuportal_cli.extras import benchmarks, tensorboard
from gpuportal_cli.gpus import gpu
from gpuportal_cli.jobs import cancel, job, jobs, logs, projects, rerun, submit, templates
from gpuportal_cli.output import emit_json, err, error, fields, out
from gpuportal_cli.sessions import environments, open_, session, sessions
from gpuportal_cli.sweeps import sweep

EPILOG = f"""{EXIT_CODES_HELP}

\b
Settings: --url or GPUPORTAL_URL, GPUPORTAL_TOKEN, and --cluster or GPUPORTAL_CLUSTER, override the
config file (`gpuportal login` writes $XDG_CONFIG_HOME/gpuportal/config.toml, mode 0600;
`gpuportal default-cluster NAME` adds a default cluster to it).
Shell completion (bash): eval "$(_GPUPORTAL_COMPLETE=bash_source gpuportal)"
(zsh: zsh_source, fish: fish_source)."""


class PortalGroup(click.Group):
    def invoke(self, ctx: click.Context) -> object:
        try:
            return super().invoke(ctx)
        except config.ConfigError as problem:
            failure = ApiError(str(problem), exit_code=Exit.USAGE, code="config")
        except ApiError as problem:
            failure = problem
        error(failure, as_json=ctx.ensure_object(State).json)
        ctx.exit(failure.exit_code)


@click.group(cls=PortalGroup, epilog=EPILOG, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--url", envvar=config.URL_ENV, metavar="URL",
              help="The portal, e.g. https://portal.example.org (default: from `gpuportal login`).")
@click.option("--cluster", metavar="NAME", help=CLUSTER_HELP)
@click.option("--json", "as_json", is_flag=True, help="Print the API's objects as JSON only (for scripts).")
@click.version_option(__version__, prog_name="gpuportal")
@click.pass_context
def app(ctx: click.Context, url: str | None, cluster: str | None, as_json: bool) -> None:
    """Command-line client of the gpuportal GPU cluster portal: batch jobs, notebook servers,
    TensorBoard and benchmarks, through the portal's REST API."""
    state = ctx.ensure_object(State)
    state.url_option = url
    state.cluster_option = cluster
    state.json = state.json or as_json


def _insecure(url: str) -> bool:
    parts = urlsplit(url)
    return parts.scheme == "http" and parts.hostname not in ("localhost", "127.0.0.1", "::1")


@app.command()
@click.option("--username", "-u", help="Your LDAP username (asked for when left out).")
@click.option("--password-stdin", is_flag=True, help="Read the password from stdin (for scripts).")
@click.option("--token-name", default=f"gpuportal-cli@{socket.gethostname()}", show_default=True,
              help="Name of the token, as your profile page lists it.")
@common_options
@pass_state
def login(state: State, username: str | None, password_stdin: bool, token_name: str) -> None:
    """Log in with your LDAP username and password: a personal API token is created and saved (with
    the portal URL) in your config file, readable only by you."""
    settings = state.settings()
    if not settings.url:
        raise click.UsageError(f"Which portal? Give --url URL (or set {config.URL_ENV}).")
    if _insecure(settings.url):
        err.print(f"[yellow]Warning: {escape(settings.url)} is plain HTTP: the password and token are not "
                  "encrypted.")
    username = username or click.prompt("Username", default=getpass.getuser(), err=True)
    if password_stdin:
        password = sys.stdin.readline().rstrip("\n")
    else:
        password = click.prompt("Password", hide_input=True, err=True)
    try:
        created = Client(settings.url).request("POST", "/tokens/", json={
            "username": username, "password": password, "name": token_name[:100]})
    except ApiError as problem:
        if problem.status == 403:  # a known user outside the portal's group: still a login failure
            problem.exit_code = Exit.AUTH
        raise
    stored, _ = config.load()
    same_portal = stored.url.strip().rstrip("/") == settings.url
    path = config.save(config.Config(url=settings.url, token=created["token"], token_id=created["id"],
                                     username=username, cluster=stored.cluster if same_portal else ""))
    shown = {key: value for key, value in created.items() if key != "token"}
    if state.json:
        emit_json({**shown, "url": settings.url, "username": username, "config": str(path)})
    else:
        err.print(f"Logged in to {settings.url} as {username}; token {created['prefix']}… saved in {path}.",
                  markup=False)


@app.command()
@common_options
@pass_state
def logout(state: State) -> None:
    """Revoke the saved token at the portal and remove it from the config file."""
    stored, _ = config.load()
    revoked = False
    if stored.token and stored.token_id is not None and stored.url:
        try:
            Client(config.normalize_url(stored.url), stored.token).request(
                "DELETE", f"/tokens/{stored.token_id}/")
            revoked = True
        except ApiError as problem:
            if problem.exit_code not in (Exit.AUTH, Exit.NOT_FOUND):
                raise  # the portal could not be asked: keep the token, so a retry can revoke it
    removed = bool(stored.token)
    if removed:
        config.save(config.Config(url=stored.url, username=stored.username, cluster=stored.cluster))
    if state.json:
        emit_json({"url": stored.url, "revoked": revoked, "removed": removed})
    else:
        err.print("Logged out." if removed else "Not logged in.")


@app.command()
@common_options
@pass_state
def whoami(state: State) -> None:
    """The user the token belongs to."""
    me = state.client().get("/me/")
    if state.json:
        emit_json(me)
    else:
        fields({**me, "groups": ", ".join(me["groups"])},
               [("User", "username"), ("Email", "email"), ("Groups", "groups"), ("Admin", "is_admin")])
        out.print(f"Portal: {state.settings().url}", markup=False)


@app.command("default-cluster")
@click.argument("name", required=False)
@click.option("--clear", is_flag=True, help="Forget the default: work goes to the portal's default cluster.")
@common_options
@pass_state
def default_cluster(state: State, name: str | None, clear: bool) -> None:
    """Show, set (NAME) or clear (--clear) the cluster that work goes to when a command names none,
    kept in the config file with the portal you logged in to. NAME is the cluster's name as
    `gpuportal clusters` lists it; the portal checks it when work is started."""
    if name and clear:
        raise click.UsageError("Give NAME or --clear, not both.")
    stored, _ = config.load()
    if name or clear:
        if not stored.url:
            raise click.UsageError("Log in first (`gpuportal login --url URL`): a default is a portal's.")
        stored.cluster = config.cluster_name(name) if name else ""
        config.save(stored)
    if state.json:
        emit_json({"url": stored.url, "cluster": stored.cluster or None})
    elif stored.cluster:
        out.print(f"Default cluster: {stored.cluster}" + (f" (at {stored.url})" if stored.url else ""),
                  markup=False)
    else:
        out.print("No default cluster: work goes to the portal's default cluster.")


for command in (templates, submit, jobs, job, logs, cancel, rerun, sessions, session, open_, environments,
                gpu, tensorboard, benchmarks, projects, sweep, jobstats, clusters):
    app.add_command(command)
