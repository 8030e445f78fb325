"""Files the portal publishes for the hub (which cannot read its database): written whole and
replaced atomically, readable by the hub's account (0644)."""

import logging
import tempfile
from pathlib import Path

logger = logging.getLogger(__name__)


def file_publish(path_text: str, text: str) -> bool:
    """Write `text` to the file unless it already holds it; True when written. Never raises: a portal
    that cannot write it keeps working, and the hub keeps (or falls back from) what it last read."""
    path = Path(path_text)
    try:
        if path.exists() and path.read_text() == text:
            return False
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", dir=path.parent, prefix=f".{path.stem}-", delete=False) as tmp:
            tmp.write(text)
    except OSError as error:
        logger.warning("could not publish %s: %s", path, error)
        return False
    written = Path(tmp.name)
    try:
        written.chmod(0o644)  # the hub's account reads it
        written.replace(path)  # atomic: the hub never reads half a file
    except OSError as error:
        written.unlink(missing_ok=True)
        logger.warning("could not publish %s: %s", path, error)
        return False
    return True
