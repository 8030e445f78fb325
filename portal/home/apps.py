from django.apps import AppConfig


class HomeConfig(AppConfig):
    """The signed-in user's home page (/): what runs, what waits and why, what needs them, quick
    starts and recent runs, read from the portal's database through the other apps' selectors.
    Home imports the other apps; none imports home."""

    name = "portal.home"
    label = "home"
    verbose_name = "Home"
