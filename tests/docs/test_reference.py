"""The generated reference is complete: every path of the live OpenAPI schema and every command of
the CLI is in the built site, every setting base.py reads is on the settings page, and the site is
served at /docs/ without login, with a Help link from the portal's pages."""

import html
import importlib.util
import json
import re
import subprocess
import sys

import click
import pytest
from django.test import Client

from gpuportal_cli.main import app
from tests.docs.conftest import ROOT
from tests.factories import UserFactory


def _hook():
    """docs/hooks/reference.py, the MkDocs hook, loaded from its file."""
    spec = importlib.util.spec_from_file_location("docs_reference_hook", ROOT / "docs/hooks/reference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


hook = _hook()


@pytest.fixture(scope="module")
def schema() -> dict:
    """The schema as the running portal serves it (/api/schema/), not the hook's own copy."""
    out = subprocess.run([sys.executable, "manage.py", "spectacular", "--format", "openapi-json"], cwd=ROOT,
                         capture_output=True, text=True, check=True, timeout=120)
    return json.loads(out.stdout)


def _text(page) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", page.read_text()))


def test_every_path_and_operation_of_the_schema_is_in_the_api_reference(built_site, schema):
    assert len(schema["paths"]) > 30
    missing = []
    for path, operations in schema["paths"].items():
        page = built_site / "reference" / "api" / hook.group_of(path) / "index.html"
        text = _text(page) if page.exists() else ""
        missing += [f"{method.upper()} {path}" for method in operations
                    if method in hook.METHODS and f"{method.upper()} {path}" not in text]
    assert missing == []
    assert json.loads((built_site / "reference/api/openapi.json").read_text())["paths"].keys() == \
        schema["paths"].keys()
    swagger = built_site / "reference/api/swagger"
    assert '"../openapi.json"' in (swagger / "swagger-init.js").read_text()
    assert (swagger / "swagger-ui-bundle.js").stat().st_size > 100_000  # the sidecar's copy, no CDN
    index = _text(built_site / "reference/api/index.html")
    assert all(path in index for path in schema["paths"])


def _commands(group: click.Group, prefix: str) -> list[str]:
    found = []
    for name, command in group.commands.items():
        found.append(f"{prefix} {name}")
        if isinstance(command, click.Group):
            found += _commands(command, f"{prefix} {name}")
    return found


def test_every_cli_command_and_option_is_in_the_cli_reference(built_site):
    text = _text(built_site / "reference/cli/index.html")
    commands = _commands(app, "gpuportal")
    assert len(commands) > 20
    assert [command for command in commands if command not in text] == []
    options = {opt for command in app.commands.values() for param in command.params
               if isinstance(param, click.Option) for opt in param.opts if opt.startswith("--")}
    assert [option for option in sorted(options) if option not in text] == []


def test_every_setting_of_base_py_is_on_the_settings_page(built_site):
    source = (ROOT / "portal/settings/base.py").read_text()
    names = set(re.findall(r"\benv(?:\.\w+)?\(\s*\"([A-Z0-9_]+)\"", source))
    assert {"APPS_ORIGIN", "APPS_GRANT_SECONDS", "CODE_SERVER_COMMAND", "DATABASE_URL"} <= names
    text = _text(built_site / "reference/settings/index.html")
    assert [name for name in sorted(names) if name not in text] == []
    rows = {row["name"]: row for row in hook.settings_read(source)}
    assert rows["APPS_GATEWAY_BIND"]["default"] == "'127.0.0.1:8003'"
    assert "hub proxy API" in rows["APPS_GATEWAY_BIND"]["comment"]  # the inline comment
    assert "does not report" in rows["APPS_START_TIMEOUT_SECONDS"]["comment"]  # the line above


def test_the_site_has_the_guides_pages_and_the_tour_screenshots(built_site):
    for page in ("getting-started", "user/sessions", "user/containers", "user/apps", "user/jobs",
                 "user/benchmarks", "user/cli", "deploy", "admin/policy", "admin/images",
                 "admin/benchmarks", "admin/upgrading", "admin/troubleshooting"):
        assert (built_site / page / "index.html").is_file(), page
    tour = (built_site / "getting-started/index.html").read_text()
    shots = re.findall(r'src="\.\./(assets/tour/[\w-]+\.png)"', tour)
    assert len(shots) >= 6
    assert all((built_site / shot).stat().st_size > 1000 for shot in shots), shots
    # Nothing loads from elsewhere at run time (no CDN, no web fonts).
    for page in built_site.rglob("*.html"):
        assert not re.search(r'(src|href)="(https?:)?//(?!127\.0\.0\.1)', page.read_text()
                             .split("<article", 1)[0]), page


@pytest.mark.django_db
def test_docs_are_served_without_login_and_every_page_links_to_its_help(built_site, settings):
    settings.BASE_DIR = built_site.parent
    (built_site.parent / "site").exists() or (built_site.parent / "site").symlink_to(built_site)
    anonymous = Client()
    for path in ("/docs/", "/docs/user/apps/", "/docs/reference/api/openapi.json"):
        response = anonymous.get(path)
        assert response.status_code == 200, path
    page = anonymous.get("/docs/user/apps/")
    policy = page["Content-Security-Policy"].split("; ")
    scripts = next(part for part in policy if part.startswith("script-src"))
    # #33: no 'unsafe-inline' for scripts; the theme's own inline scripts by their hashes.
    assert "unsafe-inline" not in scripts and scripts.count("'sha256-") >= 2, scripts
    assert anonymous.get("/docs/no-such-page/").status_code == 404
    assert anonymous.get("/docs/../manage.py").status_code in (400, 404)
    alice = Client()
    alice.force_login(UserFactory(username="alice"))
    for url, target in (("/cluster/", "/docs/user/cluster/"), ("/jobs/", "/docs/user/jobs/"),
                        ("/apps/", "/docs/user/apps/"), ("/containers/", "/docs/user/containers/"),
                        ("/benchmarks/", "/docs/user/benchmarks/"),
                        ("/accounts/profile/", "/docs/user/cluster/")):
        body = alice.get(url).content.decode()
        link = re.search(r'<a href="([^"]+)" id="help-link">', body)
        assert link, url
        href = link[1]
        assert href.startswith(target), (url, href)
        assert anonymous.get(href.split("#")[0]).status_code == 200, href
