"""Write the typed public methods of ``MemoryStore`` and ``AsyncMemoryStore`` from the operations.

Every ``@operation`` generator of the concerns of ``operations.StoreOperations`` becomes one
method per store, with the operation's own signature, docstring and result type (``Op[T]`` -> ``T``)::

    def search(self, query: str | None, *, user_id: str | None = None, ...) -> SearchResults:
        return self._run(self._ops.search.search(query, user_id=user_id, ...))

so IDEs and type checkers see the real API, and the two stores cannot drift apart: both files
are generated from one source. ``--check`` exits 1 when a file is not what this script writes
(run by the test suite), otherwise the files are rewritten.

    python scripts/gen_store_api.py [--check]
"""

from __future__ import annotations

import ast
import inspect
import sys
import textwrap
from pathlib import Path
from typing import Iterator, NamedTuple

from generated_files import write_or_check  # scripts/ is on the path of a script run

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "navi_memory"
# module of navi_memory.operations -> the StoreOperations attribute holding its concern
SOURCES = {"memory": "memory", "themes": "themes", "embedding": "embedding", "search": "search", "facts": "facts", "sessions": "sessions", "persons": "persons", "transfer": "transfer", "keyed": "keyed"}
WIDTH = 118


class Method(NamedTuple):
    module: str
    node: ast.FunctionDef
    doc: str | None


def operations() -> Iterator[Method]:
    """The ``@operation`` generators of each source module, in source order."""
    for module in SOURCES:
        tree = ast.parse((PACKAGE / "operations" / f"{module}.py").read_text())
        for cls in (n for n in tree.body if isinstance(n, ast.ClassDef)):
            for node in cls.body:
                if isinstance(node, ast.FunctionDef) and any(
                        isinstance(d, ast.Name) and d.id == "operation" for d in node.decorator_list):
                    yield Method(module, node, ast.get_docstring(node, clean=False))


def result_type(method: Method) -> ast.expr:
    returns = method.node.returns
    if not (isinstance(returns, ast.Subscript) and isinstance(returns.value, ast.Name) and returns.value.id == "Op"):
        raise SystemExit(f"{method.module}.{method.node.name}: annotate the result as Op[T]")
    return returns.slice


def call_arguments(args: ast.arguments) -> str:
    parts = [a.arg for a in args.posonlyargs + args.args][1:]  # without self
    if args.vararg:
        parts.append(f"*{args.vararg.arg}")
    parts += [f"{a.arg}={a.arg}" for a in args.kwonlyargs]
    if args.kwarg:
        parts.append(f"**{args.kwarg.arg}")
    return ", ".join(parts)


def wrap(head: str, params: list[str], tail: str, indent: str) -> list[str]:
    """``head(params)tail`` on as few lines as fit in WIDTH, continuation lines under the bracket."""
    first = f"{indent}{head}("
    lines, line = [], first
    for i, param in enumerate(params):
        piece = param + (", " if i < len(params) - 1 else tail)
        if line != first and len(line) + len(piece) > WIDTH:
            lines.append(line.rstrip())
            line = " " * len(first)
        line += piece
    return [*lines, line if params else line + tail]


def parameters(args: ast.arguments) -> list[str]:
    """The parameters as source text, PEP 8 spaced (``name: type = default``)."""
    def one(arg: ast.arg, default: ast.expr | None, prefix: str = "") -> str:
        text = prefix + arg.arg + (f": {ast.unparse(arg.annotation)}" if arg.annotation else "")
        if default is not None:
            text += f" = {ast.unparse(default)}" if arg.annotation else f"={ast.unparse(default)}"
        return text

    positional = args.posonlyargs + args.args
    defaults: list[ast.expr | None] = [None] * (len(positional) - len(args.defaults)) + list(args.defaults)
    out = [one(a, d) for a, d in zip(positional, defaults)]
    if args.vararg:
        out.append(one(args.vararg, None, "*"))
    elif args.kwonlyargs:
        out.append("*")
    out += [one(a, d) for a, d in zip(args.kwonlyargs, args.kw_defaults)]
    if args.kwarg:
        out.append(one(args.kwarg, None, "**"))
    return out


def names_used(method: Method) -> set[str]:
    nodes = [method.node.args, result_type(method)]
    return {n.id for root in nodes for n in ast.walk(root) if isinstance(n, ast.Name)}


