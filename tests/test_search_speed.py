"""The faster search paths rank exactly as the full ones: re-ranking on ``rank_rows`` (six columns)
equals re-ranking on whole rows, and the semantic candidates' filter check that stops at k keeps
the best k rows that pass the filters, in order."""

from __future__ import annotations

import numpy as np
import pytest

from navi_memory import MemoryStore
from navi_memory.backends.base import Filters
from navi_memory.retrieval import search as ranking

U = "alice"


def _items(store, clock) -> list[int]:
    ids = []
    for n in range(24):
        kwargs = {"person": ["bob", "carol", None][n % 3]}
        if n % 5 == 0:
            kwargs["observed_at"] = clock.now.replace(year=2024)
        ids.append(store.add(user_id=U, content=f"note {n} about the garden and tea", **kwargs))
        if n % 4 == 0:
            store.pin(ids[-1], user_id=U)
        clock.advance(hours=7 * n)
    return ids


def test_rank_rows_rank_like_whole_rows(store, clock):
    ids = _items(store, clock)
    other = store.add(user_id="bob", content="not alice's")
    backend = store.backend
    slim = backend.rank_rows(U, [*ids, other])
    assert sorted(r["id"] for r in slim) == sorted(ids)  # another user's row is not read
    full = backend.fetch_items(U, ids)
    # equal fused scores in groups of three: the tie-breaks (created_at, id) decide there
    fused = {i: ranking.Fused(score=(n // 3) / 10, raw={"semantic": 0.5}, parts={"semantic": 0.5},
                              signals={"fts": False, "semantic": True, "substring": False, "context": False})
             for n, i in enumerate(ids)}
    for hints, decay in (((), True), (("bob",), True), (("carol",), False)):
        ranked = ranking.order(fused, slim, 10, clock.now, hints, decay)
        assert ranked == ranking.order(fused, full, 10, clock.now, hints, decay)
        page = backend.fetch_items(U, [r.id for r in ranked])
        assert ranking.results(fused, ranked, page) == ranking.finish(fused, full, 10, clock.now, hints, decay)


@pytest.fixture
def sqlite_store(tmp_path, fake_embeddings, clock):
    """The in-memory index and its filter check are SQLite's: this test has no PostgreSQL twin."""
    with MemoryStore.open(f"sqlite:///{tmp_path / 'speed.db'}", embeddings=fake_embeddings, clock=clock) as s:
        yield s


def test_semantic_candidates_skip_filtered_rows_in_order(sqlite_store, clock, fake_embeddings):
    store = sqlite_store
    ids = _items(store, clock)
    query = np.asarray(fake_embeddings.embed_query("garden tea note 3"), dtype=np.float32)
    model = store.embedding_status()["model"]
    filters = Filters(user_id=U, now=clock.now)
    before = [i for i, _ in store.backend.semantic_candidates(filters, model, query, len(ids))]
    assert sorted(before) == sorted(ids)
    for gone in before[:6:2]:  # some of the nearest leave the filter
        store.archive(gone, user_id=U)
    after = store.backend.semantic_candidates(filters, model, query, 5)
    assert [i for i, _ in after] == [i for i in before if i not in before[:6:2]][:5]
