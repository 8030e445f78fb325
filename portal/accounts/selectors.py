from django.db.models import QuerySet

from portal.accounts.models import ApiToken, User


def api_token_list(*, user: User) -> QuerySet[ApiToken]:
    return ApiToken.objects.filter(user=user)
