from django.apps import AppConfig


class AccountsConfig(AppConfig):
    name = "portal.accounts"
