"""The OpenAPI schema documents the one error format, and every status the mapping can give, once
for all operations (an operation's own description of a status wins)."""

from typing import Any

from drf_spectacular.openapi import AutoSchema
from drf_spectacular.utils import OpenApiResponse
from rest_framework import serializers

from portal.core.throttling import throttle_scope


class ErrorSerializer(serializers.Serializer):
    detail = serializers.CharField(help_text="What went wrong, for people")
    code = serializers.CharField(help_text="Stable machine code, e.g. invalid, not_found, slurm_unavailable")
    fields = serializers.DictField(help_text="Per-field messages (nested for template parameters)")


_COMMON = {
    "400": "Invalid input or a malformed body: `fields` names each refused field",
    "401": "No or an invalid, revoked or expired token",
    "403": "Not allowed for this account",
    "404": "No such object, or another user's",
    "413": "The request body is too large",
    "429": "Too many such requests from you (each costs a process or a hub request): wait the seconds "
           "the `Retry-After` header gives",
    "503": "A service the portal needs (its database, Slurm, the hub, the directory) did not answer",
}


class PortalAutoSchema(AutoSchema):
    def _get_response_bodies(self, direction: str = "response") -> dict[str, Any]:
        responses = super()._get_response_bodies(direction)
        if direction != "response":
            return responses
        for code, description in self._error_codes().items():
            if code not in responses:
                responses[code] = self._get_response_for_code(
                    OpenApiResponse(ErrorSerializer, description=description), code, direction=direction)
        return responses

    def _error_codes(self) -> dict[str, str]:
        codes = {"400": _COMMON["400"], "503": _COMMON["503"]}
        if self.get_auth():
            codes.update({"401": _COMMON["401"], "403": _COMMON["403"]})
        if "{" in self.path:
            codes["404"] = _COMMON["404"]
        if self.method in ("POST", "PUT", "PATCH"):
            codes["413"] = _COMMON["413"]
        if throttle_scope(self.view, self.method):
            codes["429"] = _COMMON["429"]
        return codes
