"""The audit search's object type takes a model's label from before its rename (#32), so a saved
search keeps its meaning; an unknown one is a form error naming the field."""

import pytest

from portal.audit.forms import SearchForm

pytestmark = pytest.mark.django_db


def test_the_former_session_label_means_sessions():
    form = SearchForm(data={"object_type": "servers.NotebookServer"})
    assert form.is_valid(), form.errors
    assert form.search().object_type == "servers.Session"


def test_an_unknown_label_names_the_field():
    form = SearchForm(data={"object_type": "servers.Nothing"})
    assert not form.is_valid() and list(form.errors) == ["object_type"]
