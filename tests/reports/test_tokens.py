"""Report tokens: one object of one kind each; forged, altered or foreign tokens are refused."""

import pytest
from django.core import signing

from portal.core.errors import NotAuthenticated
from portal.tokens.report import report_token, report_token_read


def test_a_token_names_its_kind_and_object():
    assert report_token_read(report_token("job", 12)) == ("job", 12)
    assert report_token_read(report_token("session", 12)) == ("session", 12)


def test_tokens_differ_per_kind_and_object():
    tokens = {report_token(kind, pk) for kind in ("job", "session") for pk in (1, 2, 12, 21)}
    assert len(tokens) == 8


def _refused(token):
    with pytest.raises(NotAuthenticated) as refusal:
        report_token_read(token)
    assert refusal.value.status == 401
    return refusal.value


@pytest.mark.parametrize("change", [
    lambda t: t.replace("job:12:", "job:13:", 1),  # another job, same signature
    lambda t: t.replace("job:12:", "session:12:", 1),  # a session, same signature
    lambda t: t.replace("job:12:", "job:120:", 1),
    lambda t: t[:-1] + ("A" if t[-1] != "A" else "B"),  # signature altered
    lambda t: t.rsplit(":", 1)[0],  # no signature
    lambda t: t + "x",
    lambda t: "",
    lambda t: "job:12",
    lambda t: t * 20,
])
def test_an_altered_token_is_refused(change):
    _refused(change(report_token("job", 12)))


def test_a_token_signed_with_another_key_or_salt_is_refused(settings):
    _refused(signing.Signer(salt="gpuportal.reports", key="another-portal-key-" * 3).sign("job:12"))
    _refused(signing.Signer(salt="something.else").sign("job:12"))
    _refused(signing.Signer(salt="gpuportal.reports").sign("admin:1"))  # a kind never minted
    _refused(signing.Signer(salt="gpuportal.reports").sign("job:1e3"))


def test_a_token_survives_a_key_rotation_only_as_a_fallback(settings):
    token = report_token("job", 7)
    old_key = settings.SECRET_KEY
    settings.SECRET_KEY = "a-new-key-" * 6
    _refused(token)
    settings.SECRET_KEY_FALLBACKS = [old_key]
    assert report_token_read(token) == ("job", 7)


@pytest.mark.parametrize(("kind", "pk"), [("admin", 1), ("job", 0), ("job", -1), ("job", True), ("job", "1")])
def test_only_real_objects_get_tokens(kind, pk):
    with pytest.raises(ValueError):
        report_token(kind, pk)
