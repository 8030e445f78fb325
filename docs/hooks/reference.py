"""MkDocs hook: the reference pages generated from the code at build time, so they cannot go stale.

- reference/api/<group>.md: the REST API, from the live OpenAPI schema (drf-spectacular's
  `manage.py spectacular`, run in a subprocess with the test settings: no database, no service), one
  page per resource (the first path segment under /api/v1/); the schema itself is published beside
  them as reference/api/openapi.json.
- reference/api/swagger/: Swagger UI (drf-spectacular-sidecar's copy, nothing from a CDN) on that
  openapi.json, to browse the schema without a login.
- reference/settings.md: every `env("NAME", default=...)` of portal/settings/base.py with its
  default and the comment lines above it.

The CLI reference (reference/cli.md) is mkdocs-click's, from the Click commands themselves.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parents[2]
SETTINGS = ROOT / "portal" / "settings" / "base.py"
API_PREFIX = "/api/v1/"
METHODS = ("get", "post", "put", "patch", "delete")
TITLES = {"me": "Me", "app-types": "App types", "registry-keys": "Registry keys"}

_state: dict[str, Any] = {}


# --- the OpenAPI schema -------------------------------------------------------------------------

def schema_build() -> dict:
    """The schema as `manage.py spectacular` writes it (test settings: throwaway secrets, no I/O)."""
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "portal.settings.test"}
    out = subprocess.run(  # a fixed argv
        [sys.executable, "manage.py", "spectacular", "--format", "openapi-json"],
        cwd=ROOT, env=env, capture_output=True, text=True, check=False, timeout=300)
    if out.returncode:
        raise RuntimeError(f"manage.py spectacular failed:\n{out.stderr[-4000:]}")
    return json.loads(out.stdout)


def group_of(path: str) -> str:
    rest = path[len(API_PREFIX):] if path.startswith(API_PREFIX) else path.strip("/")
    return rest.split("/", 1)[0] or "api"


def title_of(group: str) -> str:
    return TITLES.get(group, group.replace("-", " ").capitalize())


def _ref(schema: dict, node: dict) -> tuple[str, dict]:
    ref = node.get("$ref", "")
    if ref.startswith("#/components/schemas/"):
        name = ref.rsplit("/", 1)[1]
        return name, schema["components"]["schemas"].get(name, {})
    return "", node


def _type(node: dict) -> str:
    if "$ref" in node:
        return f"`{node['$ref'].rsplit('/', 1)[1]}`"
    if "allOf" in node and len(node["allOf"]) == 1:
        return _type(node["allOf"][0])
    if "oneOf" in node or "anyOf" in node:
        return " or ".join(_type(part) for part in node.get("oneOf") or node.get("anyOf"))
    kind = node.get("type", "object")
    if isinstance(kind, list):
        kind = " or ".join(kind)
    if kind == "array":
        return f"array of {_type(node.get('items', {}))}"
    if "enum" in node:
        return kind + ": " + ", ".join(f"`{value}`" for value in node["enum"] if value not in ("", None))
    if node.get("format"):
        return f"{kind} ({node['format']})"
    return kind


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def _fields(schema: dict, node: dict, lines: list[str]) -> None:
    name, body = _ref(schema, node)
    if body.get("type") == "array":
        name, body = _ref(schema, body.get("items", {}))
    properties = body.get("properties") or {}
    if not properties:
        lines.append(f"Body: {_type(node)}\n")
        return
    required = set(body.get("required", []))
    lines += [f"`{name or 'object'}`:\n", "| field | type | required | read-only | description |",
              "|---|---|---|---|---|"]
    for field, spec in properties.items():
        lines.append(f"| `{field}` | {_cell(_type(spec))} | {'yes' if field in required else ''} | "
                     f"{'yes' if spec.get('readOnly') else ''} | {_cell(spec.get('description', ''))} |")
    lines.append("")


def api_page(schema: dict, group: str, paths: list[str]) -> str:
    lines = [f"# {title_of(group)}", "",
             "Generated at build time from the portal's OpenAPI schema "
             "([openapi.json](openapi.json)); see [the API overview](../../user/api.md) for "
             "authentication, errors and limits.", ""]
    for path in paths:
        for method in METHODS:
            operation = schema["paths"][path].get(method)
            if not operation:
                continue
            lines += [f"## `{method.upper()} {path}`", ""]
            if operation.get("summary"):
                lines += [operation["summary"], ""]
            if operation.get("description"):
                lines += [operation["description"], ""]
            parameters = operation.get("parameters", [])
            if parameters:
                lines += ["| parameter | in | type | description |", "|---|---|---|---|"]
                for parameter in parameters:
                    lines.append(f"| `{parameter['name']}` | {parameter['in']} | "
                                 f"{_cell(_type(parameter.get('schema', {})))} | "
                                 f"{_cell(parameter.get('description', ''))} |")
                lines.append("")
            content = operation.get("requestBody", {}).get("content", {})
            if "application/json" in content:
                lines.append("**Request body**\n")
                _fields(schema, content["application/json"].get("schema", {}), lines)
            lines += ["**Responses**", "", "| status | body | description |", "|---|---|---|"]
            for status, response in sorted(operation.get("responses", {}).items()):
                body = response.get("content", {}).get("application/json", {}).get("schema")
                lines.append(f"| {status} | {_cell(_type(body)) if body else ''} | "
                             f"{_cell(response.get('description', ''))} |")
            lines.append("")
    return "\n".join(lines) + "\n"


def api_index(groups: dict[str, list[str]]) -> str:
    lines = ["# REST API reference", "",
             "One page per resource, generated at build time from the live OpenAPI schema "
             "(`python manage.py spectacular`), which is also published here as "
             "[openapi.json](openapi.json), browsable in [Swagger UI](swagger/index.html) (read-only "
             "here; the running portal serves the schema at `/api/schema/` and an interactive Swagger "
             "UI at `/api/docs/`).", "",
             "| resource | paths |", "|---|---|"]
    for group, paths in groups.items():
        listed = "<br>".join(f"`{path}`" for path in paths)
        lines.append(f"| [{title_of(group)}]({group}.md) | {listed} |")
    return "\n".join(lines) + "\n"


# --- settings -----------------------------------------------------------------------------------



def settings_read(source: str) -> list[dict[str, str]]:
    """Each env("NAME", default=...) call of the settings module: name, type, default, comment."""
    lines = source.splitlines()
    found: dict[str, dict[str, str]] = {}
    for statement in ast.parse(source).body:
        comment = []
        row = statement.lineno - 2
        while row >= 0 and lines[row].lstrip().startswith("#"):
            comment.insert(0, lines[row].strip().lstrip("#").strip())
            row -= 1
        for node in ast.walk(statement):
            if not isinstance(node, ast.Call):
                continue
            reader = ast.unparse(node.func)  # env("X") or env.int("X"), env.db("X")...
            if not (reader == "env" or reader.startswith("env.")) or not node.args \
                    or not isinstance(node.args[0], ast.Constant):
                continue
            name = node.args[0].value
            default = next((ast.unparse(k.value) for k in node.keywords if k.arg == "default"), "")
            end = lines[node.end_lineno - 1]
            inline = end.split("  # ", 1)[1].strip() if "  # " in end else ""
            text = " ".join(part for part in (" ".join(comment), inline) if part)
            found.setdefault(name, {"name": name, "type": reader.partition(".")[2] or "str",
                                    "default": default, "comment": text, "line": str(node.lineno)})
    return list(found.values())


def settings_page() -> str:
    rows = settings_read(SETTINGS.read_text())
    lines = ["# Settings", "",
             "Every setting the portal reads from its environment, generated at build time from "
             "`portal/settings/base.py` (its `env(...)` calls and the comment lines above them). "
             "The local bed's values are in `slurm/dev/env.sh`; `make up` writes the ones in its "
             "environment to the portal's environment file. Secrets have no default.", "",
             "| variable | type | default | meaning |", "|---|---|---|---|"]
    for row in sorted(rows, key=lambda r: r["name"]):
        default = f"`{_cell(row['default'])}`" if row["default"] else ""
        lines.append(f"| `{row['name']}` | {row['type']} | {default} | "
                     f"{_cell(row['comment'])} (base.py line {row['line']}) |")
    return "\n".join(lines) + "\n"


# --- MkDocs events ------------------------------------------------------------------------------

def on_config(config: Any) -> Any:
    schema = schema_build()
    groups: dict[str, list[str]] = {}
    for path in schema["paths"]:
        groups.setdefault(group_of(path), []).append(path)
    groups = dict(sorted(groups.items()))
    _state.update(schema=schema, groups=groups)
    # The REST API section of the nav: the overview, then a page per resource.
    api_nav = [{"Overview": "reference/api/index.md"}] + [
        {title_of(group): f"reference/api/{group}.md"} for group in groups]
    for section in config["nav"]:
        if isinstance(section, dict) and "Reference" in section:
            for i, entry in enumerate(section["Reference"]):
                if isinstance(entry, dict) and "REST API" in entry:
                    section["Reference"][i] = {"REST API": api_nav}
    return config


SWAGGER_HTML = """<!doctype html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <title>gpuportal REST API (Swagger UI)</title>
  <link rel="stylesheet" href="swagger-ui.css">
