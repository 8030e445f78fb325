"""The header's menus: the one list of the portal's pages, in the groups users look for them in.

Each page has one name here, the name its title, the API, the CLI and the guide use (a session is a
"session" everywhere; its URL stays /servers/ for links people kept). The Help menu is written in
base.html, because its first link is the page's own part of the guide (each page's `help` block).
"""

from dataclasses import dataclass

from django.urls import reverse


@dataclass(frozen=True)
class Link:
    label: str
    url_name: str
    id: str
    staff_only: bool = False


@dataclass(frozen=True)
class Group:
    label: str
    links: tuple[Link, ...]


GROUPS: tuple[Group, ...] = (
    Group("Compute", (
        Link("Sessions", "servers:list", "sessions-link"),
        Link("Files", "files:browse", "files-link"),
        Link("Apps", "webapps:list", "apps-link"),
        Link("Shell", "shells:list", "shell-link"),
        Link("Batch jobs", "jobs:list", "jobs-link"),
        Link("Sweeps", "sweeps:list", "sweeps-link"),
        Link("Container images", "containers:catalog", "containers-link"),
    )),
    Group("Results", (
        Link("Runs", "tracking-pages:runs", "runs-link"),
        Link("Benchmark history", "benchmarks:history", "benchmarks-link"),
    )),
    Group("Cluster", (
        Link("Cluster status", "cluster:status", "cluster-link"),
        Link("Cluster GPUs", "gpus:cluster", "cluster-gpus-link", staff_only=True),
        Link("Queue wait and start latency", "timing", "timing-link", staff_only=True),
    )),
    Group("Account", (
        Link("Usage and budgets", "usage:page", "usage-link"),
        Link("Efficiency", "efficiency:report", "efficiency-link"),
        Link("Activity", "audit:activity", "activity-link"),
        Link("Notifications", "notifications:settings", "notifications-link"),
        Link("Profile and API tokens", "accounts:profile", "profile-link"),
    )),
    Group("Admin", (
        Link("Audit trail", "audit:search", "audit-link", staff_only=True),
        Link("Django admin", "admin:index", "admin-link", staff_only=True),
    )),
)


@dataclass(frozen=True)
class ShownLink:
    label: str
    url: str
    id: str
    current: bool


@dataclass(frozen=True)
class ShownGroup:
    label: str
    links: tuple[ShownLink, ...]
    current: bool


def _covers(url: str, path: str) -> bool:
    return path == url or (url != "/" and path.startswith(url))


def menus(path: str, is_staff: bool) -> list[ShownGroup]:
    """The groups this user sees (a group with no link for them is left out), the page at `path`
    marked current, and its group with it. One link is current: the longest URL that covers the
    path (/usage/efficiency/ is Efficiency, not also Usage and budgets)."""
    shown_links = [[(link, reverse(link.url_name)) for link in group.links if is_staff or not link.staff_only]
                   for group in GROUPS]
    covering = [url for links in shown_links for _, url in links if _covers(url, path)]
    current = max(covering, key=len, default=None)
    shown = []
    for group, group_links in zip(GROUPS, shown_links, strict=True):
        links = tuple(ShownLink(link.label, url, link.id, url == current) for link, url in group_links)
        if links:
            shown.append(ShownGroup(group.label, links, any(link.current for link in links)))
    return shown
