"""A new database gets its schema quickly and exactly as the migrations would build it: SQLite
replays the schema the first new database was migrated to (``fresh_schema``), PostgreSQL sends a
new schema's steps in one round trip."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import psycopg
import pytest

from navi_memory import MemoryStore
from navi_memory.backends.sqlite import fresh_schema, lexicon
from navi_memory.backends.sqlite.runner import register
from navi_memory.backends.sqlite.schema import LATEST_VERSION

from .pg import PostgresServer


def catalogue(path: Path) -> list[tuple[str, ...]]:
    conn = sqlite3.connect(path)
    try:
        rows = conn.execute("SELECT type, name, tbl_name, coalesce(sql, '') FROM sqlite_master").fetchall()
        return sorted(tuple(row) for row in rows)
    finally:
        conn.close()


def migrated_step_by_step(path: Path) -> Path:
    conn = sqlite3.connect(path, isolation_level=None)
    register(conn)
    lexicon.register(conn)
    conn.execute("BEGIN")
    conn.execute(fresh_schema.CREATE_VERSIONS_TABLE)
    fresh_schema.apply_migrations(conn, set())
    conn.execute("COMMIT")
    conn.close()
    return path


def versions(path: Path) -> list[int]:
    conn = sqlite3.connect(path)
    try:
        return [row[0] for row in conn.execute("SELECT version FROM schema_migrations ORDER BY version")]
    finally:
        conn.close()


def test_new_sqlite_databases_get_the_schema_the_migrations_build(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    reference = catalogue(migrated_step_by_step(tmp_path / "reference.db"))
    MemoryStore.open(f"sqlite:///{tmp_path / 'first.db'}", embeddings=False).close()
    assert fresh_schema._learned.get("schema"), "the first new database taught the schema"

    def no_steps(*_: object) -> None:
        raise AssertionError("a new database after the first is not migrated step by step")

    monkeypatch.setattr(fresh_schema, "apply_migrations", no_steps)
    with MemoryStore.open(f"sqlite:///{tmp_path / 'second.db'}", embeddings=False) as store:
        store.add(user_id="u1", content="I take the 8:15 train")  # tables, triggers and full text work
        assert [r.content for r in store.search("train", user_id="u1")] == ["I take the 8:15 train"]
    assert catalogue(tmp_path / "first.db") == reference
    assert catalogue(tmp_path / "second.db") == reference
    assert versions(tmp_path / "second.db") == list(range(1, LATEST_VERSION + 1))


def test_a_database_with_tables_of_its_own_or_an_old_schema_is_migrated_step_by_step(tmp_path: Path):
    reference = catalogue(migrated_step_by_step(tmp_path / "reference.db"))
    shared = tmp_path / "shared.db"
    conn = sqlite3.connect(shared)
    conn.execute("CREATE TABLE notes (body TEXT)")
    conn.commit()
    conn.close()
    MemoryStore.open(f"sqlite:///{shared}", embeddings=False).close()
    assert [row for row in catalogue(shared) if row[1] != "notes"] == reference
    # a database at version 1 gets the later versions' steps, not the new schema on top of its own
    old = tmp_path / "old.db"
    conn = sqlite3.connect(old, isolation_level=None)
    register(conn)
    lexicon.register(conn)
    conn.execute(fresh_schema.CREATE_VERSIONS_TABLE)
    fresh_schema.apply_migrations(conn, set(range(2, LATEST_VERSION + 1)))
    conn.close()
    assert versions(old) == [1]
    MemoryStore.open(f"sqlite:///{old}", embeddings=False).close()
    assert catalogue(old) == reference
    assert versions(old) == list(range(1, LATEST_VERSION + 1))


def test_a_schema_that_does_not_replay_is_never_used(tmp_path: Path):
    conn = sqlite3.connect(migrated_step_by_step(tmp_path / "a.db"))
    register(conn)
    lexicon.register(conn)
    assert fresh_schema._replayable(conn)
    # a table whose stored statement no longer creates it as it stands (as if its text were edited)
    conn.execute("PRAGMA writable_schema = ON")
    conn.execute("UPDATE sqlite_master SET sql = replace(sql, 'CREATE TABLE', 'CREATE TEMP TABLE')"
                 " WHERE name = 'summaries'")
    conn.commit()
    conn.close()
    conn = sqlite3.connect(tmp_path / "a.db")
    register(conn)
    lexicon.register(conn)
    assert fresh_schema._replayable(conn) is None
    conn.close()
    # nor one whose statements fail to replay (here: an index on a function only that database knows)
    conn = sqlite3.connect(migrated_step_by_step(tmp_path / "b.db"))
    register(conn)
    lexicon.register(conn)
    conn.create_function("only_here", 1, lambda text: text, deterministic=True)
    conn.execute("CREATE INDEX users_only_here ON users (only_here(id))")
    assert fresh_schema._replayable(conn) is None
    conn.close()


@pytest.mark.postgres
@pytest.mark.parametrize("prepare", ["", "&prepare_threshold=0"], ids=["default", "every-statement-prepared"])
def test_a_new_postgres_schema_is_made_in_few_round_trips(postgres_server: PostgresServer,
                                                          monkeypatch: pytest.MonkeyPatch, prepare: str):
    url = postgres_server.fresh_schema_url() + prepare
    sent: list[str] = []
    execute = psycopg.Cursor.execute

    def counted(self: psycopg.Cursor, query: object, *args: object, **kwargs: object) -> object:
        sent.append(str(query))
        return execute(self, query, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(psycopg.Cursor, "execute", counted)
    with MemoryStore.open(url, embeddings=False) as store:
        assert store.backend.schema_version() == LATEST_VERSION
        store.add(user_id="u1", content="I take the 8:15 train")
        assert [r.content for r in store.search("train", user_id="u1")] == ["I take the 8:15 train"]
    # every version's steps once, in one statement (they were about 100 round trips)
    steps = [text for text in sent if "CREATE TABLE IF NOT EXISTS items" in text]
    assert len(steps) == 1 and "INSERT INTO navi_schema_migrations" in steps[0]
    assert len(sent) < 40, sent
    postgres_server.drop_schema(url.removesuffix(prepare))
