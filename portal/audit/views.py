"""Activity on my things (every user) and the admins' search with its JSON Lines export."""

import json
from collections.abc import Iterator
from itertools import count

from django.contrib.admin.views.decorators import staff_member_required
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.core.serializers.json import DjangoJSONEncoder
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import render

from portal.audit.forms import SearchForm
from portal.audit.selectors import Search, activity_of, described, events_search

PAGE = 50


def _page(request: HttpRequest, events: object) -> tuple[object, list[dict[str, object]]]:
    page = Paginator(events, PAGE).get_page(request.GET.get("page"))
    return page, described(list(page.object_list))


@login_required
def activity_view(request: HttpRequest) -> HttpResponse:
    page, rows = _page(request, activity_of(request.user))
    return render(request, "audit/activity.html", {"page": page, "rows": rows})


def _search(request: HttpRequest) -> tuple[SearchForm, Search | None]:
    form = SearchForm(request.GET or None)
    if not request.GET:
        return form, Search()
    return form, form.search() if form.is_valid() else None


@staff_member_required
def search_view(request: HttpRequest) -> HttpResponse:
    form, search = _search(request)
    page, rows = _page(request, events_search(search)) if search is not None else (None, [])
    return render(request, "audit/search.html", {"form": form, "page": page, "rows": rows,
                                                 "query": request.GET.urlencode()})


@staff_member_required
def export_view(request: HttpRequest) -> HttpResponse:
    """Every event the search finds, one JSON object a line, streamed in chunks of 500."""
    form, search = _search(request)
    if search is None:
        return HttpResponse(json.dumps(form.errors), status=400, content_type="application/json")
    events = events_search(search)

    def lines() -> Iterator[str]:
        for start in count(0, 500):
            chunk = list(events[start:start + 500])
            if not chunk:
                return
            for row in described(chunk):
                yield json.dumps(row, cls=DjangoJSONEncoder) + "\n"

    response = StreamingHttpResponse(lines(), content_type="application/x-ndjson")
    response["Content-Disposition"] = 'attachment; filename="audit.jsonl"'
    return response
