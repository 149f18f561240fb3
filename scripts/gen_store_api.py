"""Write the typed public methods of ``MemoryStore`` and ``AsyncMemoryStore`` from the operations.

Every ``@operation`` generator of the concerns of ``operations.StoreOperations`` becomes one
method per store, with the operation's own signature, docstring and result type (``Op[T]`` -> ``T``)::

    def search(self, query: str | None, *, user_id: str | None = None, ...) -> SearchResults:
        return self._run(self._ops.search.search(query, user_id=user_id, ...))

so IDEs and type checkers see the real API, and the two stores cannot drift apart: both files
are generated from one source. Two typing-only files come from the same sources:
``integrations/_store_calls.py`` (``StoreCalls``: each operation recorded by the adapters'
``store_call`` as a ``StoreCall`` of its result type) and ``backends/async_base.py``
(``AsyncBackend``: the ``Backend`` Protocol with every method a coroutine, the type of
``AsyncMemoryStore.backend``). ``--check`` exits 1 when a file is not what this script writes
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


def import_lines(methods: list[Method], depth: int = 0, runner: bool = True, base: str = "") -> list[str]:
    """``from X import a, b`` for every name the signatures use, from where each source module got it;
    a name a module imports in a top-level ``if`` (``Unpack``: ``typing``'s from Python 3.11, else
    only for type checkers) comes with that ``if`` as written. ``depth``: how many folders below
    ``navi_memory/`` the generated file is; ``runner``: with what the store classes' ``_run`` needs;
    ``base``: an import line of the generated class's base class."""
    origin: dict[str, tuple[str, int]] = {}
    conditional: dict[str, ast.If] = {}
    for module in SOURCES:
        tree = ast.parse((PACKAGE / "operations" / f"{module}.py").read_text())
        for node in tree.body:
            if isinstance(node, ast.If):  # ``if TYPE_CHECKING:``, a Python version: every branch's imports
                for statement in (n for n in ast.walk(node) if isinstance(n, ast.ImportFrom)):
                    for alias in statement.names:
                        conditional.setdefault(alias.asname or alias.name, node)
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
    blocks: dict[str, ast.If] = {}
    for method in methods:
        for name in names_used(method) - builtins - {"self"}:
            if name in conditional:
                blocks.setdefault(ast.unparse(conditional[name]), conditional[name])
            elif name in origin:
                wanted.setdefault(origin[name], set()).add(name)
            else:
                raise SystemExit(f"{method.module}.{method.node.name}: cannot tell where {name!r} comes from")
    wanted.setdefault(("typing", 0), set()).add("TYPE_CHECKING")
    if runner:
        wanted.setdefault(("sansio", 1), set()).update({"Op", "T"})
        wanted.setdefault(("operations", 1), set()).add("StoreOperations")
    else:
        wanted[("typing", 0)].add("Protocol")
    tested = {n.id for block in blocks.values() for n in ast.walk(block.test) if isinstance(n, ast.Name)}
    lines: list[str] = ["import sys"] if "sys" in tested else []
    placed = [(module, level + depth if level else 0, names) for (module, level), names in wanted.items()]
    for module, level, names in sorted(placed, key=lambda found: (min(found[1], 1), found[0])):
        if lines and level and not any(line.startswith("from .") for line in lines):
            lines.append("")  # the standard library first, then the package
        head = f"from {'.' * level}{module} import "
        text = head + ", ".join(sorted(names))
        lines += [text] if len(text) <= WIDTH else wrap(head, sorted(names), ")", "")
    if not runner:  # the recorded call's type, from a sibling of the generated file
        lines.append("from ._recorded import StoreCall")
    if base:
        lines.append(base)
    for text in blocks:
        lines += ["", *text.splitlines()]
    return lines


def module_head(doc: list[str], imports: list[str]) -> list[str]:
    """A generated module's docstring (``doc``, its lines) and imports, up to its first class."""
    return [f'"""{doc[0]}', *doc[1:], '"""', "", "from __future__ import annotations", "", *imports, "", ""]


# Each flavour's methods in two files (each under the 600 lines of a module): the items, their
# vectors and search, and the keyed items, in the store's class; what the store keeps beside them
# (themes, facts, conversations, persons, export) in the class it inherits from.
PARTS = {"": ("memory", "embedding", "search", "keyed"),
         "_knowledge": ("themes", "facts", "sessions", "persons", "transfer")}


if sorted(m for part in PARTS.values() for m in part) != sorted(SOURCES):
    raise SystemExit("every operations module of SOURCES goes in exactly one of PARTS")


def class_name(sync: bool, part: str) -> str:
    return ("" if sync else "Async") + ("MemoryStoreAPI" if part == "" else "KnowledgeAPI")


