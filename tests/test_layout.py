"""The package's shape stays readable: no module over 600 lines, and no import circles inside
``navi_memory`` (counting imports inside functions too, which only hide a circle)."""

from __future__ import annotations

import ast
from pathlib import Path

import navi_memory

PACKAGE = Path(navi_memory.__file__).parent
MAX_LINES = 600


def _modules() -> dict[str, Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The ``navi_memory`` modules ``name`` imports, anywhere in its code."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            base = package.split(".")[: len(package.split(".")) - node.level + 1] if node.level else []
            target = ".".join([*base, *(node.module.split(".") if node.module else [])])
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                found.add(sub if sub in modules else target)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return {m for m in found if m in modules and m != name}


def test_no_module_is_over_600_lines():
    long = {str(p.relative_to(PACKAGE)): n for p in PACKAGE.rglob("*.py")
            if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert long == {}


def test_no_import_circles_inside_the_package():
    modules = _modules()
    graph = {name: _imports(name, path, modules) for name, path in modules.items()}
    # a package's __init__ importing its own modules is no circle: drop edges to enclosing packages
    graph = {name: {d for d in deps if not name.startswith(d + ".")} for name, deps in graph.items()}
    circles, state = [], {}

    def visit(node: str, trail: list[str]) -> None:
        state[node] = "open"
        for dep in sorted(graph[node]):
            if state.get(dep) == "open":
                circles.append(trail[trail.index(dep):] + [dep])
            elif dep not in state:
                visit(dep, [*trail, dep])
        state[node] = "done"

    for name in sorted(graph):
        if name not in state:
            visit(name, [name])
    assert circles == []


def test_the_core_rules_are_pure():
    """``core/`` holds rules shared by every part: it may read models and errors, nothing with I/O."""
    modules = _modules()
    allowed = {"navi_memory.models", "navi_memory.errors"}
    for name, path in modules.items():
        if name.startswith("navi_memory.core"):
            outside = {m for m in _imports(name, path, modules) if not m.startswith("navi_memory.core")}
            assert outside <= allowed, (name, outside - allowed)
            tree = ast.parse(path.read_text())
            imported = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
            imported |= {(n.module or "").split(".")[0] for n in ast.walk(tree)
                         if isinstance(n, ast.ImportFrom) and not n.level}
            assert not imported & {"sqlite3", "psycopg", "numpy", "langchain_core", "httpx"}, (name, imported)
