"""The only code that talks to JupyterHub: its REST API, with the portal's service token."""

import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from urllib.parse import quote

import requests
from django.conf import settings
from django.utils.dateparse import parse_datetime

# The hub's paginated listings: {"items": [...], "_pagination": {"next": {"offset"...} | null}}.
PAGINATION = "application/jupyterhub-pagination+json"
PAGE_LIMIT = 200  # the hub's default api_page_max_limit


class HubError(Exception):
    """The hub refused a request; `message` is the hub's own explanation."""

    def __init__(self, message: str, status: int = 0) -> None:
        super().__init__(message)
        self.message = message
        self.status = status


class HubUnavailable(HubError):
    """The hub did not answer: server states are unknown, not gone."""


class HubServerLimit(HubError):
    """The hub counts the user's named servers at its limit (named_server_limit_per_user). The portal
    admitted the server by its own count, so the hub still holds one the portal has ended: a stop
    whose removal has not gone through yet (its scancel failing while slurmctld is down)."""


# JupyterHub's words (apihandlers/users.py) when a new named server would pass the user's limit.
SERVER_LIMIT = re.compile(r"already has the maximum of \d+ named servers")


@dataclass(frozen=True)
class HubServer:
    """A server the hub knows as running or pending (`pending`: 'spawn', 'stop' or None)."""

    name: str
    ready: bool
    pending: str | None
    url: str
    last_activity: datetime | None
    user_options: dict[str, Any] = field(default_factory=dict)
    job_id: str = ""
    # The spawner's last look at the Slurm queue: "PENDING Resources", "RUNNING gpu-node1"...
    job_status: str = ""

    @property
    def slurm_state(self) -> str:
        return self.job_status.split(" ", 1)[0]

    @property
    def slurm_detail(self) -> str:
        """The pending reason, or the node it runs on."""
        return self.job_status.split(" ", 1)[1] if " " in self.job_status else ""


@dataclass
class Breaker:
    """Opens when the hub does not answer, and then fails every later call of its holder at once:
    a hung hub costs the poll cycle one timeout, not one per session it would stop."""

    opened: str = ""  # why, once open


