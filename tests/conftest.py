"""Shared fixtures. Every store fixture runs once per backend listed in ``BACKENDS``."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterator

import pytest

from navi_memory import MemoryStore, Settings

from .fakes import FakeClock, FakeEmbeddings

# The one place to add backends: e.g.
#   pytest.param("postgres", id="postgres", marks=pytest.mark.postgres)
# and teach ``backend_url`` below how to make an empty database for it.
BACKENDS = [pytest.param("sqlite", id="sqlite")]


def backend_url(name: str, tmp_path: Path) -> str:
    if name == "sqlite":
        return f"sqlite:///{tmp_path}/memory.db"
    raise ValueError(f"no test database for backend {name!r}")


@pytest.fixture(autouse=True)
def _hermetic_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """The store reads NAVI_MEMORY_* and OLLAMA_HOST; tests must not depend on the caller's shell."""
    for name in list(os.environ):
        if name.startswith("NAVI_MEMORY_") or name in ("OLLAMA_HOST", "EMBEDDING_OLLAMA_HOST",
                                                       "EMBEDDING_OLLAMA_API_KEY"):
            monkeypatch.delenv(name, raising=False)


@pytest.fixture(params=BACKENDS)
def backend_name(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def db_url(backend_name: str, tmp_path: Path) -> str:
    return backend_url(backend_name, tmp_path)


@pytest.fixture
def db_path(backend_name: str, tmp_path: Path) -> Path:
    """The SQLite file, for tests that check rows directly with sqlite3."""
    if backend_name != "sqlite":
        pytest.skip("inspects the SQLite file directly")
    return tmp_path / "memory.db"


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def fake_embeddings() -> FakeEmbeddings:
    return FakeEmbeddings()


@pytest.fixture
def settings(db_url: str) -> Settings:
    return Settings(url=db_url)


@pytest.fixture
def store(db_url: str, fake_embeddings: FakeEmbeddings, clock: FakeClock) -> Iterator[MemoryStore]:
    s = MemoryStore.open(db_url, embeddings=fake_embeddings, clock=clock)
    yield s
    s.close()


@pytest.fixture
def lexical_store(db_url: str, clock: FakeClock) -> Iterator[MemoryStore]:
    s = MemoryStore.open(db_url, embeddings=False, clock=clock)
    yield s
    s.close()
