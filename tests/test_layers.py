"""The portal's apps form layers, and no import runs back up: no cycle between two apps, and no app
imports one of a higher layer. Read from the source with `ast` (every import, at module level or
inside a function), so a lazy import inside a function counts as much as one at the top.

LAYERS is the one table of the layer order; docs/admin/development.md ("Layout") draws it. An app
may import the apps of its own layer and of the layers below. A new app goes into the table.
"""

import ast
from collections import defaultdict
from pathlib import Path

PORTAL = Path(__file__).resolve().parent.parent / "portal"

# Lowest first.
LAYERS: list[tuple[str, set[str]]] = [
    ("base", {"core", "lifecycle", "tokens"}),
    ("identity and cluster state", {"accounts", "cluster", "waits"}),
    ("rules and resources", {"environments", "policy", "projects"}),
    ("Slurm work", {"containers", "jobs", "sessions", "webapps"}),
    ("features", {"benchmarks", "efficiency", "extensions", "gpus", "launches", "metrics",
                  "notifications", "reports", "sweeps", "tensorboards", "tracking", "usage", "files"}),
    ("top", {"audit", "home", "poll"}),
]
LAYER_OF = {app: number for number, (_, apps) in enumerate(LAYERS) for app in apps}

# The project, not an app: settings and the wiring of every app's URLs, Celery and WSGI.
PROJECT = {"__init__", "settings", "urls", "api_urls", "celery_app", "wsgi"}


def _apps() -> set[str]:
    return {path.name for path in PORTAL.iterdir()
            if path.is_dir() and (path / "__init__.py").exists() and path.name not in PROJECT}


def _module(path: Path) -> list[str]:
    parts = ["portal", *path.relative_to(PORTAL).with_suffix("").parts]
    return parts[:-1] if parts[-1] == "__init__" else parts


def _imported(node: ast.Import | ast.ImportFrom, path: Path) -> list[str]:
    """The absolute names an import statement brings in (`from portal import x` brings portal.x)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    base = node.module or ""
    if node.level:  # relative: from the module's package up
        package = _module(path) if path.name == "__init__.py" else _module(path)[:-1]
        base = ".".join([*package[:len(package) - node.level + 1], *([node.module] if node.module else [])])
    return [f"{base}.{alias.name}" for alias in node.names] if base == "portal" else [base]


def _imports(source: str, path: Path) -> list[tuple[int, str]]:
    """(line, name) of every import in a module, at any depth."""
    return [(node.lineno, name) for node in ast.walk(ast.parse(source, str(path)))
            if isinstance(node, ast.Import | ast.ImportFrom) for name in _imported(node, path)]


def _edges() -> dict[tuple[str, str], list[str]]:
    """(app, imported app) -> the import lines that make it, as `path:line name`."""
    edges: dict[tuple[str, str], list[str]] = defaultdict(list)
    for path in sorted(PORTAL.rglob("*.py")):
        app = path.relative_to(PORTAL).parts[0].removesuffix(".py")
        if app in PROJECT:
            continue
        for line, name in _imports(path.read_text(), path):
            parts = name.split(".")
            if len(parts) > 1 and parts[0] == "portal" and parts[1] not in PROJECT and parts[1] != app:
                edges[(app, parts[1])].append(f"portal/{path.relative_to(PORTAL)}:{line} {name}")
    return edges


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one app (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_every_app_has_a_layer() -> None:
    apps = _apps()
    assert apps - LAYER_OF.keys() == set(), "apps with no layer: add them to LAYERS in tests/test_layers.py"
    assert LAYER_OF.keys() - apps == set(), "LAYERS names apps that are gone"


def test_no_import_cycle_between_apps() -> None:
    edges = _edges()
    graph: dict[str, set[str]] = defaultdict(set)
    for app, target in edges:
        graph[app].add(target)
    report = []
    for component in _cycles(graph):
        report.append(f"cycle: {', '.join(component)}")
        report += [f"  {app} -> {target}: {line}" for (app, target), lines in sorted(edges.items())
                   if app in component and target in component for line in lines]
    assert not report, "\n".join(report)


def test_no_app_imports_a_higher_layer() -> None:
    upward = [f"{app} ({LAYERS[LAYER_OF[app]][0]}) -> {target} ({LAYERS[LAYER_OF[target]][0]}): {line}"
              for (app, target), lines in sorted(_edges().items())
              if app in LAYER_OF and target in LAYER_OF and LAYER_OF[target] > LAYER_OF[app]
              for line in lines]
    assert not upward, "\n".join(upward)


def test_the_checks_see_what_they_must() -> None:
    """The walker finds imports inside functions, relative ones and `from portal import x`, and
    Tarjan finds a cycle of three."""
    source = ("import portal.cluster.models\n"
              "from portal import policy\n"
              "def f():\n    from portal.waits.selectors import waiting_get\n"
              "class C:\n    def g(self):\n        from ...projects import models\n")
    names = [name for _, name in _imports(source, PORTAL / "jobs" / "services" / "sync.py")]
    assert names == ["portal.cluster.models", "portal.policy", "portal.waits.selectors", "portal.projects"]
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_the_docs_list_every_app() -> None:
    layout = (PORTAL.parent / "docs" / "admin" / "development.md").read_text().split("## Layout", 1)[1]
    layout = layout.split("\n## ", 1)[0]
    missing = sorted(app for app in _apps() if f"\n  {app}/ " not in layout)
    assert not missing, f"docs/admin/development.md's Layout does not list: {missing}"
