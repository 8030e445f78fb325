"""Reads: the catalog a user sees, their pulls and their stored keys (never the keys themselves)."""

from django.db.models import Q, QuerySet

from portal.accounts.models import User
from portal.containers.models import Image, Pull, RegistryCredential


def image_list(*, user: User) -> QuerySet[Image]:
    """The catalog and the user's own pulled copies (admins: everybody's copies too)."""
    images = Image.objects.select_related("owner", "environment", "source")
    return images if user.is_staff else images.filter(Q(owner=None) | Q(owner=user))


def image_get(*, user: User, image_id: int) -> Image | None:
    return image_list(user=user).filter(pk=image_id).first()


def pull_list(*, user: User) -> QuerySet[Pull]:
    return Pull.objects.filter(user=user).select_related("image", "result")


def pull_get(*, user: User, pull_id: int) -> Pull | None:
    """A pull of the user's own (admins: anybody's)."""
    pulls = Pull.objects.select_related("image", "result", "user")
    return (pulls if user.is_staff else pulls.filter(user=user)).filter(pk=pull_id).first()


def credential_list(*, user: User) -> QuerySet[RegistryCredential]:
    return RegistryCredential.objects.filter(user=user).defer("secret")
