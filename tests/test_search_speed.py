"""The faster search paths rank exactly as the full ones: re-ranking on ``rank_rows`` (six columns)
equals re-ranking on whole rows; what the candidate queries read beside their hits (``Beside``)
gives the page that separate reads after them give; and the semantic candidates' filter check that
stops at k keeps the best k rows that pass the filters, in order."""

from __future__ import annotations

import numpy as np
import pytest

from navi_memory import MemoryStore
from navi_memory.backends.base import Beside, Filters
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


def _session_turns(store, clock) -> list[int]:
    """Turns of three sessions (neighbours for smoothing), one archived, one of another theme."""
    words = ["the garden needs tea roses", "we planted roses by the gate", "tea with Ana at noon",
             "Ana brought mint for the garden", "the gate squeaks again", "roses and mint tea"]
    ids = []
    for n in range(18):
        ids.append(store.add(user_id=U, content=f"{words[n % 6]} ({n})", person=["Ana", None][n % 2],
                             theme="home" if n % 7 else "work", source_ref={"session_id": f"s{n // 6}"}))
        clock.advance(hours=n)
    store.archive(ids[4], user_id=U)  # a neighbour the filters reject
    return ids


def test_reads_beside_the_hits_give_the_page_of_reads_after_them(store, clock, monkeypatch):
    _session_turns(store, clock)
    for n in range(6):  # another user's conversation, with the same session ids: searched by all_users only
        store.add(user_id="bob", content=f"bob's roses and tea by the gate ({n})", source_ref={"session_id": f"s{n // 3}"})
    backend = store.backend
    pages = []
    for searches in ("beside", "after"):
        if searches == "after":  # the candidate queries return their hits alone: the search reads the rest
            lexical, semantic = backend.lexical_hits, backend.semantic_hits
            monkeypatch.setattr(backend, "lexical_hits", lambda filters, terms, k, beside: lexical(filters, terms, k))
            monkeypatch.setattr(backend, "semantic_hits",
                                lambda filters, model, query, k, beside: semantic(filters, model, query, k))
            monkeypatch.setattr(backend, "can_share", lambda method: False, raising=False)
        pages.append([[(r.id, round(r.score, 9), sorted(r.signals.items()))
                       for r in store.search(query, **{"user_id": U, **kwargs})]
                      for query in ("garden roses", "tea with Ana", "gate")
                      for kwargs in ({}, {"fusion": "rrf"}, {"min_similarity": 0.2}, {"context_weight": 0},
                                     {"theme": "home"}, {"person": "Ana", "limit": 3},
                                     {"user_id": None, "all_users": True})])
    assert pages[0] == pages[1]
    assert any(len(page) > 1 for page in pages[0])
    assert any(r.content.startswith("bob's") for r in store.search("roses tea gate", all_users=True, limit=20))


def test_hits_read_neighbours_that_pass_the_filters(store, clock, fake_embeddings):
    ids = _session_turns(store, clock)
    model = store.embedding_status()["model"]
    query = np.asarray(fake_embeddings.embed_query("gate"), dtype=np.float32)
    filters = Filters(user_id=U, now=clock.now)
    beside = Beside(model=model, query=query, neighbours=True)
    for kind, hits in (("lexical", store.backend.lexical_hits(filters, ["gate"], 10, beside)),
                       ("semantic", store.backend.semantic_hits(filters, model, query, 10, beside))):
        found = [i for i, _ in hits.scored]
        assert found and ids[4] not in found
        if hits.rows is None:  # SQLite reads them after, in process
            assert hits.neighbours is None and not hits.cosines
            continue
        assert {r["id"] for r in hits.rows} >= set(found)
        expected = store.backend.neighbours(filters, found)
        assert {i: sorted(n) for i, n in hits.neighbours.items()} == {i: sorted(n) for i, n in expected.items()}
        assert all(ids[4] not in n for n in hits.neighbours.values())
        cosines = store.backend.semantic_scores(filters, model, query, found)
        if kind == "lexical":
            assert hits.cosines == pytest.approx(cosines)
        else:  # the scores are the cosines
            assert not hits.cosines and dict(hits.scored) == pytest.approx(cosines)


@pytest.fixture
def sqlite_store(tmp_path, fake_embeddings, clock):
    """The in-memory index and its filter check are SQLite's: this test has no PostgreSQL twin."""
    with MemoryStore.open(f"sqlite:///{tmp_path / 'speed.db'}", embeddings=fake_embeddings, clock=clock) as s:
        yield s


def test_semantic_hits_skip_filtered_rows_in_order(sqlite_store, clock, fake_embeddings):
    store = sqlite_store
    ids = _items(store, clock)
    query = np.asarray(fake_embeddings.embed_query("garden tea note 3"), dtype=np.float32)
    model = store.embedding_status()["model"]
    filters = Filters(user_id=U, now=clock.now)
    before = [i for i, _ in store.backend.semantic_hits(filters, model, query, len(ids)).scored]
    assert sorted(before) == sorted(ids)
    for gone in before[:6:2]:  # some of the nearest leave the filter
        store.archive(gone, user_id=U)
    after = store.backend.semantic_hits(filters, model, query, 5).scored
    assert [i for i, _ in after] == [i for i in before if i not in before[:6:2]][:5]
