from django.http import HttpRequest, HttpResponse


def locked_out(request: HttpRequest, original_response: HttpResponse,
               credentials: dict | None) -> HttpResponse:
    """Keep the view's own answer: the login form and the token API both explain a lockout."""
    return original_response
