"""What every command shares: the resolved settings, the API client, the --json switch, and the
cluster that work goes to (--cluster)."""

import time
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any, TypeVar

import click
from rich.markup import escape

from gpuportal_cli import config
from gpuportal_cli.client import ApiError, Client, Exit
from gpuportal_cli.output import err

F = TypeVar("F", bound=Callable[..., Any])


@dataclass
class State:
    url_option: str | None = None
    cluster_option: str | None = None
    json: bool = False

    def settings(self) -> config.Config:
        """The settings in force (a config.ConfigError becomes exit code 2 in main)."""
        stored, exposed = config.load()
        resolved = config.resolve(stored, url=self.url_option, cluster=self.cluster_option)
        if exposed and stored.token and resolved.token == stored.token:
            path = escape(str(config.config_path()))
            err.print(f"[yellow]Warning: {path} is readable by others: chmod 600 it.")
        return resolved

    def client(self) -> Client:
        settings = self.settings()
        if not settings.url:
            raise ApiError(f"No portal URL: run `gpuportal login --url URL` or set {config.URL_ENV}.",
                           exit_code=Exit.USAGE, code="no_url")
        if not settings.token:
            raise ApiError(f"Not logged in to {settings.url}: run `gpuportal login`.",
                           exit_code=Exit.AUTH, code="not_logged_in")
        return Client(settings.url, settings.token)

    def cluster(self) -> str:
        """The cluster named by --cluster, GPUPORTAL_CLUSTER or the config file; empty: none, so the
        portal uses its default cluster (and a one-cluster portal is asked nothing new). No second
        warning about an exposed config file: client() gives it."""
        stored, _ = config.load()
        return config.resolve(stored, url=self.url_option, cluster=self.cluster_option).cluster


pass_state = click.make_pass_decorator(State, ensure=True)


def _set_json(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    if value:
        ctx.ensure_object(State).json = True


def _set_url(ctx: click.Context, _param: click.Parameter, value: str | None) -> None:
    if value:
        ctx.ensure_object(State).url_option = value


def _set_cluster(ctx: click.Context, _param: click.Parameter, value: str | None) -> None:
    if value:
        ctx.ensure_object(State).cluster_option = value


CLUSTER_HELP = ("The cluster to run on, by its name as `gpuportal clusters` lists it (default: "
                "GPUPORTAL_CLUSTER, then `gpuportal default-cluster`, then the portal's default).")


def cluster_option(command: F) -> F:
    """--cluster on a command that starts work (it is also accepted before it: `gpuportal --cluster b
    submit ...`)."""
    return click.option("--cluster", expose_value=False, callback=_set_cluster, metavar="NAME",
                        help=CLUSTER_HELP)(command)


def common_options(command: F) -> F:
    """--json and --url on each command too (they are also accepted before it: `gpuportal --json jobs`)."""
    command = click.option("--url", expose_value=False, callback=_set_url, metavar="URL",
                           help="The portal (default: the one you logged in to).")(command)
    return click.option("--json", "as_json", is_flag=True, expose_value=False, callback=_set_json,
                        help="Print the API's objects as JSON only (for scripts).")(command)


def wait_until(fetch: Callable[[], dict[str, Any]], done: Callable[[dict[str, Any]], bool],
               describe: Callable[[dict[str, Any]], str], *, interval: float, quiet: bool,
               what: str) -> dict[str, Any]:
    """Poll `fetch` until `done`. Progress goes to stderr (none with --json): a live status line on
    a terminal, one line per change otherwise (CI logs). Ctrl-C stops waiting only: the job or
    session goes on."""
    started = time.monotonic()
    live = err.is_terminal and not quiet
    last = ""
    try:
        with err.status("", spinner="dots") if live else nullcontext() as status:
            while True:
                current = fetch()
                if done(current):
                    return current
                line = describe(current)
                if status is not None:
                    status.update(f"{line}  [dim]{int(time.monotonic() - started)} s")
                elif not quiet and line != last:
                    err.print(line)
                last = line
                time.sleep(interval)
    except KeyboardInterrupt:
        err.print(f"Stopped waiting; {what} goes on.", markup=False)
        raise click.exceptions.Exit(Exit.INTERRUPTED) from None
