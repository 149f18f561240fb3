"""Shared fixtures. Every store fixture runs once per backend listed in ``BACKENDS``."""

from __future__ import annotations

import gc
import os
from pathlib import Path
from typing import Callable, Iterator

import onnxruntime  # noqa: F401  before usearch: loaded after it, onnxruntime >= 1.23 crashes (navi_memory.ann)
import pytest
from hypothesis import HealthCheck, settings as hypothesis_settings

from navi_memory import MemoryStore, Settings

from .citus import CitusServer
from .fakes import FakeClock, FakeEmbeddings
from .helpers import dump_tables, sqlite_connections_used
from .pg import PostgresServer, SchemaPool, dump_schema
from .pgbouncer import pgbouncer_server, pooled_url  # noqa: F401  (fixtures)
from .processes import describe, interrupt_on_sigterm, left_behind, stop

# Every hypothesis test generates the same examples on every run (derandomize: the seed comes from
# the test's own code), so the suite never fails by chance; a failure prints its reproduce blob.
# Loaded here, before the test modules build their @settings on top of it. HYPOTHESIS_PROFILE=default
# explores with random seeds (and the example database) instead, for a local hunt.
hypothesis_settings.register_profile("navi-memory", derandomize=True, database=None, deadline=None,
                                     print_blob=True, suppress_health_check=[HealthCheck.too_slow])
hypothesis_settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "navi-memory"))

# The one place to add backends. PostgreSQL runs against $NAVI_MEMORY_TEST_POSTGRES_URL when set,
# else a throwaway PostgreSQL 16 + pgvector started from the `pgserver` package; each test gets
# its own schema (search_path), so tests never see each other's rows.
BACKENDS = [
    pytest.param("sqlite", id="sqlite"),
    pytest.param("postgres", id="postgres", marks=pytest.mark.postgres),
]
# The third backend, for the tests of modules marked ``on_citus``: the same behaviour on a Citus
# coordinator with two workers (tests/citus.py), each test in a schema distributed by user.
CITUS = pytest.param("citus", id="citus", marks=[pytest.mark.citus, pytest.mark.xdist_group("citus")])


def backend_url(name: str, tmp_path: Path) -> str:
    if name == "sqlite":
        return f"sqlite:///{tmp_path}/memory.db"
    raise ValueError(f"no file-based test database for backend {name!r}")


@pytest.hookimpl(tryfirst=True)
def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """A test taking a backend in a module (or class) marked ``on_citus`` runs on the cluster too: its
    backends given as a parametrize mark before pytest reads the marks (and skips the fixture's own
    params). A test parametrizing ``backend_name`` itself keeps its choice."""
    if "backend_name" not in metafunc.fixturenames or metafunc.definition.get_closest_marker("on_citus") is None:
        return
    if any("backend_name" in str(mark.args[0]) for mark in metafunc.definition.iter_markers("parametrize")):
        return
    metafunc.definition.add_marker(pytest.mark.parametrize("backend_name", [*BACKENDS, CITUS], indirect=True))


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    """The run is over: Python's exit would still walk the whole heap of a full run (about 3 GB)
    for reference cycles, which took ~110 s of a 27-minute run; frozen objects are left to the exit.
    Every teardown and the process check have run by now; atexit handlers still run."""
    gc.freeze()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    """A test marked ``before_the_database`` (tests/bad_input_support.py) runs on SQLite only because
    what it rejects never reaches a database: its body must open no connection."""
    if item.get_closest_marker("before_the_database") is None:
        return (yield)
    with sqlite_connections_used() as used:
        result = yield
    assert not used, (f"{item.nodeid} reached the database ({len(used)} connection uses): run it on every "
                      "backend (drop @before_the_database)")
    return result


@pytest.fixture(scope="session", autouse=True)
def _no_process_left_behind() -> Iterator[None]:
    """Set up before every other fixture, so this check runs after all their teardowns: anything
    the session started (a subprocess, a worker, a pgserver PostgreSQL) and left running is stopped
    and the session fails, naming it."""
    interrupt_on_sigterm()
    yield
    try:
        leftovers = left_behind()
    except ImportError:  # psutil comes with pgserver (the dev extra); without it there is nothing to find
        return
    if leftovers:
        names = describe(leftovers)
        stop(leftovers)
        raise AssertionError(f"processes left running after the test session (now stopped): {names}")


