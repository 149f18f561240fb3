"""PostgreSQL read replicas (``backend_options={"replica_urls": [...]}``): reads go to a streaming
replica, writes to the primary; a writer reads its own writes; a replica that dies is skipped.

How a test tells where a read ran: replay on the replica is paused (``pg_wal_replay_pause()``), then
a row is written on the primary. A read that does not find the row ran on the replica; one that finds
it ran on the primary.
"""

from __future__ import annotations

import time
import uuid
from typing import Iterator

import pytest

from navi_memory import AsyncMemoryStore, MemoryStore
from navi_memory.errors import ValidationError

from .pg import with_search_path
from .replica import ReplicaPair

pytestmark = [pytest.mark.postgres, pytest.mark.xdist_group("replica")]
U = "alice"


@pytest.fixture(scope="module")
def pair() -> Iterator[ReplicaPair]:
    started = ReplicaPair.start()
    yield started
    started.stop()


@pytest.fixture(autouse=True)
def _no_read_failed_on_a_live_replica(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    """A read on a replica that is up never fails over to the primary (an error of the runner would)."""
    caplog.set_level("INFO", logger="navi_memory.backends.postgres.replicas")
    yield
    failed = [r.getMessage() for r in caplog.get_records("call") if "running it on the primary" in r.getMessage()]
    assert not failed


@pytest.fixture
def urls(pair: ReplicaPair) -> Iterator[tuple[str, str]]:
    """A fresh schema, made on the primary and replayed on the replica: (primary URL, replica URL)."""
    schema = "t_" + uuid.uuid4().hex[:12]
    pair.sql("primary", f"CREATE SCHEMA {schema}")
    MemoryStore.open(with_search_path(pair.url("primary"), schema), embeddings=False).close()  # migrate
    pair.wait_replayed()
    yield with_search_path(pair.url("primary"), schema), with_search_path(pair.url("replica"), schema)
    if pair.sql("replica", "SELECT pg_is_wal_replay_paused()")[0][0]:
        pair.sql("replica", "SELECT pg_wal_replay_resume()")
    pair.sql("primary", f"DROP SCHEMA {schema} CASCADE")


def _open(urls: tuple[str, str], **options: object) -> MemoryStore:
    return MemoryStore.open(urls[0], embeddings=False, backend_options={"replica_urls": [urls[1]], **options})


def _contents(store: MemoryStore) -> set[str]:
    return {item.content for item in store.list_items(user_id=U)}


def _found(store: MemoryStore, words: str) -> set[str]:
    return {hit.content for hit in store.search(words, user_id=U, min_score=0)}


def _write_elsewhere(url: str, content: str) -> None:
    """A write by another process's store (no replicas: this one has no position to wait for)."""
    with MemoryStore.open(url, embeddings=False) as writer:
        writer.add(user_id=U, content=content)


def test_reads_go_to_the_replica_and_writes_to_the_primary(pair, urls):
    with _open(urls) as reader:
        _write_elsewhere(urls[0], "the cat is called Miso")
        pair.wait_replayed()
        assert _contents(reader) == {"the cat is called Miso"}
        pair.sql("replica", "SELECT pg_wal_replay_pause()")
        _write_elsewhere(urls[0], "the dog is called Rex")
        # served by the paused replica: the newer row is not there yet
        assert _contents(reader) == {"the cat is called Miso"}
        assert _found(reader, "Rex dog") == set()
        reader.add(user_id=U, content="the bird is called Kiwi")
        with MemoryStore.open(urls[0], embeddings=False) as primary:
            assert "the bird is called Kiwi" in {i.content for i in primary.list_items(user_id=U)}
        pair.sql("replica", "SELECT pg_wal_replay_resume()")


def test_a_writer_reads_its_own_writes_while_the_replica_lags(pair, urls):
    with _open(urls) as store:
        store.add(user_id=U, content="the cat is called Miso")
        pair.wait_replayed()
        pair.sql("replica", "SELECT pg_wal_replay_pause()")
        store.add(user_id=U, content="the dog is called Rex")
        # the replica has not replayed this write: the reads run on the primary
        assert _contents(store) == {"the cat is called Miso", "the dog is called Rex"}
        assert "the dog is called Rex" in _found(store, "Rex dog")
        pair.sql("replica", "SELECT pg_wal_replay_resume()")
        pair.wait_replayed()
        # caught up: the replica serves again (a row written elsewhere during a new pause stays unseen)
        pair.sql("replica", "SELECT pg_wal_replay_pause()")
        _write_elsewhere(urls[0], "the bird is called Kiwi")
        assert _contents(store) == {"the cat is called Miso", "the dog is called Rex"}
        pair.sql("replica", "SELECT pg_wal_replay_resume()")


async def test_the_async_store_reads_its_own_writes_and_from_the_replica(pair, urls):
    options = {"replica_urls": [urls[1]]}
    async with await AsyncMemoryStore.open(urls[0], embeddings=False, backend_options=options) as store:
        await store.add(user_id=U, content="the cat is called Miso")
        pair.sql("replica", "SELECT pg_wal_replay_pause()")
        await store.add(user_id=U, content="the dog is called Rex")
        assert {i.content for i in await store.list_items(user_id=U)} == {"the cat is called Miso", "the dog is called Rex"}
        pair.sql("replica", "SELECT pg_wal_replay_resume()")
        pair.wait_replayed()
        pair.sql("replica", "SELECT pg_wal_replay_pause()")
        _write_elsewhere(urls[0], "the bird is called Kiwi")
        assert "the bird is called Kiwi" not in {h.content for h in await store.search("Kiwi bird", user_id=U, min_score=0)}
        pair.sql("replica", "SELECT pg_wal_replay_resume()")


def test_a_replica_that_dies_is_skipped_and_retried_later(pair, urls):
    with _open(urls, replica_retry=1.0, replica_timeout=1.0) as store:
        store.add(user_id=U, content="the cat is called Miso")
        pair.wait_replayed()
        assert _contents(store) == {"the cat is called Miso"}  # a pooled connection to the replica now
        pair.stop_replica()
        try:
            # every call succeeds, on the primary: the replica's pooled connection is dead, new ones refused
            for n in range(5):
                store.add(user_id=U, content=f"note {n} while the replica is down")
                assert f"note {n} while the replica is down" in _contents(store)
                assert _found(store, "cat Miso") == {"the cat is called Miso"}
            assert store._backend.replicas.members[0].down_until > 0
        finally:
            pair.start_replica()
        pair.wait_replayed()
        time.sleep(1.1)  # the replica's time out of use is over
        pair.sql("replica", "SELECT pg_wal_replay_pause()")
        _write_elsewhere(urls[0], "the bird is called Kiwi")
        deadline = time.monotonic() + 15
        while "the bird is called Kiwi" in _contents(store):  # on the primary until the replica is back
            assert time.monotonic() < deadline, "reads never went back to the replica"
            time.sleep(0.2)
        pair.sql("replica", "SELECT pg_wal_replay_resume()")



async def test_the_async_store_skips_a_replica_that_dies(pair, urls):
    options = {"replica_urls": [urls[1]], "replica_retry": 30.0, "replica_timeout": 1.0}
    async with await AsyncMemoryStore.open(urls[0], embeddings=False, backend_options=options) as store:
        await store.add(user_id=U, content="the cat is called Miso")
        pair.wait_replayed()
        assert len(await store.list_items(user_id=U)) == 1  # a pooled connection to the replica now
        pair.stop_replica()
        try:
            for n in range(3):
                await store.add(user_id=U, content=f"note {n} while the replica is down")
                assert len(await store.list_items(user_id=U)) == n + 2
                assert {h.content for h in await store.search("cat Miso", user_id=U, min_score=0)} == {
                    "the cat is called Miso"}
            assert store._backend.replicas.members[0].down_until > 0
        finally:
            pair.start_replica()

def test_a_replica_down_when_the_store_opens_is_skipped(pair, urls):
    pair.stop_replica()
    try:
        with _open(urls, replica_timeout=0.5) as store:
            store.add(user_id=U, content="the cat is called Miso")
            assert _contents(store) == {"the cat is called Miso"}
    finally:
        pair.start_replica()


def test_replica_options_are_checked(urls):
    with pytest.raises(ValidationError, match="list of PostgreSQL URLs"):
        MemoryStore.open(urls[0], embeddings=False, backend_options={"replica_urls": urls[1]})
    with pytest.raises(ValidationError, match="PostgreSQL URL"):
        MemoryStore.open(urls[0], embeddings=False, backend_options={"replica_urls": ["sqlite:///x.db"]})


def test_the_replicas_of_navi_memory_url_come_from_the_environment(pair, urls, monkeypatch):
    monkeypatch.setenv("NAVI_MEMORY_URL", urls[0])
    monkeypatch.setenv("NAVI_MEMORY_REPLICA_URLS", f" {urls[1]} ,")
    _write_elsewhere(urls[0], "the cat is called Miso")
    pair.wait_replayed()
    pair.sql("replica", "SELECT pg_wal_replay_pause()")
    _write_elsewhere(urls[0], "the dog is called Rex")
    with MemoryStore.open(embeddings=False) as store:  # served by the paused replica
        assert _contents(store) == {"the cat is called Miso"}
    with MemoryStore.open(urls[0], embeddings=False) as store:  # NAVI_MEMORY_URL given as the URL: the same
        assert _contents(store) == {"the cat is called Miso"}
    other = urls[0].replace("search_path%3D", "search_path%3Dpublic%2C")
    with MemoryStore.open(other, embeddings=False) as store:  # another URL: not its replicas
        assert store._backend.replicas.members == []
    pair.sql("replica", "SELECT pg_wal_replay_resume()")


def test_replica_urls_from_the_environment_need_a_postgresql_url(monkeypatch, tmp_path):
    from navi_memory.errors import ConfigurationError

    monkeypatch.setenv("NAVI_MEMORY_URL", f"sqlite:///{tmp_path}/m.db")
    monkeypatch.setenv("NAVI_MEMORY_REPLICA_URLS", "postgresql://app:secret@replica/db")
    with pytest.raises(ConfigurationError, match="PostgreSQL NAVI_MEMORY_URL"):
        MemoryStore.open(embeddings=False)
    from navi_memory.config import Settings

    assert "secret" not in repr(Settings.from_env())
