from django.core.validators import MinValueValidator
from django.db import models


class ResourceProfile(models.Model):
    """A one-click session size ("1 GPU · 8 h") admins define; part of the published policy."""

    name = models.SlugField(max_length=30, unique=True, help_text="What the API's `profile` names")
    title = models.CharField(max_length=64, help_text='Shown on the button, e.g. "4 GPUs · 24 h · debug"')
    partition = models.CharField(max_length=64)
    gpus = models.PositiveSmallIntegerField(default=1)
    hours = models.FloatField(default=8.0, validators=[MinValueValidator(1 / 60)])
    nodes = models.PositiveSmallIntegerField(default=1, validators=[MinValueValidator(1)])
    groups = models.JSONField(default=list, blank=True,
                              help_text="LDAP groups it is offered to, e.g. [\"portal-users\"]; empty: all")
    order = models.PositiveSmallIntegerField(default=0)

    class Meta:
        ordering = ["order", "name"]

    def __str__(self) -> str:
        return self.title

