from django import forms
from django.http import HttpRequest

from portal.accounts.login import LoginRefused, login_check
from portal.accounts.models import User
from portal.core.errors import PortalError


class LoginForm(forms.Form):
    username = forms.CharField(max_length=64, widget=forms.TextInput(attrs={"autofocus": True}))
    password = forms.CharField(strip=False, required=False, widget=forms.PasswordInput)

    def __init__(self, request: HttpRequest, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)
        self.request = request
        self.user: User | None = None
        self.refused: PortalError | None = None

    def clean(self) -> dict:
        cleaned = super().clean()
        if self.errors:
            return cleaned
        if not cleaned.get("password"):
            raise forms.ValidationError("Enter your password.", code="empty_password")
        try:
            self.user = login_check(
                request=self.request, username=cleaned["username"], password=cleaned["password"]
            )
        except LoginRefused as refused:
            self.refused = refused
            raise forms.ValidationError(refused.message, code=refused.code) from refused
        return cleaned


class ApiTokenForm(forms.Form):
    name = forms.CharField(max_length=100, initial="command line")
