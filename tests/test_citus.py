"""Citus: the test cluster forms, and ``migrate`` on its coordinator distributes the schema by user
(co-located, the version history a reference table), idempotently, and from an older version.
Then a store works on it end to end (tests/citus.py starts the cluster)."""

from __future__ import annotations

import json
from typing import Any

import psycopg
import pytest

from navi_memory import AsyncMemoryStore, MemoryStore
from navi_memory.cli import main as cli_main
from navi_memory.backends.postgres import citus, schema

from .citus import SETTINGS, cluster_module
from .fakes import FakeClock, FakeEmbeddings
from .helpers import postgres_back_to
from .processes import left_behind

pytestmark = [pytest.mark.citus, pytest.mark.xdist_group("citus")]


def _rows(url: str, statement: str, *params: Any) -> list[tuple[Any, ...]]:
    with psycopg.connect(url, autocommit=True) as conn:
        return conn.execute(statement, params or None).fetchall()


def _placement(url: str) -> dict[str, tuple[str, str | None, int]]:
    """Each table of the URL's schema: its Citus kind, distribution column and co-location group
    ('local' for a table Citus does not know)."""
    rows = _rows(url, "SELECT c.relname, p.partmethod, column_to_column_name(p.logicalrelid, p.partkey),"
                      " p.colocationid FROM pg_class c LEFT JOIN pg_dist_partition p ON p.logicalrelid = c.oid"
                      " WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind = 'r'")
    kinds = {"h": "distributed", "n": "reference", None: "local"}
    return {name: (kinds[method], column or None, group) for name, method, column, group in rows}


def _shards(url: str) -> list[tuple[Any, ...]]:
    return _rows(url, "SELECT s.logicalrelid::text, s.shardid, s.shardminvalue FROM pg_dist_shard s"
                      " JOIN pg_class c ON c.oid = s.logicalrelid WHERE c.relnamespace = current_schema()::regnamespace"
                      " ORDER BY 1, 2")


def _assert_distributed_by_user(url: str) -> None:
    placement = _placement(url)
    users_group = placement["users"][2]
    expected = {name: ("reference", None, placement["navi_schema_migrations"][2]) if name == "navi_schema_migrations"
                else ("distributed", "id" if name == "users" else "user_id", users_group) for name in placement}
    assert placement == expected
    assert set(placement) == set(citus.TABLES)


def test_the_cluster_has_its_workers(citus_server):
    active = _rows(citus_server.url, "SELECT count(*) FROM citus_get_active_worker_nodes()")[0][0]
    if citus_server.cluster is None:
        assert active >= 1
        return
    assert active == len(citus_server.cluster.workers) == 2
    assert _rows(citus_server.url, "SELECT extname FROM pg_extension WHERE extname IN ('citus', 'vector')"
                                   " ORDER BY 1") == [("citus",), ("vector",)]


def test_the_process_check_sees_the_cluster_servers(citus_server):
    """A server a crashed run leaves behind is found (and stopped) by the suite's process check."""
    if citus_server.cluster is None:
        pytest.skip("a cluster of the caller's ($NAVI_MEMORY_TEST_CITUS_URL)")
    found = {proc.pid for proc in left_behind()}
    for node in [citus_server.cluster.coordinator, *citus_server.cluster.workers]:
        pid = int((node.pgdata / "postmaster.pid").read_text().splitlines()[0])
        assert pid in found, node.name


def test_migrate_distributes_every_table_by_user_co_located_with_users(citus_schema_url):
    with MemoryStore.open(citus_schema_url, embeddings=False) as store:
        assert store.backend.distributed
    _assert_distributed_by_user(citus_schema_url)


def test_a_second_migrate_changes_nothing(citus_schema_url):
    with MemoryStore.open(citus_schema_url, embeddings=False) as store:
        before = _placement(citus_schema_url), _shards(citus_schema_url)
        assert store.migrate() == schema.LATEST_VERSION
    with MemoryStore.open(citus_schema_url, embeddings=False) as store:
        assert store.migrate() == schema.LATEST_VERSION
    assert (_placement(citus_schema_url), _shards(citus_schema_url)) == before


