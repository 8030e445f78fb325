"""Client-side idempotency for creating POSTs (`Idempotency-Key`): the same key and body give the
same object, the same key with another body is a 409. The key is stored on the created row itself,
under a unique constraint per user, so two concurrent retries cannot both create."""

import hashlib
import json
import re
from typing import Any, TypeVar

from django.db.models import Model, QuerySet
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter
from rest_framework.request import Request

from portal.core.errors import Conflict, InvalidInput

HEADER = "Idempotency-Key"
_KEY = re.compile(r"^[\x21-\x7e]{1,255}$")  # printable ASCII, no spaces

IDEMPOTENCY_PARAMETER = OpenApiParameter(
    HEADER, OpenApiTypes.STR, OpenApiParameter.HEADER, required=False,
    description="Any unique string (1-255 printable ASCII characters, e.g. a UUID). A retry with the "
                "same key and body returns the object the first request created (and creates "
                "nothing); the same key with a different body is refused with 409.",
)

M = TypeVar("M", bound=Model)


def idempotency_key(request: Request) -> str:
    """The request's key, '' when it has none; a malformed key is a 400 naming the header."""
    key = request.headers.get(HEADER)
    if key is None:
        return ""
    if not _KEY.fullmatch(key):
        raise InvalidInput({HEADER: ["1-255 printable ASCII characters without spaces."]})
    return key


def request_digest(data: Any) -> str:
    return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()


def idempotent_replay(rows: QuerySet[M], *, key: str, digest: str) -> M | None:
    """The row an earlier request with this key created, or None; 409 if its body differed."""
    if not key:
        return None
    existing = rows.filter(idempotency_key=key).first()
    if existing is not None and existing.request_digest != digest:
        raise Conflict(f"{HEADER} {key!r} was already used with a different request.",
                       code="idempotency_key_reused")
    return existing