@pytest.fixture(autouse=True)
def _hermetic_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """The store reads NAVI_MEMORY_* and OLLAMA_HOST; tests must not depend on the caller's shell."""
    for name in list(os.environ):
        if name.startswith("NAVI_MEMORY_") or name in ("OLLAMA_HOST", "OLLAMA_API_KEY", "EMBEDDING_OLLAMA_HOST",
                                                       "EMBEDDING_OLLAMA_API_KEY"):
            monkeypatch.delenv(name, raising=False)
    # chat calls retried on transient errors do so at once in tests (the default first wait is 1 s)
    monkeypatch.setenv("NAVI_MEMORY_CHAT_RETRY_WAIT", "0")


@pytest.fixture(params=BACKENDS)
def backend_name(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    server = PostgresServer.start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def citus_server() -> Iterator[CitusServer]:
    """A Citus coordinator with two workers (tests/citus.py): mark the test ``citus`` and put it in
    ``xdist_group("citus")``, so one test process starts one cluster."""
    server = CitusServer.start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def citus_url(citus_server: CitusServer) -> str:
    """The coordinator's URL (its default schema, shared by every test of the session)."""
    return citus_server.url


@pytest.fixture(scope="session")
def citus_pool(citus_server: CitusServer) -> Iterator[SchemaPool]:
    """Distributed schemas reused test after test, emptied between (the ``citus`` backend parameter)."""
    pool = SchemaPool(citus_server)
    yield pool
    pool.close()


@pytest.fixture
def citus_schema_url(citus_server: CitusServer) -> Iterator[str]:
    """A fresh schema on the coordinator, dropped afterwards (with its distributed tables)."""
    url = citus_server.fresh_schema_url()
    yield url
    citus_server.drop_schema(url)


@pytest.fixture(scope="session")
def postgres_pool(postgres_server: PostgresServer) -> Iterator[SchemaPool]:
    """Migrated schemas reused test after test, emptied between (the ``postgres`` backend parameter)."""
    pool = SchemaPool(postgres_server)
    yield pool
    pool.close()


@pytest.fixture
def pg_url(postgres_server: PostgresServer) -> Iterator[str]:
    """A fresh schema of the test server nobody used, dropped afterwards."""
    url = postgres_server.fresh_schema_url()
    yield url
    postgres_server.drop_schema(url)


def server_database(backend_name: str, request: pytest.FixtureRequest) -> tuple[str, Callable[[], None]] | None:
    """A fresh database of a server backend, and what drops it (or gives it back to the pool);
    None for SQLite, whose databases are files."""
    if backend_name in ("postgres", "citus"):
        pool = request.getfixturevalue(f"{backend_name}_pool")
        url = pool.take()
        return url, lambda: pool.give_back(url)
    return None


@pytest.fixture
def db_url(backend_name: str, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[str]:
    made = server_database(backend_name, request)
    if made is None:
        yield backend_url(backend_name, tmp_path)
        return
    url, release = made
    yield url
    release()


@pytest.fixture
def new_db_url(backend_name: str, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Callable[[], str]]:
    """A factory of fresh, empty databases of the current backend (for tests needing two)."""
    releases: list[Callable[[], None]] = []
    files = 0

    def make() -> str:
        nonlocal files
        made = server_database(backend_name, request)
        if made is None:
            files += 1
            folder = tmp_path / f"db{files - 1}"
            folder.mkdir()
            return backend_url(backend_name, folder)
        releases.append(made[1])
        return made[0]

    yield make
    for release in releases:
        release()


@pytest.fixture
def dump(backend_name: str, db_url: str, tmp_path: Path) -> Callable[[], dict]:
    """A function returning every row of every table of the test database (sorted), for
    before/after comparisons on any backend."""
    if backend_name == "sqlite":
        return lambda: dump_tables(tmp_path / "memory.db")
    return lambda: dump_schema(db_url)


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
