"""Report tokens: what a batch job or a notebook session's job presents when it reports its own
transitions (POST /api/v1/reports/, portal.reports). One token names one object of one kind.

Signed with the portal's SECRET_KEY (django.core.signing, a salt of their own), so there is no
table: the token is `<kind>:<pk>:<signature>`. A token for job 12 verifies as ("job", 12) and
nothing else; changing the kind or the number breaks the signature. Kept here, in core, because the
apps that mint them (jobs at sbatch time, servers in the hub's options) sit below portal.reports,
which reads them.
"""

from typing import Literal, get_args

from django.core import signing

from portal.core.errors import NotAuthenticated

ReportKind = Literal["job", "session", "app"]
KINDS: tuple[str, ...] = get_args(ReportKind)
_SALT = "gpuportal.reports"
_MAX_LENGTH = 200  # far more than a real token; a longer header is refused before any hashing


def report_token(kind: ReportKind, pk: int) -> str:
    """The token for one job (its Job pk), one session (its Session pk) or one web app (App)."""
    if kind not in KINDS:
        raise ValueError(f"not a report kind: {kind!r}")
    if isinstance(pk, bool) or not isinstance(pk, int) or pk < 1:
        raise ValueError(f"not a primary key: {pk!r}")
    return signing.Signer(salt=_SALT).sign(f"{kind}:{pk}")


def report_token_read(token: str) -> tuple[ReportKind, int]:
    """(kind, pk) of a token this portal minted; NotAuthenticated for anything else."""
    refused = NotAuthenticated("Invalid report token.", code="invalid_report_token")
    if not isinstance(token, str) or not token or len(token) > _MAX_LENGTH:
        raise refused
    try:
        value = signing.Signer(salt=_SALT).unsign(token)
    except signing.BadSignature:
        raise refused from None
    kind, _, number = value.partition(":")
    if kind not in KINDS or not number.isascii() or not number.isdigit():
        raise refused
    return kind, int(number)  # type: ignore[return-value]
