import hashlib

from django.conf import settings
from django.contrib.auth.models import AbstractUser
from django.db import models
from django.utils.crypto import salted_hmac


class User(AbstractUser):
    """A portal user; `username` is the LDAP uid and the Unix account jobs run as.

    The LDAP-derived fields are refreshed on every login (see services.user_sync_from_directory).
    """

    uid_number = models.IntegerField(null=True, blank=True)
    gid_number = models.IntegerField(null=True, blank=True)
    home_directory = models.CharField(max_length=255, blank=True)
    ldap_groups = models.JSONField(default=list, blank=True)
    # The user's own setting (portal.notifications sends the mail); a job may choose otherwise.
    email_on_job_end = models.BooleanField(default=False, help_text="E-mail me when a job ends (default "
                                                                     "for new jobs)")
    # Every app cookie carries the value it was issued under (portal.webapps.grants); the apps
    # gateway refuses an older one. Bumped on logout, "log out everywhere" and deprovisioning.
    app_generation = models.PositiveIntegerField(default=0, editable=False)
    # Part of the login session's auth hash: bumped by "log out everywhere", it ends every other
    # login session of the user at its next request (Django checks the hash on each one).
    session_generation = models.PositiveIntegerField(default=0, editable=False)

    def _get_session_auth_hash(self, secret: str | None = None) -> str:
        hashed = super()._get_session_auth_hash(secret=secret)
        if not self.session_generation:  # as Django's own: sessions from before this field stay valid
            return hashed
        value = f"{hashed}:{self.session_generation}"
        return salted_hmac("gpuportal.accounts.User.session_generation", value, secret=secret,
                           algorithm="sha256").hexdigest()


class ApiToken(models.Model):
    """A personal API token. Only a SHA-256 digest of the key is stored; the key is shown once."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE,
                             related_name="api_tokens")
    name = models.CharField(max_length=100)
    digest = models.CharField(max_length=64, unique=True, editable=False)
    prefix = models.CharField(max_length=8, editable=False, help_text="First characters of the key")
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    expires_at = models.DateTimeField(null=True, blank=True, help_text="Empty: never")

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"

    @staticmethod
    def digest_of(key: str) -> str:
        return hashlib.sha256(key.encode()).hexdigest()
