from django.apps import AppConfig


class ProvenanceConfig(AppConfig):
    """What made each job (issue 36): written when it is stored (script, parameters, resources, the
    image's digest, the environment's lock), completed with what the job itself recorded as its user
    at its start (code, inputs, GPUs), shown, compared and exported as an RO-Crate."""

    name = "portal.provenance"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from portal.provenance import receivers  # noqa: F401 - connects to the jobs' signals
