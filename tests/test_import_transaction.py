"""An import is one transaction: a database failure half-way through writes nothing, ``id_map``
hears only of committed items, and running the import again afterwards completes it once.

The failure is real: a trigger in the test database refuses one row late in the file (as a full
disk or a lost server would, after earlier batches went in)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import psycopg
import pytest

from navi_memory import AsyncMemoryStore, MemoryStore, StorageError

from .fakes import FakeEmbeddings

POISON = "note 150"  # the 151st of 200 items: three batches of 50 are in before it fails


@pytest.fixture
def source(new_db_url) -> list[dict]:
    """The export of user u1: 200 notes (some pinned), a summary and a session."""
    with MemoryStore.open(new_db_url(), embeddings=FakeEmbeddings()) as store:
        store.add_many([{"user_id": "u1", "content": f"note {n}", "pinned": n % 7 == 0} for n in range(200)])
        store.set_summary("u1 likes ferries.", user_id="u1")
        store.add_messages("s1", [{"role": "user", "content": "hello"}], user_id="u1", background=False)
        records: list[dict] = []
        store.export(records.append, user_id="u1", with_vectors=True)
        return records


def poison(backend_name: str, db_url: str, tmp_path: Path, on: bool = True, table: str = "items",
           column: str = "content", value: str = POISON) -> None:
    """Make the database refuse a row of ``table`` whose ``column`` is ``value`` (default: the
    item ``POISON``), or stop refusing it."""
    if backend_name == "sqlite":
        conn = sqlite3.connect(tmp_path / "memory.db", isolation_level=None)
        conn.execute("DROP TRIGGER IF EXISTS poison")
        if on:
            conn.execute(f"CREATE TRIGGER poison BEFORE INSERT ON {table} WHEN NEW.{column} = '{value}'"
                         " BEGIN SELECT RAISE(ABORT, 'device is full (test)'); END")
        conn.close()
        return
    with psycopg.connect(db_url, autocommit=True) as conn:
        conn.execute(f"DROP TRIGGER IF EXISTS poison ON {table}")
        if on:
            conn.execute("CREATE OR REPLACE FUNCTION poison() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
                         f" IF NEW.{column} = '{value}' THEN RAISE EXCEPTION 'device is full (test)'; END IF;"
                         " RETURN NEW; END $$")
            conn.execute(f"CREATE TRIGGER poison BEFORE INSERT ON {table} FOR EACH ROW EXECUTE FUNCTION poison()")


def test_a_database_failure_half_way_writes_nothing(source, store, dump, backend_name, db_url, tmp_path):
    store.add(user_id="u2", content="already here")
    poison(backend_name, db_url, tmp_path)
    before = dump()
    told: list[tuple] = []
    with pytest.raises(StorageError, match="device is full"):
        store.import_records(source, user_map={"u1": "u2"}, batch_size=50,
                             id_map=lambda *ids: told.append(ids))
    assert dump() == before
    assert told == []  # id_map only hears of committed items
    assert [i.content for i in store.list_items(user_id="u2", limit=500)] == ["already here"]

    poison(backend_name, db_url, tmp_path, on=False)
    first = store.import_records(source, user_map={"u1": "u2"}, batch_size=50, id_map=lambda *ids: told.append(ids))
    again = store.import_records(source, user_map={"u1": "u2"}, batch_size=50)
    assert first.added["item"] == 200 and len(told) == 200
    assert not again.added.get("item") and again.skipped["item"] == 200
    assert len(store.list_items(user_id="u2", limit=500)) == 201
    hits = store.search("note 150", user_id="u2", limit=3)
    assert hits and hits[0]["content"] == "note 150"


async def test_the_async_import_is_one_transaction_too(source, db_url, dump, backend_name, tmp_path):
    store = await AsyncMemoryStore.open(db_url, embeddings=FakeEmbeddings())
    try:
        await store.add(user_id="u1", content="already here")
        poison(backend_name, db_url, tmp_path)
        before = dump()
        with pytest.raises(StorageError, match="device is full"):
            await store.import_records(source, batch_size=50)
        assert dump() == before
        poison(backend_name, db_url, tmp_path, on=False)
        report = await store.import_records(source, batch_size=50)
        assert report.added["item"] == 200 and report.embedded == 0  # vectors came with the file
        assert len(await store.list_items(user_id="u1", limit=500)) == 201
    finally:
        await store.close()


def test_imported_items_are_embedded_after_the_commit(source, db_url):
    without_vectors = [{**r, "embedding": None} if r.get("type") == "item" else r for r in source]
    with MemoryStore.open(db_url, embeddings=FakeEmbeddings()) as store:
        report = store.import_records(without_vectors, batch_size=50)
        assert report.added["item"] == 200 and report.embedded == 200 and report.embed_failed == 0
        items = store.list_items(user_id="u1", limit=500)
        assert len(items) == 200 and {i.embedding.state for i in items} == {"ready"}
        # (which notes a fake embedder's approximate index returns is not the point: that it answers is)
        assert any(hit.signals["semantic"] for hit in store.search("note 42", user_id="u1", limit=10))


KILLED_IMPORT = """
import sys, time
from navi_memory import MemoryStore
from tests.fakes import FakeEmbeddings

