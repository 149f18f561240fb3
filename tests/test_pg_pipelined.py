"""PostgreSQL: the short reads of one ``at_once`` sent together on one connection (pipeline mode)."""

from __future__ import annotations

import numpy as np
import psycopg
import pytest

from navi_memory import AsyncMemoryStore, MemoryStore
from navi_memory.backends.base import Filters
from navi_memory.backends.postgres import pipelined
from navi_memory.calls import BackendCall
from navi_memory.errors import StorageError
from navi_memory.models import utcnow

pytestmark = pytest.mark.postgres
U = "alice"
TURNS = ["I adopted a grey cat named Miso", "Miso likes the window seat", "we talked about trains",
         "the train to Oslo was late", "coffee with Ana on Sunday", "Ana moved to Bergen"]


def _rows(rng: np.random.Generator) -> list[dict]:
    return [{"user_id": U, "content": text, "embedding": rng.normal(size=16), "person": "Ana" if "Ana" in text else None,
             "source_ref": {"session_id": f"s{n // 2}"}} for n, text in enumerate(TURNS)]


def _page(results) -> list[tuple[int, float]]:
    return [(r.id, round(r.score, 6)) for r in results]


def test_search_finds_the_same_page_with_its_reads_sent_together(pg_url, monkeypatch):
    rng = np.random.default_rng(3)
    with MemoryStore.open(pg_url, embeddings=False, embedding_model="random-16") as store:
        store.add_many(_rows(rng))
        backend, sent = store._backend, []
        real = pipelined.SharedReads._pipelined
        monkeypatch.setattr(pipelined.SharedReads, "_pipelined", lambda self, calls: (
            sent.append([c.method for c in calls]), real(self, calls))[1])
        query = rng.normal(size=16)
        for words in ("Miso the cat", "train Oslo", "Ana"):
            together = _page(store.search(words, user_id=U, query_embedding=query, recency="neutral", min_score=0))
            monkeypatch.setattr(backend, "can_share", lambda method: False)
            apart = _page(store.search(words, user_id=U, query_embedding=query, recency="neutral", min_score=0))
            monkeypatch.delattr(backend, "can_share")
            assert together == apart and together
    # the candidate queries read the cosines, neighbours and re-ranking columns beside their hits:
    # no second round of short reads follows them; the page is fetched beside the user's past
    # statements (superseded turns)
    rounds = [["lexical_hits", "persons_named"], ["fetch_items", "past_statements"]]
    assert sent == rounds * (len(sent) // 2) and sent


def test_a_failing_read_among_shared_ones_reports_its_own_error(pg_url):
    with MemoryStore.open(pg_url, embeddings=False) as store:
        store.add(user_id=U, content="one note")
        filters = Filters(user_id=U, now=utcnow())
        out = store._backend.run_shared([BackendCall("count_items", {"filters": filters}),
                                         BackendCall("get_item", {"user_id": U, "item_id": "not a number"}),
                                         BackendCall("count_items", {"filters": filters})])
        assert out[0] == (1, None) and out[2] == (1, None)
        assert out[1][0] is None and isinstance(out[1][1], StorageError)
        with store._backend.pool.connection() as conn:  # nothing left open on the pooled connections
            assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE


def test_the_semantic_hits_keep_a_connection_of_their_own():
    assert not pipelined.can_share("semantic_hits")
    assert pipelined.can_share("neighbours") and pipelined.can_share("rank_rows")
    assert not pipelined.can_share("insert_items")  # writes keep their transaction


async def test_the_async_store_sends_its_reads_together_with_the_same_page(pg_url, monkeypatch):
    rng = np.random.default_rng(3)
    store = await AsyncMemoryStore.open(pg_url, embeddings=False, embedding_model="random-16")
    try:
        await store.add_many(_rows(rng))
        backend, sent = store._backend, []
        real = pipelined.AsyncSharedReads._pipelined

        async def spy(self, calls):
            sent.append([c.method for c in calls])
            return await real(self, calls)

        monkeypatch.setattr(pipelined.AsyncSharedReads, "_pipelined", spy)
        query = rng.normal(size=16)
        together = _page(await store.search("Miso the cat", user_id=U, query_embedding=query, recency="neutral"))
        monkeypatch.setattr(backend, "can_share", lambda method: False)
        apart = _page(await store.search("Miso the cat", user_id=U, query_embedding=query, recency="neutral"))
        assert together == apart and together and sent
        out = await backend.run_shared([BackendCall("get_item", {"user_id": U, "item_id": "not a number"}),
                                        BackendCall("count_items", {"filters": Filters(user_id=U, now=utcnow())})])
        assert isinstance(out[0][1], StorageError) and out[1] == (len(TURNS), None)
    finally:
        await store.close()
