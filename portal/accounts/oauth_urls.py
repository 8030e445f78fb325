"""The OAuth2 provider endpoints JupyterHub logs in through (no client self-registration)."""

from django.urls import path
from oauth2_provider import views

from portal.accounts.oauth import UserInfoView

app_name = "oauth2_provider"
urlpatterns = [
    path("authorize/", views.AuthorizationView.as_view(), name="authorize"),
    path("token/", views.TokenView.as_view(), name="token"),
    path("revoke_token/", views.RevokeTokenView.as_view(), name="revoke-token"),
    path("userinfo/", UserInfoView.as_view(), name="userinfo"),
]
