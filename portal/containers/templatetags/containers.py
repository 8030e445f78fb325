from django import template
from django.conf import settings

from portal.accounts.models import User
from portal.containers.selectors import credential_list

register = template.Library()


@register.inclusion_tag("containers/registry_keys.html", takes_context=True)
def registry_keys(context: template.Context) -> dict:
    """The profile page's registry-key card: the stored keys (never the keys) and a form."""
    user: User = context["request"].user
    default = settings.CONTAINERS_REGISTRY_URL.split("://", 1)[-1].rstrip("/")
    return {
        "credentials": credential_list(user=user),
        "default_registry": default,
        "request": context["request"],
        "csrf_token": context.get("csrf_token"),
    }
