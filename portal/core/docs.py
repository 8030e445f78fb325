"""The documentation site (mkdocs.yml, built into the checkout's site/ by `make up`): static pages,
no login, on the portal's origin. Its theme has a few inline scripts; rather than 'unsafe-inline',
the pages' policy names each of them by its SHA-256, read from the built site once per build, so a
script injected into a page (or anything else inline) does not run."""

import base64
import hashlib
import re
from functools import lru_cache
from pathlib import Path

from django.conf import settings
from django.http import Http404, HttpRequest, HttpResponse
from django.views.static import serve

# An inline script that runs: a <script> without src and without a data type (application/json).
_INLINE = re.compile(r"<script(?![^>]*\b(?:src|type)=)[^>]*>(.*?)</script>", re.DOTALL)
_POLICY = ("default-src 'self'; script-src 'self' {hashes}; style-src 'self' 'unsafe-inline'; "
           "img-src 'self' data:; object-src 'none'; base-uri 'self'; frame-ancestors 'none'")


def docs_root() -> Path:
    return Path(settings.BASE_DIR) / "site"


@lru_cache(maxsize=4)
def _script_hashes(root: Path, built: float) -> str:
    """Every distinct inline script of the site (a handful), as CSP hash sources. `built`: the
    index's mtime, so a rebuilt site is read again."""
    scripts = {script for page in root.rglob("*.html") for script in _INLINE.findall(page.read_text())}
    digests = (base64.b64encode(hashlib.sha256(script.encode()).digest()).decode() for script in scripts)
    return " ".join(sorted(f"'sha256-{digest}'" for digest in digests))


def docs_policy(root: Path) -> str:
    return _POLICY.format(hashes=_script_hashes(root, (root / "index.html").stat().st_mtime))


def docs_view(request: HttpRequest, path: str = "") -> HttpResponse:
    root = docs_root()
    if not (root / "index.html").is_file():
        if path:
            raise Http404("The documentation is not built.")
        return HttpResponse("<!doctype html><title>gpuportal docs</title><p>The documentation is not built: "
                            "run <code>mkdocs build</code> in the checkout (<code>make up</code> does).</p>")
    if path == "" or path.endswith("/"):
        path += "index.html"
    response = serve(request, path, document_root=str(root))
    response["Content-Security-Policy"] = docs_policy(root)
    return response
