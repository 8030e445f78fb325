"""The portal as OAuth2 provider for JupyterHub (django-oauth-toolkit): one login for both.

The hub's application is trusted (no consent screen); the userinfo endpoint gives the LDAP uid as
`preferred_username`, the Unix account the user's servers run as.
"""

from django.conf import settings
from django.db import transaction
from django.http import HttpRequest, JsonResponse
from oauth2_provider.models import AccessToken, Application, RefreshToken
from oauth2_provider.views.generic import ScopedProtectedResourceView

from portal.accounts.models import User


class UserInfoView(ScopedProtectedResourceView):
    """OpenID-Connect-style userinfo for a bearer token with the `profile` scope."""

    required_scopes = ["profile"]

    def get(self, request: HttpRequest) -> JsonResponse:
        user = request.resource_owner
        return JsonResponse({
            "sub": str(user.pk),
            "preferred_username": user.username,
            "name": user.get_full_name(),
            "email": user.email,
            "groups": user.ldap_groups,
        })


@transaction.atomic
def hub_oauth_application_ensure() -> Application:
    """Create or update the hub's OAuth application from settings (idempotent)."""
    application, _ = Application.objects.update_or_create(
        client_id=settings.JUPYTERHUB_OAUTH_CLIENT_ID,
        defaults={
            "name": "JupyterHub",
            "client_type": Application.CLIENT_CONFIDENTIAL,
            "authorization_grant_type": Application.GRANT_AUTHORIZATION_CODE,
            "redirect_uris": f"{settings.JUPYTERHUB_URL.rstrip('/')}/hub/oauth_callback",
            "skip_authorization": True,
            "client_secret": settings.JUPYTERHUB_OAUTH_CLIENT_SECRET,  # hashed on save
        },
    )
    return application


def oauth_tokens_revoke(*, user: User) -> None:
    """Revoke every OAuth token the portal issued to the user: the hub's next check fails."""
    RefreshToken.objects.filter(user=user, revoked__isnull=True).delete()
    AccessToken.objects.filter(user=user).delete()
