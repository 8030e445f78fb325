from django.conf import settings
from django.contrib import messages
from django.contrib.auth import login, logout
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_http_methods, require_POST

from portal.accounts.forms import ApiTokenForm, LoginForm
from portal.accounts.selectors import api_token_list
from portal.accounts.services import api_token_create, api_token_revoke, user_logout_everywhere
from portal.core.api_errors import error_headers
from portal.core.errors import TooManyRequests


@require_http_methods(["GET", "POST"])
def login_view(request: HttpRequest) -> HttpResponse:
    form = LoginForm(request, data=request.POST or None)
    if request.method == "POST" and form.is_valid():
        login(request, form.user, backend="portal.accounts.backends.LdapBackend")
        next_url = request.POST.get("next") or request.GET.get("next", "")
        if not url_has_allowed_host_and_scheme(next_url, allowed_hosts={request.get_host()}):
            next_url = settings.LOGIN_REDIRECT_URL
        return redirect(next_url)
    # Too many failures is a 429 with Retry-After on the page too; other refusals are the form's 400.
    too_many = isinstance(form.refused, TooManyRequests)
    response = render(request, "accounts/login.html", {"form": form, "next": request.GET.get("next", "")},
                      status=429 if too_many else 400 if form.errors else 200)
    for name, value in error_headers(form.refused).items() if too_many else ():
        response[name] = value
    return response


@require_POST
def logout_view(request: HttpRequest) -> HttpResponse:
    logout(request)
    return redirect("accounts:login")


@login_required
@require_POST
def logout_everywhere_view(request: HttpRequest) -> HttpResponse:
    user_logout_everywhere(user=request.user)
    logout(request)
    messages.success(request, "You are logged out everywhere: every browser, and every app.")
    return redirect("accounts:login")


@login_required
@require_http_methods(["GET", "POST"])
def profile_view(request: HttpRequest) -> HttpResponse:
    form = ApiTokenForm(request.POST or None)
    new_key = None
    if request.method == "POST" and form.is_valid():
        _, new_key = api_token_create(user=request.user, name=form.cleaned_data["name"])
        form = ApiTokenForm()
    return render(request, "accounts/profile.html", {
        "form": form, "new_key": new_key, "tokens": api_token_list(user=request.user),
    })


@login_required
@require_POST
def token_revoke_view(request: HttpRequest, token_id: int) -> HttpResponse:
    if api_token_revoke(user=request.user, token_id=token_id):
        messages.success(request, "Token revoked.")
    return redirect("accounts:profile")
