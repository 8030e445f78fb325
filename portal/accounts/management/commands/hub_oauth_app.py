from django.core.management.base import BaseCommand

from portal.accounts.oauth import hub_oauth_application_ensure


class Command(BaseCommand):
    help = "Create or update JupyterHub's OAuth application (client id, secret, callback) from settings."

    def handle(self, *args: object, **options: object) -> None:
        application = hub_oauth_application_ensure()
        self.stdout.write(f"OAuth application {application.client_id}: {application.redirect_uris}")
