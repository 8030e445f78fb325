"""Versions of what pages poll, in Redis: one per user (their jobs, sessions, apps, extensions, idle
GPUs) and one for the cluster-wide state. A poll answers 304 while they stand still
(portal.core.live), so a version must change whenever a followed row does: every write of a followed
model tells its owners, through the signals for save and delete and through FollowedQuerySet for
the queryset writes that send none (update, bulk_create, bulk_update).

A version is a random token, not a counter: a Redis that lost its keys and counts again from zero
could meet an ETag a browser still holds. A lost key reads as None, a version of its own. Bumps
happen on commit, so a poll that sees the new version reads the new rows; a GET only reads.
"""

import logging
import secrets
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from django.apps import apps
from django.core.cache import cache
from django.db import models, transaction
from django.db.models.signals import post_delete, post_save

logger = logging.getLogger(__name__)

CLUSTER = "live:v:cluster"
# Idle keys go after this long; a key that went reads as None and just costs one full answer.
KEEP_SECONDS = 7 * 24 * 3600

# The models whose rows the live parts show, by label, with the lookups that lead to their owner.
FOLLOWED: dict[str, tuple[str, ...]] = {
    "jobs.Job": ("user_id",),
    "servers.Session": ("user_id",),
    "webapps.App": ("user_id",),
    "extensions.ExtensionRequest": ("user_id",),
    "sweeps.Sweep": ("user_id",),
    "launches.Preset": ("user_id",),
    "gpus.IdleEvent": ("user_id",),
    "gpus.IdleWatch": ("job__user_id", "session__user_id"),
    "gpus.GpuSummary": ("job__user_id", "session__user_id"),  # a session card's GPU figures
}


def user_key(user_id: int | str) -> str:
    return f"live:v:user:{user_id}"


def versions_read(keys: Sequence[str]) -> list[str | None]:
    """One Redis round trip; raises what the cache raises (the caller answers in full then)."""
    found = cache.get_many(list(keys))
    return [found.get(key) for key in keys]


def _bump(keys: Iterable[str]) -> None:
    try:
        cache.set_many({key: secrets.token_hex(8) for key in keys}, timeout=KEEP_SECONDS)
    except Exception as error:  # Redis away: pages catch up within LIVE_WINDOW_SECONDS
        logger.warning("live versions not bumped: %s", error)


def users_changed(user_ids: Iterable[int | None]) -> None:
    """These users' rows changed: their parts answer in full once the transaction commits."""
    keys = {user_key(user_id) for user_id in user_ids if user_id is not None}
    if keys:
        transaction.on_commit(lambda: _bump(keys))


def cluster_changed() -> None:
    transaction.on_commit(lambda: _bump([CLUSTER]))


def _lookups(model: type[models.Model]) -> tuple[str, ...]:
    return FOLLOWED[model._meta.label]


def _owners_of(instance: models.Model) -> list[int | None]:
    """The owner of one row through each lookup: `user_id`, or `job__user_id` via the related row."""
    owners: list[int | None] = []
    for lookup in _lookups(type(instance)):
        *path, last = lookup.split("__")
        target: Any = instance
        for name in path:
            if getattr(target, f"{name}_id") is None:
                target = None
                break
            target = getattr(target, name)
        owners.append(getattr(target, last) if target is not None else None)
    return owners


class FollowedQuerySet(models.QuerySet):
    """A followed model's writes that send no signal tell the owners too (one SELECT of the owners
    before an update, whose filter may name what the update changes)."""

    def _owners(self) -> set[int | None]:
        lookups = _lookups(self.model)
        return {owner for row in self.values_list(*lookups) for owner in row}

    def update(self, **kwargs: Any) -> int:
        owners = self._owners()
        count = super().update(**kwargs)
        if count:
            users_changed(owners)
        return count

    def bulk_create(self, objs: Iterable[models.Model], *args: Any, **kwargs: Any) -> list[models.Model]:
        created = super().bulk_create(objs, *args, **kwargs)
        users_changed(owner for obj in created for owner in _owners_of(obj))
        return created

    def bulk_update(self, objs: Iterable[models.Model], fields: Sequence[str], *args: Any,
                    **kwargs: Any) -> int:
        objs = list(objs)
        count = super().bulk_update(objs, fields, *args, **kwargs)
        users_changed(owner for obj in objs for owner in _owners_of(obj))
        return count


def _row_changed(sender: type[models.Model], instance: models.Model, **kwargs: Any) -> None:
    users_changed(_owners_of(instance))


def follow_models() -> None:
    """Connects the save and delete signals of every followed model (CoreConfig.ready)."""
    receiver: Callable[..., None] = _row_changed
    for label in FOLLOWED:
        model = apps.get_model(label)
        if not isinstance(model._default_manager.all(), FollowedQuerySet):
            raise TypeError(f"{label} is followed: its manager must be FollowedQuerySet.as_manager()")
        post_save.connect(receiver, sender=model, dispatch_uid=f"live.{label}.save")
        post_delete.connect(receiver, sender=model, dispatch_uid=f"live.{label}.delete")
