"""HTTP to the portal's REST API, and the one mapping of failures to the CLI's exit codes."""

import time
import uuid
from enum import IntEnum
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import requests

from gpuportal_cli import __version__

API = "/api/v1"
TIMEOUT_SECONDS = 30
# A create is retried with the same Idempotency-Key, so the portal creates it once whatever happens.
RETRIES = 3
RETRY_STATUSES = (502, 503, 504)


class Exit(IntEnum):
    OK = 0
    UNSUCCESSFUL = 1  # --wait: the job or session ended without success
    USAGE = 2  # bad command line, or no portal URL configured
    AUTH = 3  # not logged in, token invalid/expired/revoked, wrong password, not a portal user
    INVALID = 4  # the portal refused the input (400/413): `detail` and per-field messages
    NOT_FOUND = 5  # no such object, or not yours (404/403)
    UNAVAILABLE = 6  # portal unreachable, or it or a service behind it unavailable (503/502/504/429)
    CONFLICT = 7  # the object's state forbids it (409): already ended, not ready, key reused
    SERVER_ERROR = 8  # the portal failed (500) or answered something that is not its API
    INTERRUPTED = 130  # Ctrl-C while waiting; the job or session goes on


EXIT_CODES_HELP = """\b
Exit codes:
  0  success
  1  --wait: the job or session ended unsuccessfully
  2  usage error, or no portal URL configured
  3  authentication: not logged in, token invalid or expired (run `gpuportal login`)
  4  invalid input: the portal's message names each field
  5  not found (or another user's)
  6  portal unreachable, or unavailable (503), or rate-limited
  7  conflict: the job already ended, the session is not ready...
  8  the portal failed (internal error) or did not answer as its API
  130  interrupted while waiting (the job or session goes on)"""

_BY_STATUS = {400: Exit.INVALID, 401: Exit.AUTH, 403: Exit.NOT_FOUND, 404: Exit.NOT_FOUND,
              409: Exit.CONFLICT, 413: Exit.INVALID, 429: Exit.UNAVAILABLE, 502: Exit.UNAVAILABLE,
              503: Exit.UNAVAILABLE, 504: Exit.UNAVAILABLE}


class ApiError(Exception):
    """A failed call: the portal's error body ({"detail", "code", "fields"}) and an exit code."""

    def __init__(self, detail: str, *, exit_code: Exit, status: int | None = None, code: str = "",
                 fields: dict[str, Any] | None = None) -> None:
        super().__init__(detail)
        self.detail = detail
        self.exit_code = exit_code
        self.status = status
        self.code = code
        self.fields = fields or {}

    def body(self) -> dict[str, Any]:
        return {"detail": self.detail, "code": self.code, "fields": self.fields, "status": self.status,
                "exit_code": int(self.exit_code)}


def _error_of(response: requests.Response) -> ApiError:
    try:
        body = response.json()
    except ValueError:
        body = None
    status = response.status_code
    exit_code = _BY_STATUS.get(status, Exit.INVALID if 400 <= status < 500 else Exit.SERVER_ERROR)
    if 300 <= status < 400:
        return ApiError(f"The portal redirected to {response.headers.get('Location', '?')}: use that "
                        "address as the portal URL (--url).", exit_code=exit_code, status=status,
                        code="redirect")
    if not isinstance(body, dict) or "detail" not in body:
        # Not the portal's API: a proxy's page, or a URL that is not a portal.
        return ApiError(f"HTTP {status} from {response.url} (not a gpuportal API answer).",
                        exit_code=exit_code, status=status, code="not_api")
    detail, code = str(body["detail"]), str(body.get("code", ""))
    if status == 401 and code != "invalid_credentials":  # a token problem, not a wrong password
        detail = f"{detail} Run `gpuportal login`."
    fields = body.get("fields") if isinstance(body.get("fields"), dict) else {}
    return ApiError(detail, exit_code=exit_code, status=status, code=code, fields=fields)


class Client:
    def __init__(self, url: str, token: str = "", *, timeout: float = TIMEOUT_SECONDS) -> None:
        self.url = url
        self.timeout = timeout
        self.session = requests.Session()
        self.session.headers["User-Agent"] = f"gpuportal-cli/{__version__}"
        self.session.headers["Accept"] = "application/json"
        if token:
            self.session.headers["Authorization"] = f"Token {token}"

    def request(self, method: str, path: str, *, params: dict[str, Any] | None = None,
                json: Any = None, idempotent_create: bool = False) -> Any:
        """The decoded JSON body (None for 204). `path` is relative to /api/v1, or a full URL the
        API gave (pagination). With `idempotent_create`, the POST carries an Idempotency-Key and is
        retried with it on network errors and 502-504."""
        url = path if path.startswith(("http://", "https://")) else f"{self.url}{API}{path}"
        headers = {"Idempotency-Key": str(uuid.uuid4())} if idempotent_create else {}
        attempts = RETRIES if idempotent_create or method == "GET" else 1
        for attempt in range(1, attempts + 1):
            try:
                response = self.session.request(method, url, params=params, json=json, headers=headers,
                                                timeout=self.timeout, allow_redirects=False)
            except requests.RequestException as error:
                if attempt == attempts:
                    raise ApiError(f"Cannot reach the portal at {self.url}: {_reason(error)}",
                                   exit_code=Exit.UNAVAILABLE, code="unreachable") from error
            else:
                if response.status_code not in RETRY_STATUSES or attempt == attempts:
                    break
            time.sleep(0.5 * attempt)
        if response.status_code >= 300:
            raise _error_of(response)
        if response.status_code == 204 or not response.content:
            return None
        try:
            return response.json()
        except ValueError:
            raise ApiError(f"{response.url} did not answer JSON: is {self.url} a gpuportal?",
                           exit_code=Exit.SERVER_ERROR, status=response.status_code,
                           code="not_api") from None

    def get(self, path: str, **params: Any) -> Any:
        return self.request("GET", path, params={k: v for k, v in params.items() if v is not None})

    def _same_origin(self, link: str) -> str:
        """A link the API gave, on the configured scheme and host: behind a TLS proxy the portal
        may name itself http://, and the token must never go anywhere else."""
        return urlunsplit(urlsplit(self.url)[:2] + urlsplit(link)[2:])

    def paged(self, path: str, *, limit: int, **params: Any) -> list[dict[str, Any]]:
        """Up to `limit` rows of a list endpoint, following `next` (cursor or page numbers); a plain
        JSON list is taken as it is."""
        body = self.get(path, **params)
        rows: list[dict[str, Any]] = []
        while True:
            if isinstance(body, list):
                return body[:limit]
            rows += body.get("results", [])
            if len(rows) >= limit or not body.get("next"):
                return rows[:limit]
            body = self.get(self._same_origin(body["next"]))


def _reason(error: requests.RequestException) -> str:
    if isinstance(error, requests.Timeout):
        return "no answer in time"
    if isinstance(error, requests.ConnectionError):
        return "connection refused or host unknown"
    return type(error).__name__
