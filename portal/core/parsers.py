"""Request parsing with limits: a JSON body is bounded in size and nesting before it is decoded."""

from io import BytesIO
from typing import Any

from django.conf import settings
from rest_framework import parsers
from rest_framework.exceptions import ParseError

from portal.core.errors import InvalidInput, TooLarge


def json_depth(data: bytes) -> int:
    """Deepest nesting of arrays and objects in a JSON text, ignoring brackets inside strings."""
    depth = deepest = 0
    in_string = escaped = False
    for byte in data:
        if in_string:
            if escaped:
                escaped = False
            elif byte == 0x5C:  # backslash
                escaped = True
            elif byte == 0x22:  # quote
                in_string = False
        elif byte == 0x22:
            in_string = True
        elif byte in (0x5B, 0x7B):  # [ {
            depth += 1
            deepest = max(deepest, depth)
        elif byte in (0x5D, 0x7D):  # ] }
            depth -= 1
    return deepest


class BoundedJSONParser(parsers.JSONParser):
    """DRF's JSON parser behind two checks, so a hostile body is a 400 and never a RecursionError
    or a worker busy decoding megabytes."""

    def parse(self, stream: Any, media_type: str | None = None,
              parser_context: dict | None = None) -> Any:
        data = stream.read(settings.API_MAX_BODY_BYTES + 1) if stream is not None else b""
        if len(data) > settings.API_MAX_BODY_BYTES:
            raise TooLarge(f"The request body is larger than {settings.API_MAX_BODY_BYTES} bytes.")
        if json_depth(data) > settings.API_MAX_JSON_DEPTH:
            raise ParseError(f"JSON nested deeper than {settings.API_MAX_JSON_DEPTH} levels.")
        parsed = super().parse(BytesIO(data), media_type, parser_context)
        if (where := _lone_surrogate(parsed)) is not None:
            # JSON may escape a lone surrogate ("\\ud800"), which no database or script can hold.
            message = ["Contains a lone surrogate escape (\\ud800-\\udfff), which is not text."]
            fields: Any = message
            for key in reversed(where or ["non_field_errors"]):
                fields = {key: fields}
            raise InvalidInput(fields)
        return parsed


def _lone_surrogate(value: Any, path: tuple[str, ...] = ()) -> list[str] | None:
    """The path of the first string (or key) holding a lone surrogate, or None."""
    if isinstance(value, str):
        return None if value.isascii() or _encodable(value) else list(path)
    if isinstance(value, dict):
        for key, item in value.items():
            if not _encodable(key):
                return [*path, "non_field_errors"]
            if (found := _lone_surrogate(item, (*path, key))) is not None:
                return found
    if isinstance(value, list):
        for item in value:
            if (found := _lone_surrogate(item, path)) is not None:
                return found
    return None


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
