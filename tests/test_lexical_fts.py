"""SQLite's lexical candidates: scored from the user's rows alone (``retrieval.lexical``), other users'
rows change nothing; ``lexical_row_budget`` (approximate, off by
default) ranks only rows holding the rarest terms, on the same scores."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from navi_memory import MemoryStore
from navi_memory.backends.base import Filters


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


def test_scores_and_order_come_from_the_users_rows_alone(filled, clock, tmp_path):
    """bob's rows (more tea, more garden) change nothing of alice's lexical candidates."""
    backend = filled.backend
    filters = Filters(user_id="alice", now=clock.now)
    queries = (["tea", "garden"], ["quince"], ["garden", "quince", "w3"], ["tea", "quince"])
    before = {tuple(t): backend.lexical_candidates(filters, t, 100) for t in queries}
    for n in range(30):
        filled.add(user_id="carol", content=f"quince quince garden tea w{n}", dedup=False)
    filled.forget(user_id="bob")
    assert {tuple(t): backend.lexical_candidates(filters, t, 100) for t in queries} == before
    assert before[("quince",)][0][1] > 0 and len(before[("tea", "garden")]) == 46


def test_rarer_terms_and_the_title_weigh_more(filled, clock):
    backend, filters = filled.backend, Filters(user_id="alice", now=clock.now)
    ranked = backend.lexical_candidates(filters, ["tea", "quince"], 100)
    quince_tea = {i for i, _ in backend.lexical_candidates(filters, ["quince"], 100)}
    assert {i for i, _ in ranked[:len(quince_tea)]} == quince_tea  # the rare word first
    titled = filled.add(user_id="alice", title="garden", content="a note", dedup=False)
    assert backend.lexical_candidates(filters, ["garden"], 1)[0][0] == titled


def test_lexical_candidates_skip_archived_rows(filled, clock):
    backend, filters = filled.backend, Filters(user_id="alice", now=clock.now)
    before = backend.lexical_candidates(filters, ["quince", "tea"], 5)
    filled.archive(before[0][0], user_id="alice")
    after = backend.lexical_candidates(filters, ["quince", "tea"], 5)
    assert before[0][0] not in [i for i, _ in after] and len(after) == 5


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
