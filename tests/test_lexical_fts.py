"""SQLite's lexical candidates: the narrow FTS5 query (the best k, then the filter check) returns what
the wide one returns, ties and filtered-out rows included; ``lexical_row_budget`` (approximate, off by
default) ranks only rows holding the rarest terms, on the same scores."""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from pathlib import Path

import pytest

from navi_memory import MemoryStore
from navi_memory.backends.base import Filters


def _load_benchmark():
    path = Path(__file__).parent.parent / "benchmarks" / "sqlite_lexical_ab.py"
    spec = importlib.util.spec_from_file_location("sqlite_lexical_ab", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# the query used before the narrow one: rank, join the best max(4k, 200), else rank all
_wide = _load_benchmark().wide


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


@pytest.fixture
def budgeted(filled, tmp_path, clock) -> Iterator:
    """Backends without and with a row budget on the filled database."""
    filled.close()
    stores: list[MemoryStore] = []

    def make(budget: int | None):
        stores.append(_open(tmp_path, clock, **({"lexical_row_budget": budget} if budget else {})))
        return stores[-1].backend

    yield make
    for store in stores:
        store.close()


def test_row_budget_ranks_rows_of_the_rare_terms_on_every_term(budgeted, clock):
    exact_backend, budget_backend = budgeted(None), budgeted(10)
    filters = Filters(user_id="alice", now=clock.now)
    terms = ["tea", "quince", 'quoted"']  # a quote in a term stays a literal
    exact = dict(exact_backend.lexical_candidates(filters, terms, 100))
    cut = budget_backend.lexical_candidates(filters, terms, 100)
    quince = {i for i, _ in exact_backend.lexical_candidates(filters, ["quince"], 100)}
    assert {i for i, _ in cut} == quince  # tea (58 rows) is over the budget
    assert all(score == exact[i] for i, score in cut)  # scored on tea as well
    assert exact_backend.lexical_row_budget is None


def test_row_budget_over_budget_needs_every_term_else_the_rarest(budgeted, clock):
    exact_backend, budget_backend = budgeted(None), budgeted(2)
    filters = Filters(user_id="alice", now=clock.now)

    def ids(backend, terms: list[str]) -> set[int]:
        return {i for i, _ in backend.lexical_candidates(filters, terms, 100)}

    exact = dict(exact_backend.lexical_candidates(filters, ["tea", "quince"], 100))
    both = budget_backend.lexical_candidates(filters, ["tea", "quince"], 100)
    assert {i for i, _ in both} == ids(exact_backend, ["quince"]) & ids(exact_backend, ["tea"])
    assert all(score == exact[i] for i, score in both)
    # no row holds garden and quince: the rarest (quince) selects
    assert ids(budget_backend, ["garden", "quince"]) == ids(exact_backend, ["quince"])
