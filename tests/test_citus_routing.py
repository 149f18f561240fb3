"""Citus: every statement a per-user call sends reaches one shard. Each statement the store's connections
execute during the call is planned again under EXPLAIN on the coordinator, with the same parameters:
Citus's plan says how many tasks (shard queries) it runs, which must be one, with no subplan gathered
on the coordinator first; a statement naming no distributed table (a lock, a read of the catalogue)
runs on the coordinator alone."""

from __future__ import annotations

import re
from contextlib import contextmanager
from typing import Any, Iterator

import numpy as np
import psycopg
import pytest
from psycopg import sql
from psycopg.rows import dict_row

from navi_memory import MemoryStore
from navi_memory.backends.base import Filters
from navi_memory.retrieval.search import WEIGHTED_K
from navi_memory.backends.postgres.pool import iter_once
from navi_memory.backends.postgres.sql import Q, adapt_vectors

from .fakes import FakeClock, FakeEmbeddings

# db_url: a schema of the cluster's pool (tests/conftest.py)
pytestmark = [pytest.mark.citus, pytest.mark.xdist_group("citus"),
              pytest.mark.parametrize("backend_name", ["citus"], indirect=True)]

PLANNED = ("SELECT", "WITH", "INSERT", "UPDATE", "DELETE")


