"""Reading the audit trail: a user's activity on their things, and the admins' search."""

from dataclasses import dataclass
from datetime import datetime

from django.apps import apps
from django.db.models import Q
from pghistory.models import Event, Events

from portal.accounts.models import User


def event_models() -> list[type[Event]]:
    return [m for m in apps.get_app_config("audit").get_models() if issubclass(m, Event)]


def object_types() -> list[str]:
    """What the search's object type filter takes: the tracked models' labels."""
    return sorted(m.pgh_tracked_model._meta.label for m in event_models())


def activity_of(user: User) -> Events:
    """Every event on the user's things (their sessions, jobs, tokens, logins, their account...),
    whoever acted: themselves, an admin, the culler or the poll cycle. Newest first."""
    return Events.objects.across(*event_models()).references(user).order_by("-pgh_created_at", "-pgh_slug")


@dataclass(frozen=True)
class Search:
    actor: User | None = None
    object_type: str = ""
    source: str = ""
    since: datetime | None = None
    until: datetime | None = None


def events_search(search: Search) -> Events:
    """Every event, for the admins, narrowed by actor, object type, source and date."""
    models = event_models()
    if search.object_type:
        models = [m for m in models if m.pgh_tracked_model._meta.label == search.object_type]
    filters = Q()
    if search.actor is not None:
        filters &= Q(pgh_context__user=search.actor.pk)
    if search.source:
        filters &= Q(pgh_context__source=search.source)
    if search.since is not None:
        filters &= Q(pgh_created_at__gte=search.since)
    if search.until is not None:
        filters &= Q(pgh_created_at__lt=search.until)
    return Events.objects.across(*models).filter(filters).order_by("-pgh_created_at", "-pgh_slug")


def actors_by_id(events: list[Events]) -> dict[int, User]:
    ids = {e.pgh_context.get("user") for e in events if e.pgh_context}
    return User.objects.in_bulk([i for i in ids if i is not None])


def describe(event: Events, actors: dict[int, User]) -> dict[str, object]:
    """One event as the page, the API and the export show it."""
    ctx = event.pgh_context or {}
    actor = actors.get(ctx.get("user"))
    data = event.pgh_data or {}
    source = ctx.get("source", "system")
    return {
        "id": event.pgh_slug,
        "at": event.pgh_created_at,
        "action": event.pgh_label,
        "object_type": event.pgh_obj_model,
        "object_id": event.pgh_obj_id,
        "actor": actor.username if actor else None,
        "acting_as": ctx.get("acting_as", source),
        "source": source,
        "address": ctx.get("address"),
        "url": ctx.get("url"),
        "data": data,
        "changes": event.pgh_diff,
    }


def described(events: list[Events]) -> list[dict[str, object]]:
    actors = actors_by_id(events)
    return [describe(e, actors) for e in events]


