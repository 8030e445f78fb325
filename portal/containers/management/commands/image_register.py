"""`manage.py image_register NAME RUNTIME REFERENCE [--title T] [--framework name=version]...`:
add a catalog image, or update the one of that name (scripts/up.sh registers the local bed's)."""

from django.core.management.base import BaseCommand, CommandError, CommandParser

from portal.containers.models import Image
from portal.containers.services import image_check, image_create, image_environment_sync
from portal.core.errors import InvalidInput


class Command(BaseCommand):
    help = __doc__

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("name")
        parser.add_argument("runtime")
        parser.add_argument("reference")
        parser.add_argument("--title", default="")
        parser.add_argument("--description", default="")
        parser.add_argument("--framework", action="append", default=[], help="name=version")

    def handle(self, *args: object, name: str, runtime: str, reference: str, title: str, description: str,
               framework: list[str], **options: object) -> None:
        frameworks = dict(item.split("=", 1) for item in framework if "=" in item)
        existing = Image.objects.filter(owner=None, name=name).first()
        try:
            if existing is None:
                image_create(name=name, runtime=runtime, reference=reference, title=title,
                             description=description, frameworks=frameworks)
            else:
                if errors := image_check(name=name, runtime=runtime, reference=reference):
                    raise InvalidInput(errors)
                Image.objects.filter(pk=existing.pk).update(runtime=runtime, reference=reference,
                                                            title=title or name, description=description,
                                                            frameworks=frameworks)
                existing.refresh_from_db()
                image_environment_sync(image=existing)
        except InvalidInput as error:
            raise CommandError(f"{name}: {error.fields}") from None
        self.stdout.write(f"image {name}: {runtime} {reference}")
