from django.core.management.base import BaseCommand

from portal.policy.services import policy_publish


class Command(BaseCommand):
    help = "Write the session policy file the hub reads (settings.POLICY_FILE)."

    def handle(self, *args: object, **options: object) -> None:
        from django.conf import settings

        written = policy_publish()
        self.stdout.write(f"{settings.POLICY_FILE}: {'written' if written else 'unchanged'}")
