"""The conftest of a LangGraph test suite run against NaviStore (copied in as ``tests/conftest.py``).

It puts ``navi_shims``' classes where the suite imports LangGraph's stores from, and gives the
names the PostgreSQL suite imports from its own conftest (the server to make databases on, the
vector types, the embeddings); its ``clear_test_db`` fixture has nothing to clear (every store
lives in a database of its own).
"""

from __future__ import annotations

import os

import pytest

import navi_shims
from tests.embed_test_utils import CharacterEmbeddings

import langgraph.store.memory
import langgraph.store.postgres
import langgraph.store.postgres.aio
import langgraph.store.postgres.base
import langgraph.store.sqlite
import langgraph.store.sqlite.aio

for _module, _names in ((langgraph.store.memory, ["InMemoryStore"]),
                        (langgraph.store.sqlite, ["SqliteStore", "AsyncSqliteStore"]),
                        (langgraph.store.sqlite.aio, ["AsyncSqliteStore"]),
                        (langgraph.store.postgres, ["PostgresStore", "AsyncPostgresStore"]),
                        (langgraph.store.postgres.aio, ["AsyncPostgresStore"])):
    for _name in _names:
        setattr(_module, _name, getattr(navi_shims, _name))

DEFAULT_URI = os.environ.get("NAVI_CONFORMANCE_POSTGRES_URL", "")
DEFAULT_POSTGRES_URI = DEFAULT_URI.rsplit("/", 1)[0] + "/"
VECTOR_TYPES = ["vector", "halfvec"]

__all__ = ["CharacterEmbeddings", "DEFAULT_URI", "DEFAULT_POSTGRES_URI", "VECTOR_TYPES"]


@pytest.fixture(autouse=True)
def clear_test_db() -> None:
    """Every store here has a database of its own: nothing to clear."""


@pytest.fixture
def fake_embeddings() -> CharacterEmbeddings:
    return CharacterEmbeddings(dims=500)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """``NAVI_CONFORMANCE_ONE_CONNECTION_KIND=1``: of the PostgreSQL suite's ``store`` fixture
    kinds (``default``, ``pipe``, ``pool``: LangGraph's connection settings, which the shims take
    and ignore, so the three build the same NaviStore) run ``default`` only."""
    if os.environ.get("NAVI_CONFORMANCE_ONE_CONNECTION_KIND") != "1":
        return
    kept, dropped = [], []
    for item in items:
        kind = getattr(getattr(item, "callspec", None), "params", {}).get("store")
        (dropped if kind in ("pipe", "pool") else kept).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept
