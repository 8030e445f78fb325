"""Django authentication backend over the LDAP adapter."""

from django.contrib.auth.backends import ModelBackend
from django.http import HttpRequest

from portal.accounts import ldap
from portal.accounts.models import User
from portal.accounts.services import user_sync_from_directory


class LdapBackend(ModelBackend):
    """Binds as the user; raises DirectoryUnavailable and NotAPortalUser so callers can say why.
    Permissions are ModelBackend's, from the user's Django groups (admins: portal.accounts.staff);
    passwords are never checked here, only by the directory."""

    def authenticate(
        self, request: HttpRequest | None, username: str | None = None,
        password: str | None = None, **kwargs: object,
    ) -> User | None:
        if username is None or password is None:
            return None
        try:
            directory_user = ldap.authenticate(username, password)
        except ldap.InvalidCredentials:
            return None
        return user_sync_from_directory(directory_user=directory_user)

    def get_user(self, user_id: int) -> User | None:
        return User.objects.filter(pk=user_id, is_active=True).first()