embedder = FakeEmbeddings()  # the model the test's store has (the class names it)
first = embedder.embed_documents

def stalls(texts):
    if embedder.document_calls:  # the second batch: the test kills the import here
        print("embedding", flush=True)
        time.sleep(120)
    return first(texts)

embedder.embed_documents = stalls
with MemoryStore.open(sys.argv[1], embeddings=embedder) as store:
    store.import_file(sys.argv[2], batch_size=50)
"""


def test_an_import_killed_while_embedding_is_resumed_by_the_next(source, db_url, tmp_path):
    """A real process killed after the commit, while embedding (the second of seven batches): its
    rows stay pending; importing the file again adds nothing and embeds them (it said "embedded 0")."""
    import json
    import os
    import signal
    import subprocess
    import sys

    path = tmp_path / "u1.jsonl"
    path.write_text("".join(json.dumps({**r, "embedding": None} if r.get("type") == "item" else r) + "\n"
                            for r in source))
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    proc = subprocess.Popen([sys.executable, "-c", KILLED_IMPORT, db_url, str(path)], stdout=subprocess.PIPE,
                            env=env, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "embedding\n"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    with MemoryStore.open(db_url, embeddings=FakeEmbeddings()) as store:
        states = [i.embedding.state for i in store.list_items(user_id="u1", limit=500)]
        assert len(states) == 200 and states.count("ready") == 32 and states.count("pending") == 168
        report = store.import_file(path, batch_size=50)
        assert not report.added.get("item") and report.skipped["item"] == 200
        assert report.embedded == 168 and report.embed_failed == 0
        assert {i.embedding.state for i in store.list_items(user_id="u1", limit=500)} == {"ready"}


def test_rows_an_embedder_failed_mid_import_are_embedded_by_the_next_import(source, db_url):
    without_vectors = [{**r, "embedding": None} if r.get("type") == "item" else r for r in source]
    embedder = FakeEmbeddings()
    with MemoryStore.open(db_url, embeddings=embedder) as store:
        real = embedder.embed_documents

        def failing_after_two(texts):
            if embedder.document_calls >= 2:
                embedder.fail = True
            return real(texts)

        embedder.embed_documents = failing_after_two  # type: ignore[method-assign]
        first = store.import_records(without_vectors, batch_size=50)
        assert first.added["item"] == 200 and first.embedded == 64 and first.embed_failed == 136
        embedder.fail = False
        embedder.embed_documents = real  # type: ignore[method-assign]
        again = store.import_records(without_vectors, batch_size=50)
        assert again.embedded == 136 and again.embed_failed == 0
        assert {i.embedding.state for i in store.list_items(user_id="u1", limit=500)} == {"ready"}


def test_the_merge_of_facts_on_file_is_part_of_the_import_transaction(store, new_db_url, dump, backend_name,
                                                                        db_url, tmp_path):
    """A fact the store holds already takes the file's statements inside the import's transaction:
    a failure while merging them (here the history row of the older value is refused) writes
    nothing of the import, neither the new rows nor a part of the merge; the import run again
    completes it once."""
    from datetime import datetime, timezone

    moved, lived = datetime(2024, 11, 1, tzinfo=timezone.utc), datetime(2024, 10, 1, tzinfo=timezone.utc)
    store.upsert_fact(user_id="u1", category="profile", key="location", value="Munich", observed_at=moved)
    with MemoryStore.open(new_db_url(), embeddings=FakeEmbeddings()) as other:
        other.upsert_fact(user_id="u1", category="profile", key="location", value="Berlin", observed_at=lived)
        other.upsert_fact(user_id="u1", category="profile", key="name", value="Tomas")
        other.add(user_id="u1", content="packed the boxes for the move")
        records: list[dict] = []
        other.export(records.append, user_id="u1")
    poison(backend_name, db_url, tmp_path, table="fact_history", column="value", value="Berlin")
    before = dump()
    with pytest.raises(StorageError, match="device is full"):
        store.import_records(records)
    assert dump() == before  # no new fact, item or summary, and Munich untouched
    poison(backend_name, db_url, tmp_path, on=False, table="fact_history")
    report = store.import_records(records)
    assert (report.merged, report.added.get("fact"), report.added.get("item")) == (1, 1, 1)
    location = store.get_fact("location", user_id="u1")
    assert location.value == "Munich" and [(h.value, h.valid_from) for h in location.history] == [("Berlin", lived)]
    again = store.import_records(records)
    assert (again.merged, again.added.get("fact"), again.added.get("item")) == (0, None, None)
    assert "Munich" in store.get_summary(user_id="u1") and "Tomas" in store.get_summary(user_id="u1")