@contextmanager
def statements_sent() -> Iterator[list[tuple[Any, Any]]]:
    """Every (statement, parameters) the blocking psycopg cursors execute meanwhile, pipelined ones too
    (``Connection.execute`` runs a cursor's); an ``executemany`` as its first parameter set."""
    sent: list[tuple[Any, Any]] = []
    execute, executemany = psycopg.Cursor.execute, psycopg.Cursor.executemany

    def recording_execute(self: Any, query: Any, params: Any = None, **kwargs: Any) -> Any:
        sent.append((query, params))
        return execute(self, query, params, **kwargs)

    def recording_executemany(self: Any, query: Any, params_seq: Any, **kwargs: Any) -> Any:
        params_seq = list(params_seq)
        sent.append((query, params_seq[0] if params_seq else None))
        return executemany(self, query, params_seq, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(psycopg.Cursor, "execute", recording_execute)
        patch.setattr(psycopg.Cursor, "executemany", recording_executemany)
        yield sent


def _text(query: Any, conn: psycopg.Connection) -> str:
    return query.as_string(conn) if isinstance(query, sql.Composable) else \
        query.decode() if isinstance(query, bytes) else str(query)


def shard_tasks(url: str, sent: list[tuple[Any, Any]]) -> list[tuple[str, list[int], bool]]:
    """For each statement of ``sent`` that a plan can be asked of: its text, the task count of each
    Citus scan of its plan (none: the coordinator alone) and whether it has a subplan. Planned with
    its parameters bound, as the store's statements run (Citus prunes shards by their values)."""
    out = []
    with psycopg.connect(url, row_factory=dict_row) as conn:
        adapt_vectors(conn)
        for query, params in sent:
            text = _text(query, conn)
            if text.lstrip().upper().startswith(PLANNED):
                plan = "\n".join(row["QUERY PLAN"] for row in conn.execute(
                    sql.SQL("EXPLAIN {}").format(sql.SQL(text)), params).fetchall())  # type: ignore[arg-type]
                conn.rollback()
                out.append((text, [int(n) for n in re.findall(r"Task Count: (\d+)", plan)],
                            "Distributed Subplan" in plan))
    return out


def assert_one_shard(url: str, sent: list[tuple[Any, Any]]) -> int:
    """Every statement of ``sent`` runs one task and no subplan, or stays on the coordinator;
    returns how many reached a shard."""
    planned = shard_tasks(url, sent)
    spread = [(text, tasks) for text, tasks, subplan in planned if subplan or any(n != 1 for n in tasks)]
    assert not spread, "statements not routed to one shard:\n" + "\n".join(f"{t} -> tasks {n}" for t, n in spread)
    return sum(bool(tasks) for _, tasks, _ in planned)


@pytest.fixture
def cluster_store(db_url: str) -> Iterator[MemoryStore]:
    """A store on the cluster whose other users' rows lie in other shards (so a statement not limited
    to one user would show more than one task)."""
    with MemoryStore.open(db_url, embeddings=FakeEmbeddings(), clock=FakeClock()) as store:
        for user in ("bob", "carol", "dave", "erin", "frank"):
            store.add(user_id=user, content=f"{user} takes the ferry to Bergen", source_ref={"session_id": "s"})
            store.upsert_fact(user_id=user, category="profile", key="city", value="Bergen")
        store.add_messages("trip", [{"role": "user", "content": "we leave for Bergen on Friday"}],
                           user_id="alice", triggers=False, background=False)
        yield store


def _routed(url: str, call: Any) -> int:
    with statements_sent() as sent:
        call()
    assert sent, "the call sent no statement"
    return assert_one_shard(url, sent)


def test_the_search_statements_of_one_user_route_to_one_shard(cluster_store, db_url):
    url, store = db_url, cluster_store
    for text in ("Bob: I have a new puppy called Max.", "Alice: Lovely, what breed is it?",
                 "Bob: A beagle, she loves the ferry."):
        store.add(user_id="alice", content=text, source_ref={"session_id": "dog"})
    # the person names, full text and vectors with their neighbours and cosines beside, the page and the
    # past statements beside it
    assert _routed(url, lambda: store.search("beagle ferry", user_id="alice")) >= 4
    assert _routed(url, lambda: store.search("beagle", user_id="alice", semantic_weight=0, context_weight=0)) >= 2
    assert _routed(url, lambda: store.search("zzqx", user_id="alice")) >= 2  # substrings, when nothing else


def test_the_item_fact_session_and_keyed_statements_of_one_user_route_to_one_shard(cluster_store, db_url):
    url, store = db_url, cluster_store
    made: dict[str, Any] = {}
    assert _routed(url, lambda: made.update(item=store.add(user_id="alice", content="the ferry to Bergen",
                                                           source_ref={"session_id": "trip"})))
    assert _routed(url, lambda: store.get(made["item"], user_id="alice"))
    assert _routed(url, lambda: store.list_items(user_id="alice", limit=5))
    assert _routed(url, lambda: store.count_items(user_id="alice"))
    assert _routed(url, lambda: store.update(made["item"], user_id="alice", content="the night ferry to Bergen"))
    assert _routed(url, lambda: store.upsert_fact(user_id="alice", category="profile", key="city", value="Oslo"))
    assert _routed(url, lambda: store.upsert_fact(user_id="alice", category="profile", key="city", value="Bergen"))
    assert _routed(url, lambda: store.get_fact("city", user_id="alice"))
    assert _routed(url, lambda: store.get_all_facts(user_id="alice"))
    assert _routed(url, lambda: store.add_messages("trip", [{"role": "user", "content": "the boat leaves at 8"}],
                                                   user_id="alice", triggers=False, background=False))
    assert _routed(url, lambda: store.get_session("trip", user_id="alice"))
    assert _routed(url, lambda: store.list_sessions(user_id="alice"))
    assert _routed(url, lambda: store.usage_stats(user_id="alice"))
    assert _routed(url, lambda: store.sweep_ttl(user_id="alice"))
    assert _routed(url, lambda: store.promote(user_id="alice"))
    assert _routed(url, lambda: store.export(lambda record: None, user_id="alice", with_vectors=True))
    assert _routed(url, lambda: store.set_summary("Alice travels by ferry.", user_id="alice"))
    assert _routed(url, lambda: store.put_keyed(user_id="alice", namespace=("prefs",), key="drink", content="tea",
                                                ttl_minutes=5))
    assert _routed(url, lambda: store.get_keyed(user_id="alice", namespace=("prefs",), key="drink",
                                                refresh_ttl=True))
    assert _routed(url, lambda: store.list_namespaces(user_id="alice"))
    assert _routed(url, lambda: store.delete_keyed(user_id="alice", namespace=("prefs",), key="drink"))
    assert _routed(url, lambda: store.add_person("Bob Smith", user_id="alice", aliases=["Bobby"]))
    assert _routed(url, lambda: store.list_persons(user_id="alice"))
    assert _routed(url, lambda: store.delete(made["item"], user_id="alice"))
    assert _routed(url, lambda: store.forget(user_id="alice"))
    assert store.count_items(user_id="bob") == 2  # a note and the fact's searchable copy


def test_the_statements_moving_one_user_to_a_new_model_route_to_one_shard(cluster_store, db_url):
    url, new = db_url, FakeEmbeddings("model-new", 48)
    with MemoryStore.open(url, embeddings=new, previous_embeddings=cluster_store.embedder.provider,
                          clock=FakeClock()) as store:
        for text in ("the ferry leaves at dawn", "the harbour master waves"):
            store.add(user_id="alice", content=text)  # the user's model read, the old model's vectors
        assert _routed(url, lambda: store.search("ferry", user_id="alice")) >= 3
        # the job's per-user statements (its report then counts the users left: over every user)
        db, model, made = store.backend, store.embedding_model, {}
        assert _routed(url, lambda: made.update(rows=db.pending_next(model=model, user_id="alice", limit=10,
                                                                     after_id=0)))
        vectors = new.embed_documents([text for _, _, text in made["rows"]])
        assert _routed(url, lambda: db.store_next_embeddings(
            model=model, results=[(*r, np.array(v, dtype=np.float32)) for r, v in zip(made["rows"], vectors)],
            now=FakeClock()()))
        assert _routed(url, lambda: db.cut_over(user_id="alice", model=model, now=FakeClock()())) >= 3
        assert db.serving_model(user_id="alice") == model
        assert _routed(url, lambda: store.search("ferry", user_id="alice")) >= 3


def test_a_statement_over_every_user_is_seen_to_fan_out(cluster_store, db_url):
    """The check itself: a call over all users shows its statement's several tasks."""
    with statements_sent() as sent:
        cluster_store.count_items(all_users=True)
    (tasks,) = [tasks for _, tasks, _ in shard_tasks(db_url, sent)]
    assert len(tasks) == 1 and tasks[0] > 1  # one task per shard (citus.shard_count)


def test_the_vector_index_settings_of_a_search_reach_the_worker(cluster_store):
    """A semantic statement's SET LOCAL (``hnsw.ef_search``) must reach the worker that runs it: Citus
    sends SET LOCAL to the workers only under ``citus.propagate_set_commands = 'local'``, which the
    statement's settings include (before it, every worker searched with pgvector's default of 40)."""
    backend = cluster_store._backend
    local = backend._index_settings(300, False)
    rows = backend._run(lambda: iter_once(Q("SELECT current_setting('hnsw.ef_search', true) AS v FROM users"
                                            " WHERE id = %s", ["bob"], local=local)), True)
    assert rows == [{"v": "300"}]


def test_a_user_with_few_of_a_shards_vectors_is_compared_exactly_at_once(db_url):
    """On a shard a user's rows are a larger share than of a whole table, and the worker's planner
    picks the HNSW scan, which then finds none of a small user's: the store reads the shards' own
    statistics and sends the exact statement first. One statement, the same hits."""
    with MemoryStore.open(db_url, embeddings=FakeEmbeddings(), clock=FakeClock()) as store:
        store.add_many([{"user_id": f"user{n:03d}", "content": f"user {n} takes the ferry {m}"}
                        for n in range(200) for m in range(3)])
        store.add_many([{"user_id": "big", "content": f"big note {n} about the ferry"} for n in range(400)])
        with psycopg.connect(db_url, autocommit=True) as conn:
            conn.execute("ANALYZE embeddings")
        db, model = store.backend, store.embedding_model
        query = np.array(FakeEmbeddings().expected("the ferry"), dtype=np.float32)

        def candidates(user: str) -> tuple[list[str], list[int]]:
            with statements_sent() as sent:
                hits = db.semantic_hits(filters=Filters(user_id=user, now=FakeClock()()), model=model, query=query,
                                        k=WEIGHTED_K)
            with psycopg.connect(db_url) as conn:
                return [_text(statement, conn) for statement, _ in sent], [i for i, _ in hits.scored]

        candidates("user007")  # the shards' statistics read once
        small, hits = candidates("user007")
        assert len(small) == 1 and "(e.embedding <=> %s::vector)" in small[0]  # exact, nothing before it
        assert len(hits) == 3
        large, hits = candidates("big")  # most of its shard: the index serves it
        assert "(e.embedding <=> %s::vector)" not in " ".join(large) and len(hits) == WEIGHTED_K
