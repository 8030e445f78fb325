"""Small filters for the Files pages, and "Open in Files" links for other pages."""

import posixpath
from datetime import UTC, datetime

from django import template
from django.urls import reverse
from django.utils.http import urlencode

from portal.core.paths import user_roots

register = template.Library()


@register.filter
def from_ns(value: int) -> datetime:
    """A file's mtime (nanoseconds since the epoch) as a datetime the date filter formats."""
    return datetime.fromtimestamp(value / 1e9, tz=UTC)


@register.simple_tag(takes_context=True)
def files_folder_url(context: template.Context, absolute: str) -> str:
    """The Files page of the folder holding `absolute` (a job's output file), or "" where that
    folder is not under one of the user's roots."""
    return _browse_url(context, posixpath.dirname(posixpath.normpath(absolute)) if absolute else "")


@register.simple_tag(takes_context=True)
def files_dir_url(context: template.Context, absolute: str) -> str:
    """The Files page of the folder `absolute` itself (a run's artifacts), or "" where it is not
    under one of the user's roots."""
    return _browse_url(context, posixpath.normpath(absolute) if absolute else "")


def _browse_url(context: template.Context, folder: str) -> str:
    user = context["request"].user
    if not folder.startswith("/") or not getattr(user, "home_directory", ""):
        return ""
    roots = user_roots(home=user.home_directory, username=user.username)
    for name, top in (("home", roots.home), ("scratch", roots.scratch), ("data", roots.data)):
        if top and (folder == top or folder.startswith(top.rstrip("/") + "/")):
            relative = folder[len(top):].strip("/")
            return f"{reverse('files:browse')}?{urlencode({'root': name, 'path': relative})}"
    return ""
