import posixpath
import re

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import RegexValidator
from django.db import models

# The hub's spawner checks the same shapes again (spawners/options.py): keep them in step.
NAME_PATTERN = r"^[a-z0-9][a-z0-9_-]{0,63}$"
KERNEL_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"
MODULE_PATTERN = r"^[A-Za-z0-9._/+-]{1,128}$"
PATH_PATTERN = r"^(/[A-Za-z0-9._+-]+)+$"


class Environment(models.Model):
    """A software environment users pick for a notebook server or a batch job.

    `frameworks` (name -> version) and the health fields are written only by the health check
    (`services.environment_check`), from what the environment itself reports: never typed in.
    """

    class Kind(models.TextChoices):
        PYTHON = "python", "Python environment (Jupyter kernel)"
        MODULES = "modules", "Environment modules"
        CONTAINER = "container", "Container image (portal.containers)"

    name = models.SlugField(max_length=64, unique=True, validators=[RegexValidator(NAME_PATTERN)],
                            help_text="Lowercase letters, digits, _ and -; what users and the API pick.")
    title = models.CharField(max_length=200)
    kind = models.CharField(max_length=16, choices=Kind.choices, default=Kind.PYTHON)
    path = models.CharField(max_length=1024, blank=True,
                            help_text="Python: the environment's prefix (its bin/python), under "
                                      "ENVIRONMENTS_DIR.")
    modules = models.JSONField(default=list, blank=True,
                               help_text='Modules: the names to `module load`, e.g. ["cuda/12.4", "nccl"].')
    kernel = models.CharField(max_length=64, blank=True, validators=[RegexValidator(KERNEL_PATTERN)],
                              help_text="Python: its Jupyter kernelspec name.")
    frameworks = models.JSONField(default=dict, blank=True,
                                  help_text="Detected by the health check: name -> version.")
    description = models.TextField(blank=True)
    enabled = models.BooleanField(default=True, help_text="Offered to users (while healthy).")
    healthy = models.BooleanField(default=False)
    health_message = models.TextField(blank=True)
    checked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    @property
    def usable(self) -> bool:
        """What users may pick: switched on and passing its check (a container image: also its
        owner's, see selectors)."""
        return self.enabled and self.healthy

    @property
    def versions(self) -> str:
        """'torch 2.14.1, torchvision 0.29.1', for people."""
        return ", ".join(f"{name} {version}" for name, version in self.frameworks.items())

    @property
    def python(self) -> str:
        return f"{self.path}/bin/python"

    def clean(self) -> None:
        errors: dict[str, str] = {}
        if self.kind == self.Kind.PYTHON:
            errors.update(python_path_problems(self.path))
            if not self.kernel:
                errors["kernel"] = "A Python environment needs its kernelspec name."
        if self.kind == self.Kind.MODULES:
            modules = self.modules
            if not isinstance(modules, list) or not modules or not all(
                    isinstance(m, str) and re.fullmatch(MODULE_PATTERN, m) for m in modules):
                errors["modules"] = "A non-empty list of module names (letters, digits, . _ / + -)."
        if errors:
            raise ValidationError(errors)


def python_path_problems(path: str) -> dict[str, str]:
    """A Python environment's prefix: absolute, normalised, under ENVIRONMENTS_DIR (the one place
    the hub accepts, see the spawner)."""
    root = settings.ENVIRONMENTS_DIR.rstrip("/")
    if not re.fullmatch(PATH_PATTERN, path or "") or posixpath.normpath(path) != path:
        return {"path": "An absolute, normalised path (letters, digits, . _ + -)."}
    if not path.startswith(f"{root}/"):
        return {"path": f"Python environments live under {root}/."}
    return {}