def test_a_database_distributed_at_version_1_migrates_to_the_latest(citus_schema_url, monkeypatch):
    """Every later step (new tables with keys to distributed ones, columns, indexes, updates of
    existing rows) runs on distributed tables, and the new tables are distributed too."""
    with monkeypatch.context() as patch:
        patch.setattr(schema, "MIGRATIONS", schema.MIGRATIONS[:1])
        patch.setattr(schema, "LATEST_VERSION", 1)
        with MemoryStore.open(citus_schema_url, embeddings=False, migrate=False) as store:
            assert store.backend.migrate() == 1
    assert {name for name, (kind, _, _) in _placement(citus_schema_url).items() if kind == "distributed"} == \
        {"users", "themes", "items", "facts", "fact_history", "summaries", "session_state", "embeddings"}
    with psycopg.connect(citus_schema_url) as conn:  # what version 1 stored
        conn.execute("INSERT INTO users (id) VALUES ('alice')")
        conn.execute("INSERT INTO themes VALUES ('alice', 'general', 'General', NULL, now(), now())")
        conn.execute("INSERT INTO items (user_id, theme, type, content, created_at, updated_at)"
                     " VALUES ('alice', 'general', 'note', 'the ferry to Bergen', now(), now())")
        conn.execute("INSERT INTO facts (user_id, category, key, value, source, confidence, created_at, updated_at)"
                     " VALUES ('alice', 'profile', 'city', 'Oslo', 'user_explicit', 90, now(),"
                     " now() - interval '1 day')")
    with MemoryStore.open(citus_schema_url, embeddings=FakeEmbeddings()) as store:
        assert store.backend.schema_version() == schema.LATEST_VERSION
        _assert_distributed_by_user(citus_schema_url)
        fact = store.get_fact("city", user_id="alice")
        assert fact.value == "Oslo" and fact.observed_at == fact.updated_at  # version 11 filled it in
        assert [r["content"] for r in store.search("Bergen", user_id="alice")] == ["the ferry to Bergen"]
        store.add_person("Alice", user_id="alice", devices=["kitchen"])  # versions 4 and 10
        store.set_user_timezone("Europe/Oslo", user_id="alice")  # version 8
        store.put_keyed(user_id="alice", namespace=("notes",), key="k", content="kept", ttl_minutes=5)  # 5, 6
        store.add_messages("s1", [{"role": "user", "content": "hello"}], user_id="alice", triggers=False,
                           background=False)  # version 2
        assert store.forget(user_id="alice")["persons"] == 1


def test_a_distributed_database_from_before_version_3_gets_its_full_text_column_and_jsonb_metadata_again(
        citus_schema_url):
    """The steps that rebuild what an old database has: versions 3 and 15 drop and add the generated
    full-text column, version 5 retypes text metadata to jsonb, all on distributed tables."""
    old_tsv = ("setweight(to_tsvector('english', coalesce(title, '')), 'A') || "
               "setweight(to_tsvector('english', content), 'B')")
    with MemoryStore.open(citus_schema_url, embeddings=False) as store:
        store.add(user_id="alice", content="an item from before", metadata={"colour": "red"})
    postgres_back_to(citus_schema_url, 2, "ALTER TABLE items DROP COLUMN content_tsv",
                     "ALTER TABLE items DROP COLUMN context",
                     f"ALTER TABLE items ADD COLUMN content_tsv tsvector GENERATED ALWAYS AS ({old_tsv}) STORED",
                     "DROP INDEX items_metadata_gin", "ALTER TABLE items ALTER COLUMN metadata DROP DEFAULT",
                     "ALTER TABLE items ALTER COLUMN metadata TYPE text USING metadata::text")
    with MemoryStore.open(citus_schema_url, embeddings=False) as store:
        assert store.backend.schema_version() == schema.LATEST_VERSION
        store.add(user_id="alice", content="the ferry to Bergen", context="we talked about fjords")
        assert [r["content"] for r in store.search("fjords", user_id="alice", min_score=0)] == ["the ferry to Bergen"]
        assert [r["content"] for r in store.search("before", user_id="alice", min_score=0,
                                                   filters={"colour": "red"})] == ["an item from before"]
        store.add(user_id="alice", content="dinner at the Café Müller")  # version 15 folds the text
        assert store.backend.fold_text
        assert [r["content"] for r in store.search("muller", user_id="alice", min_score=0)] == ["dinner at the Café Müller"]
    _assert_distributed_by_user(citus_schema_url)