@dataclass(frozen=True)
class JupyterHub:
    api_url: str
    token: str
    timeout: float = 10.0
    breaker: Breaker | None = None

    @classmethod
    def from_settings(cls, *, breaker: bool = False) -> "JupyterHub":
        """`breaker`: one hub for a run of calls (a poll cycle) that gives up on a hub seen down."""
        return cls(settings.JUPYTERHUB_API_URL.rstrip("/"), settings.JUPYTERHUB_API_TOKEN,
                   settings.JUPYTERHUB_TIMEOUT_SECONDS, Breaker() if breaker else None)

    def _request(self, method: str, path: str, *, ok: tuple[int, ...], json: object = None,
                 params: dict | None = None, headers: dict[str, str] | None = None) -> requests.Response:
        if self.breaker is not None and self.breaker.opened:
            raise HubUnavailable(f"{self.breaker.opened} (earlier in this cycle; asked again next cycle)")
        try:
            return self._answer(method, path, ok=ok, json=json, params=params, headers=headers)
        except HubUnavailable as error:
            if self.breaker is not None:
                self.breaker.opened = error.message
            raise

    def _answer(self, method: str, path: str, *, ok: tuple[int, ...], json: object,
                params: dict | None, headers: dict[str, str] | None) -> requests.Response:
        try:
            response = requests.request(
                method, f"{self.api_url}{path}", json=json, params=params, timeout=self.timeout,
                headers={"Authorization": f"token {self.token}", **(headers or {})},
            )
        except requests.RequestException as error:
            raise HubUnavailable(f"JupyterHub did not answer: {error.__class__.__name__}") from error
        if response.status_code not in ok:
            if response.status_code in (502, 503, 504):
                raise HubUnavailable(f"JupyterHub answered {response.status_code}", response.status_code)
            try:
                message = response.json().get("message") or response.reason
            except ValueError:
                message = response.reason
            if response.status_code == 400 and SERVER_LIMIT.search(message):
                raise HubServerLimit(message, response.status_code)
            raise HubError(message, response.status_code)
        return response

    @staticmethod
    def _user_path(username: str, server: str | None = None) -> str:
        path = f"/users/{quote(username, safe='')}"
        return path if server is None else f"{path}/servers/{quote(server, safe='')}"

    def servers(self, username: str) -> dict[str, HubServer]:
        """The user's running and pending servers; empty if the hub does not know the user yet."""
        try:
            body = self._request("GET", self._user_path(username), ok=(200,)).json()
        except HubError as error:
            if error.status == 404:
                return {}
            raise
        return {name: _server(name, data) for name, data in (body.get("servers") or {}).items()}

    def stopped_servers(self, username: str) -> set[str]:
        """The names of the user's stopped named servers, which the hub keeps, and counts towards
        named_server_limit_per_user, until they are removed."""
        try:
            body = self._request("GET", self._user_path(username), ok=(200,),
                                 params={"include_stopped_servers": "1"}).json()
        except HubError as error:
            if error.status == 404:
                return set()
            raise
        return {name for name, data in (body.get("servers") or {}).items() if name and data.get("stopped")}

    def active_servers(self) -> dict[str, dict[str, HubServer]]:
        """Every user's running and pending servers, by user name: one request for everybody (the
        poll cycle's), a few more only past the hub's largest page."""
        users: dict[str, dict[str, HubServer]] = {}
        offset = 0
        while True:
            body = self._request("GET", "/users", ok=(200,), headers={"Accept": PAGINATION},
                                 params={"state": "active", "offset": offset, "limit": PAGE_LIMIT}).json()
            for user in body.get("items") or []:
                users[user["name"]] = {name: _server(name, data)
                                       for name, data in (user.get("servers") or {}).items()}
            following = (body.get("_pagination") or {}).get("next") or {}
            if not isinstance(following.get("offset"), int) or following["offset"] <= offset:
                return users
            offset = following["offset"]

    def user_ensure(self, username: str) -> None:
        self._request("POST", self._user_path(username), ok=(201, 409))

    def server_start(self, username: str, name: str, *, options: dict[str, Any], display_name: str) -> bool:
        """Ask for a server; True when it is already up, False while it is being started."""
        response = self._request("POST", self._user_path(username, name), ok=(201, 202),
                                 json={"user_options": options, "display_name": display_name})
        return response.status_code == 201

    def server_stop(self, username: str, name: str) -> None:
        """Stop the server (cancelling its Slurm job) and forget it in the hub."""
        try:
            self._request("DELETE", self._user_path(username, name), ok=(202, 204),
                          json={"remove": True})
        except HubError as error:
            if error.status != 404:
                raise

    def tokens_revoke(self, username: str) -> int:
        """Revoke the hub tokens of the user's browser sessions: their access to servers ends.

        Tokens without a login session (the servers' own API tokens) stay: servers keep running.
        """
        try:
            body = self._request("GET", f"{self._user_path(username)}/tokens", ok=(200,)).json()
        except HubError as error:
            if error.status == 404:
                return 0
            raise
        tokens = [token for token in body.get("api_tokens", []) if token.get("session_id")]
        for token in tokens:
            self._request("DELETE", f"{self._user_path(username)}/tokens/{token['id']}", ok=(204, 404))
        return len(tokens)


def _server(name: str, data: dict[str, Any]) -> HubServer:
    return HubServer(
        name=name, ready=bool(data.get("ready")), pending=data.get("pending"), url=data.get("url", ""),
        last_activity=_time(data.get("last_activity")),
        # Tokens in the options (the spawner keeps them out of those it stores) are never kept.
        user_options={key: value for key, value in (data.get("user_options") or {}).items()
                      if key not in ("report_token", "tracking_token")},
        job_id=str((data.get("state") or {}).get("job_id", "")),
        job_status=str((data.get("state") or {}).get("job_status", "")),
    )


def _time(value: str | None) -> datetime | None:
    return parse_datetime(value) if value else None
