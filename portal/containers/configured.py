"""The container runtimes as this site configured them (CONTAINERS_RUNTIMES): the portal's side of
the runtimes adapter (portal.containers.runtimes), which reads no settings so the hub can use it."""

import os
from collections.abc import Sequence
from pathlib import PurePosixPath

from django.conf import settings

from portal.containers.runtimes import RUNTIMES, Bind, Runtime, RuntimeUnavailable


def runtime_get(name: str, *, check_installed: bool = True) -> Runtime:
    """The runtime `name` as the site configured it (CONTAINERS_RUNTIMES), or RuntimeUnavailable."""
    if name not in RUNTIMES:
        raise RuntimeUnavailable(f"Unknown container runtime {name!r}; known: {', '.join(RUNTIMES)}.")
    config = settings.CONTAINERS_RUNTIMES.get(name) or {}
    if not config.get("enabled"):
        raise RuntimeUnavailable(f"The container runtime {RUNTIMES[name].title} is not enabled on this site.")
    binary = str(config.get("binary", ""))
    if check_installed and not (PurePosixPath(binary).is_absolute() and os.access(binary, os.X_OK)):
        raise RuntimeUnavailable(
            f"The container runtime {RUNTIMES[name].title} is not installed "
            f"({binary or 'no binary configured'})."
        )
    options = {k: v for k, v in config.items() if k not in ("enabled", "binary", "binds")}
    return RUNTIMES[name](binary=binary, options=options)


def default_binds(name: str, *, home: str, extra: Sequence[Bind] = ()) -> tuple[Bind, ...]:
    """The site's binds for `name` (home, shared data, scratch...), `{home}` filled in, plus `extra`."""
    config = settings.CONTAINERS_RUNTIMES.get(name) or {}
    binds = [Bind.parse(text, home=home) for text in config.get("binds", ())]
    return (*binds, *extra)