</head>
<body>
<div id="swagger-ui"></div>
<script src="swagger-ui-bundle.js"></script>
<script src="swagger-init.js"></script>
</body>
</html>
"""
# The schema file beside this page; read-only here (no "Try it out": the docs have no credentials).
SWAGGER_INIT = """window.ui = SwaggerUIBundle({url: "../openapi.json", dom_id: "#swagger-ui",
  supportedSubmitMethods: [], deepLinking: true});
"""


def swagger_files() -> dict[str, str | bytes]:
    from drf_spectacular_sidecar import __file__ as sidecar  # the portal's dependency: UI assets

    dist = Path(sidecar).parent / "static" / "drf_spectacular_sidecar" / "swagger-ui-dist"
    found: dict[str, str | bytes] = {"reference/api/swagger/index.html": SWAGGER_HTML,
                                     "reference/api/swagger/swagger-init.js": SWAGGER_INIT}
    for name in ("swagger-ui-bundle.js", "swagger-ui.css", "LICENSE"):
        found[f"reference/api/swagger/{name}"] = (dist / name).read_bytes()
    return found


def on_files(files: Files, config: Any) -> Files:
    schema, groups = _state["schema"], _state["groups"]
    generated: dict[str, str | bytes] = {
        "reference/api/index.md": api_index(groups),
        "reference/api/openapi.json": json.dumps(schema, indent=1),
        "reference/settings.md": settings_page(),
    }
    for group, paths in groups.items():
        generated[f"reference/api/{group}.md"] = api_page(schema, group, paths)
    generated.update(swagger_files())
    for uri, content in generated.items():
        files.append(File.generated(config, uri, content=content))
    return files


def schema_paths() -> list[str]:
    """For tests: every path of the schema the site was built from."""
    return list(_state.get("schema", schema_build())["paths"])


__all__ = ["group_of", "on_config", "on_files", "schema_paths", "settings_read"]
