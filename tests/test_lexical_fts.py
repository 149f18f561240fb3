"""SQLite's lexical candidates: the narrow FTS5 query (the best k, then the filter check) returns what
the wide one returns, ties and filtered-out rows included; ``lexical_row_budget`` (approximate, off by
default) ranks only rows holding the rarest terms, on the same scores."""

from __future__ import annotations

from typing import Iterator

import pytest

from navi_memory import MemoryStore
from navi_memory.backends.base import Filters
from navi_memory.backends.sqlite.search import filter_sql
from navi_memory.retrieval.query import fts5_or_expression


def _wide(backend, filters: Filters, terms: list[str], k: int) -> list[tuple[int, float]]:
    """The query used before the narrow one: rank, join the best max(4k, 200), else rank all."""
    where, params = filter_sql(filters)
    sql = ("SELECT i.id, f.rank FROM (SELECT rowid, bm25(items_fts, 2.0, 1.0, 0.3) AS rank FROM items_fts"
           " WHERE items_fts MATCH ? ORDER BY rank LIMIT ?) f JOIN items i ON i.id = f.rowid"
           f" WHERE {where} ORDER BY f.rank LIMIT ?")
    expression = fts5_or_expression(terms)
    with backend._transaction(write=False) as conn:
        rows = conn.execute(sql, [expression, max(4 * k, 200), *params, k]).fetchall()
        if len(rows) < k:
            rows = conn.execute(sql, [expression, -1, *params, k]).fetchall()
    return [(r[0], -float(r[1])) for r in rows]


def _open(tmp_path, clock, **options) -> MemoryStore:
    return MemoryStore.open(f"sqlite:///{tmp_path / 'lexical.db'}", embeddings=False, clock=clock,
                            backend_options=options or None)


@pytest.fixture
def filled(tmp_path, clock) -> Iterator[MemoryStore]:
    store = _open(tmp_path, clock)
    for n in range(40):  # same length, same hits: equal bm25 scores, so ties decide the order
        store.add(user_id="alice", content=f"tea garden w{n}", dedup=False)
    for n in range(12):  # better scores, another user: the narrow query's best rows fail the filter
        store.add(user_id="bob", content=f"tea tea garden garden w{n}", dedup=False)
    for n in range(6):
        store.add(user_id="alice", content=f"quince tea w{n}", dedup=False)
    store.add(user_id="alice", content='a "quoted" quince', dedup=False)
    yield store
    store.close()


def test_narrow_query_equals_wide_one(filled, clock):
    backend = filled.backend
    for user in ("alice", "bob", "nobody"):
        filters = Filters(user_id=user, now=clock.now)
        for terms in (["tea", "garden"], ["quince"], ["garden", "quince", "w3"]):
            for k in (1, 5, 12, 45, 100):
                for rate in (1.0, 0.0):  # the narrow path, and the wide one taken after misses
                    backend._narrow_rate = rate
                    assert backend.lexical_candidates(filters, terms, k) == _wide(backend, filters, terms, k)


def test_narrow_query_skips_archived_rows(filled, clock):
    backend, filters = filled.backend, Filters(user_id="alice", now=clock.now)
    before = backend.lexical_candidates(filters, ["quince", "tea"], 5)
    filled.archive(before[0][0], user_id="alice")
    after = backend.lexical_candidates(filters, ["quince", "tea"], 5)
    assert after == _wide(backend, filters, ["quince", "tea"], 5)
    assert before[0][0] not in [i for i, _ in after]


def test_misses_turn_to_the_wide_query_then_back(filled, clock):
    backend = filled.backend
    backend._narrow_rate = 1.0
    for _ in range(10):  # bob's rows are tea's best: alice's narrow query misses
        backend.lexical_candidates(Filters(user_id="alice", now=clock.now), ["tea"], 3)
    assert backend._narrow_rate <= 0.5
    for _ in range(30):
        backend.lexical_candidates(Filters(user_id="bob", now=clock.now), ["tea"], 3)
    assert backend._narrow_rate > 0.5


def test_row_budget_ranks_rows_of_the_rare_terms_on_every_term(filled, tmp_path, clock):
    filled.close()
    exact_store = _open(tmp_path, clock)
    budget_store = _open(tmp_path, clock, lexical_row_budget=10)
    try:
        filters = Filters(user_id="alice", now=clock.now)
        terms = ["tea", "quince", 'quoted"']  # a quote in a term stays a literal
        exact = dict(exact_store.backend.lexical_candidates(filters, terms, 100))
        cut = budget_store.backend.lexical_candidates(filters, terms, 100)
        quince = {i for i, _ in exact_store.backend.lexical_candidates(filters, ["quince"], 100)}
        assert {i for i, _ in cut} == quince  # tea (46 rows) is over the budget
        assert all(score == exact[i] for i, score in cut)  # scored on tea as well
        assert exact_store.backend.lexical_row_budget is None
    finally:
        exact_store.close()
        budget_store.close()