def test_a_coordinator_alone_keeps_local_tables_and_distributes_them_with_their_rows_once_a_worker_joins(
        citus_server, caplog):
    """A coordinator with no node to hold shards migrates like a single PostgreSQL (saying so); the
    first migrate after a worker joins distributes the tables, their rows copied into the shards."""
    if citus_server.cluster is None:
        pytest.skip("starts a cluster of its own: needs the build, not $NAVI_MEMORY_TEST_CITUS_URL")
    alone = cluster_module().CitusCluster.start(workers=0, settings=SETTINGS)
    try:
        with MemoryStore.open(alone.url, embeddings=FakeEmbeddings()) as store:
            assert not store.backend.distributed
            store.add(user_id="alice", content="the ferry to Bergen")
            store.add(user_id="bob", content="chess on Sundays")
        assert "without a node to hold shards" in caplog.text
        assert {kind for kind, _, _ in _placement(alone.url).values()} == {"local"}
        alone.add_worker()
        with MemoryStore.open(alone.url, embeddings=FakeEmbeddings()) as store:
            _assert_distributed_by_user(alone.url)
            assert [r["content"] for r in store.search("Bergen", user_id="alice")] == ["the ferry to Bergen"]
            assert store.count_items(all_users=True) == 2
        # the coordinator's own copies of the rows were emptied: only the shards hold them
        assert _rows(alone.url, "SELECT pg_relation_size('items'), pg_relation_size('users')") == [(0, 0)]
    finally:
        alone.stop()


def test_a_store_works_on_the_cluster(citus_schema_url):
    with MemoryStore.open(citus_schema_url, embeddings=FakeEmbeddings()) as store:
        store.add_note(user_id="alice", content="I love sailing to Bergen on the ferry")
        store.add_note(user_id="alice", content="my cat is called Misu")
        store.add(user_id="bob", content="bob sails the ferry to Bergen too")
        store.add_messages("trip", [{"role": "user", "content": "we leave for Bergen on Friday"},
                                    {"role": "assistant", "content": "have a good trip"}],
                           user_id="alice", triggers=False, background=False)
        turns = [store.add(user_id="alice", content=text, source_ref={"session_id": "dog"}) for text in
                 ("Bob: I have a new puppy called Max.", "Alice: Lovely, what breed is it?", "Bob: A beagle.")]
        nearby = {r.id: r for r in store.search("beagle", user_id="alice")}  # the turn before comes along
        assert nearby[turns[1]].signals["context"] is True and turns[0] not in nearby
        hnsw = _rows(citus_schema_url, "SELECT result FROM run_command_on_shards('embeddings', $$SELECT count(*)"
                                       " FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid JOIN pg_am a"
                                       " ON a.oid = i.relam WHERE x.indrelid = '%s'::regclass AND a.amname = 'hnsw'$$)")
        assert hnsw and set(hnsw) == {("1",)}  # the model's index, made on the distributed table, is on every shard
        found = [r["content"] for r in store.search("ferry to Bergen", user_id="alice")]
        assert found[0] == "I love sailing to Bergen on the ferry" and "bob sails the ferry to Bergen too" not in found
        assert [r["content"] for r in store.search("Misu", user_id="alice", semantic_weight=0)] == \
            ["my cat is called Misu"]
        exported: list[dict] = []
        store.export(exported.append, user_id="alice", with_vectors=True)
        items = [r for r in exported if r.get("type") == "item"]  # the first record is the file's header
        assert len(items) == 5 and all(len(r["embedding"]["vector"]) == 64 for r in items)
        assert sum(r.get("type") == "message" for r in exported) == 2
        store.put_keyed(user_id="alice", namespace=("n",), key="k", content="keyed", ttl_minutes=5)
        assert store.get_keyed(user_id="alice", namespace=("n",), key="k", refresh_ttl=True).content == "keyed"
        assert store.forget(user_id="alice")["items"] == 6
        assert store.search("ferry to Bergen", user_id="alice") == []
        assert [r["content"] for r in store.search("ferry", user_id="bob")] == ["bob sails the ferry to Bergen too"]


