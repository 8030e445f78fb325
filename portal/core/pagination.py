"""Cursor pages for the API's long lists: a page costs the same at 10^6 rows (no COUNT(*), no OFFSET)."""

from rest_framework.exceptions import NotFound
from rest_framework.pagination import CursorPagination
from rest_framework.request import Request

from portal.core.errors import InvalidInput


class CursorPage(CursorPagination):
    """Subclasses set `ordering` (newest first, a unique last key)."""

    page_size = 50
    page_size_query_param = "page_size"
    max_page_size = 200

    def decode_cursor(self, request: Request) -> object:
        try:
            return super().decode_cursor(request)
        except NotFound:  # DRF's answer to a cursor it did not give out; the field is the client's
            raise InvalidInput({"cursor": ["Not a cursor this API gave out."]}) from None
