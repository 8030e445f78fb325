from django import forms

from portal.accounts.models import User
from portal.audit.selectors import Search, object_types
from portal.core.audit_context import SOURCES

# A tracked model's label before it was renamed (#32): a saved search or a script keeps working.
FORMER_LABELS = {"servers.NotebookServer": "servers.Session"}


class ObjectTypeField(forms.ChoiceField):
    def to_python(self, value: object) -> str:
        value = super().to_python(value)
        return FORMER_LABELS.get(value, value)


class SearchForm(forms.Form):
    actor = forms.CharField(required=False, help_text="Username")
    object_type = ObjectTypeField(required=False)
    source = forms.ChoiceField(required=False, choices=[("", "any")] + [(s, s) for s in SOURCES])
    since = forms.DateTimeField(required=False)
    until = forms.DateTimeField(required=False)

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)
        self.fields["object_type"].choices = [("", "any")] + [(t, t) for t in object_types()]

    def clean_actor(self) -> User | None:
        username = self.cleaned_data["actor"].strip()
        if not username:
            return None
        user = User.objects.filter(username=username).first()
        if user is None:
            raise forms.ValidationError("No such user.")
        return user

    def search(self) -> Search:
        return Search(**self.cleaned_data)
