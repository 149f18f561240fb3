"""The ``Backend`` Protocol is complete and true: operations ask only for its methods, and every
backend (SQLite, PostgreSQL blocking and asyncio) has each with the Protocol's parameters. ``Backend``
is the composition of one Protocol per concern, each method in one of them."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

import navi_memory
from navi_memory.backends.base import Backend, FactHistoryRow, FactRow, Filters, ItemRow, RankRow, SharesReads
from navi_memory.backends.sqlite import SQLiteBackend

from .typing_support import PROBES, mypy_report

CONCERNS = [c for c in Backend.__mro__[1:] if c.__module__ == Backend.__module__]
PROTOCOL = {n: f for concern in CONCERNS for n, f in vars(concern).items()
            if inspect.isfunction(f) and not n.startswith("_")}
ATTRIBUTES = {n for concern in CONCERNS for n in getattr(concern, "__annotations__", {})}


def _parameters(fn) -> list[tuple[str, object, object]]:
    sig = inspect.signature(inspect.unwrap(fn))
    return [(p.name, p.kind, p.default) for p in sig.parameters.values()]


def _backend_classes() -> list[type]:
    classes: list[type] = [SQLiteBackend]
    if pytest.importorskip("psycopg", reason="the postgres extra is not installed"):
        from navi_memory.backends.postgres.pool import AsyncPostgresBackend, PostgresBackend

        classes += [PostgresBackend, AsyncPostgresBackend]
    return classes


def _backend_requests(tree: ast.Module) -> set[str]:
    """The methods named by ``db.<method>(...)`` in a module that imports ``db`` from ``calls``."""
    imports_db = any(isinstance(node, ast.ImportFrom) and (node.module or "").endswith("calls")
                     and any(alias.name == "db" for alias in node.names) for node in ast.walk(tree))
    if not imports_db:
        return set()
    return {node.func.attr for node in ast.walk(tree)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Name) and node.func.value.id == "db"}


def test_operations_ask_only_for_protocol_methods():
    package = Path(navi_memory.__file__).parent
    asked = set()
    for path in package.rglob("*.py"):
        asked |= _backend_requests(ast.parse(path.read_text()))
    assert len(asked) > 40 and asked <= set(PROTOCOL), sorted(asked - set(PROTOCOL))


def test_each_method_belongs_to_one_concern_and_backend_adds_none():
    methods = [n for concern in CONCERNS for n, f in vars(concern).items()
               if inspect.isfunction(f) and not n.startswith("_")]
    assert len(CONCERNS) == 9 and len(methods) == len(set(methods)) == len(PROTOCOL) > 70
    assert not [n for n, f in vars(Backend).items() if inspect.isfunction(f) and not n.startswith("_")]


def test_every_backend_declares_the_protocol_attributes():
    assert ATTRIBUTES == {"schema_latest", "has_vector", "vector_error"}
    for cls in _backend_classes():
        assert [a for a in sorted(ATTRIBUTES) if not hasattr(cls, a)] == [], cls.__name__


def test_only_postgresql_sends_reads_together(tmp_path):
    backend = SQLiteBackend(str(tmp_path / "m.db"))
    try:
        assert not isinstance(backend, SharesReads)
    finally:
        backend.close()
    if pytest.importorskip("psycopg", reason="the postgres extra is not installed"):
        from navi_memory.backends.postgres.pool import AsyncPostgresBackend, PostgresBackend

        assert all(issubclass(cls, SharesReads) for cls in (PostgresBackend, AsyncPostgresBackend))


def _keys(row_type: type) -> set[str]:
    return set(row_type.__required_keys__) | set(row_type.__optional_keys__)  # type: ignore[attr-defined]


def test_the_typed_rows_are_the_rows_each_backend_returns(store, clock):
    backend = store.backend
    item_id = store.add(user_id="u1", content="I like green tea")
    keyed = store.put_keyed(user_id="u1", namespace=("prefs",), key="drink", content="green tea", ttl_minutes=5)
    for value in ("green tea", "coffee"):
        store.upsert_fact(user_id="u1", category="preferences", key="drink", value=value)
    items = [backend.get_item("u1", item_id), *backend.list_items(Filters(user_id="u1", now=clock.now), 10, 0),
             *backend.fetch_items("u1", [item_id]), backend.get_keyed("u1", "prefs", "drink", clock.now)]
    assert keyed.id in {row["id"] for row in items}
    assert [sorted(row) for row in items] == [sorted(_keys(ItemRow))] * len(items)
    fact = backend.get_fact("u1", "preferences", "drink")
    facts = [fact, *backend.list_facts("u1", None, 0, "updated_at", True, None, None, clock.now)]
    assert [sorted(row) for row in facts] == [sorted(_keys(FactRow))] * 2
    (earlier,) = backend.fact_history("u1", [fact["id"]])[fact["id"]]
    assert sorted(earlier) == sorted(_keys(FactHistoryRow)) and earlier["value"] == "green tea"
    (ranked,) = backend.rank_rows("u1", [item_id])
    assert sorted(ranked) == sorted(_keys(RankRow))


def test_backend_calls_take_keyword_arguments_only():
    from navi_memory.calls import BackendCall, db

    assert db.get_item(user_id="u", item_id=1) == BackendCall("get_item", {"user_id": "u", "item_id": 1})
    with pytest.raises(TypeError):
        db.get_item("u", 1)  # type: ignore[misc]  # a reordered signature must never swap values


@pytest.mark.parametrize("name", sorted(PROTOCOL))
def test_every_backend_has_the_method_with_the_protocol_parameters(name):
    expected = _parameters(PROTOCOL[name])
    for cls in _backend_classes():
        method = getattr(cls, name, None)
        assert method is not None, f"{cls.__name__} lacks {name}"
        assert _parameters(method) == expected, f"{cls.__name__}.{name}"


@pytest.mark.xdist_group("mypy")  # one mypy run (typing_support): one process
def test_mypy_accepts_the_sqlite_backend_as_a_backend():
    report = mypy_report()
    assert report.errors_of(PROBES / "backend_probe.py") == [], report.out + report.err


@pytest.mark.xdist_group("mypy")  # one mypy run (typing_support): one process
def test_mypy_checks_every_backend_request_against_the_protocol():
    report = mypy_report()
    # every ignore was used (strict warns of an unused one): a wrong name, type or method is an error
    assert report.errors_of(PROBES / "request_probe.py") == [], report.out + report.err
