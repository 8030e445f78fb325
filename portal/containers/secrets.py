"""Registry keys at rest: Fernet (AES-128-CBC + HMAC-SHA256) with a key that lives in a 0600 file
of the portal's account (CONTAINERS_KEY_FILE, made by scripts/containers/setup.sh), never in the
database: a copy of the database alone reveals no key."""

import base64
from functools import lru_cache
from pathlib import Path

from cryptography.fernet import Fernet, InvalidToken
from django.conf import settings

from portal.core.errors import Unavailable


@lru_cache(maxsize=4)
def _fernet(path: str) -> Fernet:
    try:
        return Fernet(Path(path).read_bytes().strip())
    except (OSError, ValueError) as error:
        raise Unavailable(
            "Registry keys cannot be used here: the portal's key file is missing or unreadable "
            "(CONTAINERS_KEY_FILE).",
            code="key_file_unavailable",
        ) from error


def secret_encrypt(text: str) -> bytes:
    return _fernet(settings.CONTAINERS_KEY_FILE).encrypt(text.encode())


def secret_decrypt(token: bytes) -> str:
    try:
        return _fernet(settings.CONTAINERS_KEY_FILE).decrypt(bytes(token)).decode()
    except InvalidToken as error:
        raise Unavailable(
            "A stored registry key cannot be decrypted (the key file changed): store it again.",
            code="key_undecryptable",
        ) from error


def scrub(text: str, secrets: list[str]) -> str:
    """`text` with every secret (and its base64, as in a basic-auth header or an auth file)
    replaced by ****."""
    forms = set()
    for secret in filter(None, secrets):
        forms.add(secret)
        forms.add(base64.b64encode(secret.encode()).decode())
    for form in sorted(forms, key=len, reverse=True):
        text = text.replace(form, "****")
    return text