def render(sync: bool, part: str = "") -> str:
    methods = [m for m in operations() if m.module in PARTS[part]]
    cls = class_name(sync, part)
    flavour = "blocking" if sync else "asyncio"
    store = ("" if sync else "Async") + "MemoryStore"
    base = class_name(sync, "_knowledge") if part == "" else ""
    title = (f"The typed public methods of ``{store}`` ({flavour})" if part == "" else
             f"The typed public methods of ``{store}`` ({flavour}): themes, facts, conversations, persons, export")
    imports = import_lines(methods, base=f"from .store_api_knowledge{'' if sync else '_async'} import {base}"
                                         if base else "")
    out = [
        *module_head([f"{title}.", "",
                      "Generated by scripts/gen_store_api.py from the ``@operation`` generators; do not edit by hand:",
                      "change the operation, then run the script (the test suite runs it with ``--check``)."],
                     imports),
        f"class {cls}{f'({base})' if base else ''}:",
        f'    """{"The items, search and keyed" if part == "" else "The themes, facts, conversations, persons and export"} '
        f'operations of the store as {"plain" if sync else "coroutine"} methods'
        f'{" (the others: its base class)" if base else ""}."""',
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


def render_calls() -> str:
    """``StoreCalls``: what ``integrations._caller.store_call`` is to a type checker, each operation
    with its own parameters giving a ``StoreCall`` of its result type."""
    methods = list(operations())
    out = [
        *module_head(["``StoreCalls``: the type of ``store_call`` (``integrations._caller``), the store's operations "
                      "recorded.", "",
                      "``store_call.search(query, user_id=...)`` is checked against ``MemoryStore.search`` and is a",
                      "``StoreCall[SearchResults]``, which ``StoreCaller.call`` / ``acall`` runs on either store.",
                      "Generated by scripts/gen_store_api.py from the ``@operation`` generators; do not edit by hand."],
                     import_lines(methods, depth=1, runner=False)),
        "class StoreCalls(Protocol):",
        '    """Every operation of the store, recorded as a ``StoreCall`` of its result type."""',
    ]
    for method in methods:
        out.append("")
        out += wrap(f"def {method.node.name}", parameters(method.node.args),
                    f") -> StoreCall[{ast.unparse(result_type(method))}]: ...", "    ")
    return "\n".join(out) + "\n"


class _BareGenerics(ast.NodeTransformer):
    """``dict`` -> ``dict[Any, Any]`` (what a bare ``dict`` means), so the generated file passes
    ``mypy --strict`` whatever ``base.py`` spells."""

    def visit_Subscript(self, node: ast.Subscript) -> ast.AST:
        node.slice = self.visit(node.slice)  # the subscripted name itself stays
        return node

    def visit_Name(self, node: ast.Name) -> ast.AST:
        if node.id == "dict":
            return ast.Subscript(value=node, slice=ast.Tuple([ast.Name("Any"), ast.Name("Any")]))
        return node


def render_async_backend() -> str:
    """``AsyncBackend``: the ``Backend`` Protocol of ``backends/base.py`` (every concern it composes)
    with each method a coroutine, as ``AsyncMemoryStore.backend`` is."""
    tree = ast.parse((PACKAGE / "backends" / "base.py").read_text())
    classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
    concerns = [b.id for b in classes["Backend"].bases if isinstance(b, ast.Name) and b.id != "Protocol"]
    body: list[str] = []
    used: set[str] = set()
    for concern in concerns:
        body += ["", f"    # {concern}"]
        for node in classes[concern].body:
            if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                body.append(f"    {node.target.id}: {ast.unparse(node.annotation)}")
                used |= {n.id for n in ast.walk(node.annotation) if isinstance(n, ast.Name)}
            elif isinstance(node, ast.FunctionDef):
                node = _BareGenerics().visit(node)
                result = ast.unparse(node.returns) if node.returns else "None"
                body += wrap(f"async def {node.name}", parameters(node.args), f") -> {result}: ...", "    ")
                used |= {n.id for root in (node.args, node.returns) if root is not None
                         for n in ast.walk(root) if isinstance(n, ast.Name)}
    wanted: dict[tuple[int, str], set[str]] = {(0, "typing"): {"Protocol"}}  # (group, module) -> names
    plain_imports: list[str] = []
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and ({a.asname or a.name for a in node.names} & used):
            group = 2 if node.level else 0
            wanted.setdefault((group, "." * node.level + (node.module or "")), set()).update(
                {a.asname or a.name for a in node.names} & used)
        elif isinstance(node, ast.Import):
            plain_imports += [f"import {a.name}" + (f" as {a.asname}" if a.asname else "")
                              for a in node.names if (a.asname or a.name) in used]
    wanted.setdefault((2, ".base"), set()).update(used & set(classes))
    lines: list[str] = [f"from {m} import {', '.join(sorted(n))}" for (g, m), n in sorted(wanted.items()) if g == 0]
    lines += ["", *plain_imports] if plain_imports else []
    lines.append("")
    for (group, module), names in sorted(wanted.items()):
        text = f"from {module} import {', '.join(sorted(names))}"
        if group == 2:
            lines += [text] if len(text) <= WIDTH else wrap(f"from {module} import ", sorted(names), ")", "")
    return "\n".join([
        *module_head(["``AsyncBackend``: the ``Backend`` Protocol (``backends/base.py``) as the asyncio backends "
                      "have it,", "every method a coroutine with the same parameters; what ``AsyncMemoryStore.backend`` is.",
                      "", "Generated by scripts/gen_store_api.py from ``backends/base.py``; do not edit by hand: "
                      "change the", "Protocol there, then run the script (the test suite runs it with ``--check``)."],
                     lines),
        "class AsyncBackend(Protocol):",
        '    """``Backend`` awaited: ``await store.backend.schema_version()`` on an ``AsyncMemoryStore``."""',
        *body,
    ]) + "\n"


TARGETS = {(sync, part): PACKAGE / f"store_api{part}{'' if sync else '_async'}.py" for sync in (True, False)
           for part in PARTS}
ASYNC_BACKEND = PACKAGE / "backends" / "async_base.py"
CALLS = PACKAGE / "integrations" / "_store_calls.py"


def main(argv: list[str] | None = None) -> int:
    return write_or_check("gen_store_api.py", __doc__.splitlines()[0], argv,
                          lambda: {**{path: render(sync, part) for (sync, part), path in TARGETS.items()},
                                   ASYNC_BACKEND: render_async_backend(), CALLS: render_calls()})


if __name__ == "__main__":
    sys.exit(main())
