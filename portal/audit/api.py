from drf_spectacular.utils import extend_schema
from rest_framework.generics import GenericAPIView
from rest_framework.request import Request
from rest_framework.response import Response

from portal.audit.selectors import activity_of, described
from portal.audit.serializers import ActivitySerializer
from portal.core.pagination import CursorPage


class ActivityPage(CursorPage):
    # The events of one transaction share their time: the slug makes the order, and the pages, exact.
    ordering = ("-pgh_created_at", "-pgh_slug")


class ActivityApi(GenericAPIView):
    serializer_class = ActivitySerializer
    pagination_class = ActivityPage

    @extend_schema(summary="Activity on my things",
                   description="Every recorded change to your sessions, jobs, apps, pulls, images, "
                               "registry keys, tokens, extensions and account, and your logins, "
                               "whoever made it (you, an admin, the idle culler, the poll cycle). "
                               "Newest first.")
    def get(self, request: Request) -> Response:
        page = self.paginate_queryset(activity_of(request.user))
        return self.get_paginated_response(ActivitySerializer(described(page), many=True).data)