async def test_the_async_store_migrates_and_searches_on_the_cluster(citus_schema_url):
    async with await AsyncMemoryStore.open(citus_schema_url, embeddings=FakeEmbeddings()) as store:
        await store.add(user_id="alice", content="the ferry to Bergen")
        assert [r["content"] for r in await store.search("ferry", user_id="alice")] == ["the ferry to Bergen"]
    _assert_distributed_by_user(citus_schema_url)


def _cli(capsys: pytest.CaptureFixture[str], url: str, *args: str) -> str:
    capsys.readouterr()
    assert cli_main(["--db", url, "--embeddings", "none", *args]) == 0, capsys.readouterr().err
    return capsys.readouterr().out


def test_the_commands_over_every_user_fan_out_on_the_cluster(citus_schema_url, capsys, tmp_path):
    """Every shard is read (or written) and the results merged on the coordinator: the admin commands
    and reads over all users, through the store and the command line."""
    clock = FakeClock()
    users = ("alice", "bob", "carol", "dave", "erin")
    with MemoryStore.open(citus_schema_url, embeddings=FakeEmbeddings(), clock=clock) as store:
        for user in users:
            for n in range(3):
                store.add(user_id=user, content=f"{user} takes the ferry to Bergen {n}", source_ref={"session_id": "trip"})
            for n in range(3):  # a cluster of repeated notes for promote
                store.add(user_id=user, content=f"{user} drinks oat milk lattes every morning {'!' * n}",
                          dedup=False)
            store.upsert_fact(user_id=user, category="profile", key="city", value="Bergen")
            store.add_messages("s1", [{"role": "user", "content": "hello"}], user_id=user, triggers=False,
                               background=False)
            store.put_keyed(user_id=user, namespace=("cache",), key="k", content="short-lived", ttl_minutes=1)
            store.backend.record_llm_calls(user, [{"purpose": "summary", "model": "m", "input_tokens": 10,
                                                   "output_tokens": 2, "estimated": False, "ok": True}], clock.now)
        found = store.search("ferry Bergen", all_users=True, limit=50)  # neighbours and cosines of every shard
        assert {r["user_id"] for r in found} == set(users)
        dog = [store.add(user_id="bob", content=text, source_ref={"session_id": "dog"}) for text in
               ("Bob: I have a new puppy called Max.", "Alice: Lovely, what breed is it?", "Bob: A beagle.")]
        nearby = {r.id: r for r in store.search("beagle", all_users=True)}  # the turn before comes along
        assert nearby[dog[1]].signals["context"] is True and dog[0] not in nearby
        store.delete(dog[0], user_id="bob"), store.delete(dog[1], user_id="bob"), store.delete(dog[2], user_id="bob")
        assert store.search("ferry", all_users=True, semantic_weight=0, limit=50)
        assert store.count_items(all_users=True) == 5 * 8  # 3 turns, 3 notes, a fact's copy, a keyed item
        assert len(store.get_all_facts(all_users=True)) == 5
        assert len(store.list_sessions(all_users=True)) == 5
        assert store.embedding_status()["ready"] == 40
        stats = store.usage_stats(all_users=True)
        assert stats["purposes"]["summary"]["calls"] == 5 and len(stats["sessions"]) == 5
        clock.advance(minutes=2)
        assert store.sweep_ttl() == 5  # every user's expired keyed item, in one statement over the shards
    listed = json.loads(_cli(capsys, citus_schema_url, "users", "--json"))
    assert [(u["id"], u["items"], u["facts"]) for u in listed] == [(u, 7, 1) for u in users]
    assert json.loads(_cli(capsys, citus_schema_url, "stats", "--json"))["totals"]["llm_calls"] == 5
    promoted = json.loads(_cli(capsys, citus_schema_url, "promote", "--json"))
    assert (promoted["users"], promoted["facts_added"]) == (5, 10)  # the ferry turns and the lattes notes
    _cli(capsys, citus_schema_url, "export", "--all-users", "-o", str(tmp_path / "all.jsonl"))
    records = [json.loads(line) for line in (tmp_path / "all.jsonl").read_text().splitlines()]
    assert sorted(r["user_id"] for r in records if r.get("type") == "user") == list(users)
    kinds = [r.get("type") for r in records]
    # the turns and notes of each user (a fact's searchable copy travels with its fact), every fact
    assert (kinds.count("item"), kinds.count("fact")) == (5 * 6, 5 + 10)
