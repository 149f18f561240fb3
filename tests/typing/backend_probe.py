"""Checked by mypy (tests/test_backend_protocol.py): the SQLite backend is a ``Backend``, and the rows
the Protocol returns are typed (each ignore below must be used: mypy objects to the line)."""

from navi_memory.backends.base import Backend
from navi_memory.backends.sqlite import SQLiteBackend


def sqlite_is_a_backend(backend: SQLiteBackend) -> Backend:
    return backend


def item_title(backend: Backend) -> str | None:
    row = backend.get_item(user_id="u1", item_id=1)
    return None if row is None else row["title"]


def misspelt_item_column(backend: Backend) -> object:
    row = backend.get_item(user_id="u1", item_id=1)
    return None if row is None else row["titel"]  # type: ignore[typeddict-item]


def fact_value(backend: Backend) -> int:
    row = backend.get_fact(user_id="u1", category="profile", key="name")
    return 0 if row is None else row["value"]  # type: ignore[return-value]  # a str