def _from_store_api(node: ast.ImportFrom) -> tuple[str, int]:
    """(module, level) of an import of ``navi_memory/operations/x.py`` as written in ``navi_memory/store_api.py``."""
    module = node.module or ""
    if node.level == 1:  # a sibling in operations/
        return (f"operations.{module}" if module else "operations", 1)
    return (module, node.level - 1) if node.level else (module, 0)


def import_lines(methods: list[Method]) -> list[str]:
    """``from X import a, b`` for every name the signatures use, from where each source module got it."""
    origin: dict[str, tuple[str, int]] = {}
    for module in SOURCES:
        tree = ast.parse((PACKAGE / "operations" / f"{module}.py").read_text())
        for node in tree.body:
            if isinstance(node, ast.ImportFrom):
                for alias in node.names:
                    origin.setdefault(alias.asname or alias.name, _from_store_api(node))
            elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.ClassDef, ast.FunctionDef)):
                targets = [node.name] if isinstance(node, (ast.ClassDef, ast.FunctionDef)) else [
                    t.id for t in (node.targets if isinstance(node, ast.Assign) else [node.target])
                    if isinstance(t, ast.Name)]
                for name in targets:
                    origin.setdefault(name, (f"operations.{module}", 1))
    builtins = set(dir(__import__("builtins")))
    wanted: dict[tuple[str, int], set[str]] = {}
    for method in methods:
        for name in names_used(method) - builtins - {"self"}:
            if name not in origin:
                raise SystemExit(f"{method.module}.{method.node.name}: cannot tell where {name!r} comes from")
            wanted.setdefault(origin[name], set()).add(name)
    wanted.setdefault(("typing", 0), set()).add("TYPE_CHECKING")
    wanted.setdefault(("sansio", 1), set()).update({"Op", "T"})
    wanted.setdefault(("operations", 1), set()).add("StoreOperations")
    lines: list[str] = []
    for (module, level), names in sorted(wanted.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        if lines and level and not any(line.startswith("from .") for line in lines):
            lines.append("")  # the standard library first, then the package
        text = f"from {'.' * level}{module} import {', '.join(sorted(names))}"
        lines += [text] if len(text) <= WIDTH else wrap(f"from {'.' * level}{module} import ", sorted(names), ")", "")
    return lines


def render(sync: bool) -> str:
    methods = list(operations())
    cls = "MemoryStoreAPI" if sync else "AsyncMemoryStoreAPI"
    flavour = "blocking" if sync else "asyncio"
    out = [
        f'"""The typed public methods of ``{cls[:-3]}`` ({flavour}).',
        "",
        "Generated by scripts/gen_store_api.py from the ``@operation`` generators; do not edit by hand:",
        "change the operation, then run the script (the test suite runs it with ``--check``).",
        '"""',
        "",
        "from __future__ import annotations",
        "",
        *import_lines(methods),
        "",
        "",
        f"class {cls}:",
        f'    """Every operation of the store as a {"plain" if sync else "coroutine"} method."""',
        "",
        "    _ops: StoreOperations",
        "",
        "    if TYPE_CHECKING:",
        f"        {'def' if sync else 'async def'} _run(self, gen: Op[T]) -> T: ...",
    ]
    for method in methods:
        node = method.node
        result = ast.unparse(result_type(method))
        head = f"{'def' if sync else 'async def'} {node.name}"
        out.append("")
        out += wrap(head, parameters(node.args), f") -> {result}:", "    ")
        if method.doc:
            doc = textwrap.indent(inspect.cleandoc(method.doc), " " * 8).lstrip()
            out.append(f'        """{doc}"""')
        call = f"self._ops.{SOURCES[method.module]}.{node.name}({call_arguments(node.args)})"
        body = f"return self._run({call})" if sync else f"return await self._run({call})"
        out += wrap_call(body)
    return "\n".join(out) + "\n"


def wrap_call(body: str) -> list[str]:
    line = " " * 8 + body
    if len(line) <= WIDTH:
        return [line]
    head, _, rest = body.partition("(self._ops.")
    name, _, args = rest.partition("(")
    return wrap(f"{head}(self._ops.{name}", [a.strip() for a in args[:-2].split(", ")], "))", " " * 8)


TARGETS = {True: PACKAGE / "store_api.py", False: PACKAGE / "store_api_async.py"}


def main(argv: list[str] | None = None) -> int:
    return write_or_check("gen_store_api.py", __doc__.splitlines()[0], argv,
                          lambda: {path: render(sync) for sync, path in TARGETS.items()})


if __name__ == "__main__":
    sys.exit(main())
