from django.urls import path

from portal.accounts import views

app_name = "accounts"
urlpatterns = [
    path("login/", views.login_view, name="login"),
    path("logout/", views.logout_view, name="logout"),
    path("logout/everywhere/", views.logout_everywhere_view, name="logout-everywhere"),
    path("profile/", views.profile_view, name="profile"),
    path("profile/tokens/<id:token_id>/revoke/", views.token_revoke_view, name="token-revoke"),
]
