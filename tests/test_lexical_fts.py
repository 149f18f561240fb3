"""SQLite's lexical candidates. One user's: BM25 over that user's rows alone (``backends.sqlite.lexicon``,
``retrieval.lexical.Bm25``), so other users' rows change neither the candidates nor their order, and the
index stays in step with every write. Across users (the shared ``items_fts``): the narrow FTS5 query
(the best k, then the filter check) returns what the wide one returns, ties and filtered-out rows
included. ``lexical_row_budget`` (approximate, off by default) ranks only rows holding the rarest
terms, on the same scores."""

from __future__ import annotations

import importlib.util
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from navi_memory import MemoryStore
from navi_memory.backends.base import Filters
from navi_memory.backends.sqlite import lexicon
from navi_memory.backends.sqlite.schema import LATEST_VERSION
from navi_memory.retrieval.lexical import COLUMN_WEIGHTS, Bm25, Occurrences, best_first

from .fakes import FakeClock
from .helpers import sqlite_at_version


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


# -- one user's rows alone -------------------------------------------------------------------------------

QUERIES = (["tea", "garden"], ["quince"], ["garden", "quince", "w3"], ["tea", "quince"], ["w1", "tea"])


def _candidates(backend, clock, user="alice", k=100):
    filters = Filters(user_id=user, now=clock.now)
    return {tuple(t): backend.lexical_hits(filters, t, k).scored for t in QUERIES}


def _reference(conn: sqlite3.Connection, user: str, terms: list[str]) -> dict[int, float]:
    """BM25 of ``user``'s active rows from their texts, with the statistics of all their rows."""
    rows = conn.execute("SELECT id, status, title, content, context FROM items WHERE user_id = ?", [user]).fetchall()
    stemmed = {r[0]: [lexicon.stem_all(lexicon.words(text)) for text in r[2:]] for r in rows}
    asked = lexicon.query_stems(terms)
    holding = {w: sum(any(w in column for column in row) for row in stemmed.values()) for w in asked}
    bm25 = Bm25.create(asked, holding, len(rows), sum(len(c) for row in stemmed.values() for c in row))
    out = {}
    for item, status, *_ in rows:
        counts = {w: sum(weight * column.count(w) for weight, column in zip(COLUMN_WEIGHTS.values(), stemmed[item]))
                  for w in asked}
        if status == "active" and any(counts.values()):
            out[item] = bm25.score(counts, sum(len(c) for c in stemmed[item]))
    return out


def test_a_users_candidates_and_order_come_from_their_rows_alone(filled, clock):
    """bob's rows (more tea, more garden) change nothing; neither do carol's, nor forgetting bob."""
    backend = filled.backend
    before = _candidates(backend, clock)
    for n in range(30):
        filled.add(user_id="carol", content=f"quince quince garden tea w{n}", title="tea", dedup=False)
    filled.forget(user_id="bob")
    assert _candidates(backend, clock) == before
    assert before[("quince",)][0][1] > 0 and len(before[("tea", "garden")]) == 46


def test_scores_are_bm25_over_the_users_rows(filled, clock, tmp_path):
    filled.add(user_id="alice", title="Garden", content="a note on the tea garden", context="quince?", dedup=False)
    filled.archive(filled.add(user_id="alice", content="quince quince", dedup=False), user_id="alice")
    conn = sqlite3.connect(tmp_path / "lexical.db")
    for terms in QUERIES:
        got = filled.backend.lexical_hits(Filters(user_id="alice", now=clock.now), list(terms), 100).scored
        expected = _reference(conn, "alice", list(terms))
        assert dict(got) == pytest.approx(expected, rel=1e-9)
        assert [score for _, score in got] == pytest.approx(sorted(expected.values(), reverse=True), rel=1e-9)
    conn.close()


def test_filters_rejecting_the_best_rows_leave_the_best_that_pass(tmp_path, clock):
    """More than max(4k, 200) better rows fail the filters: the ranking goes on past them."""
    store = _open(tmp_path, clock)
    rejected = store.add_many([{"user_id": "alice", "content": f"quince quince tea w{n}"} for n in range(230)])
    for item in rejected:
        store.archive(item, user_id="alice")
    kept = [store.add(user_id="alice", content=f"quince and a longer note on tea number {n}", dedup=False)
            for n in range(3)]
    conn = sqlite3.connect(tmp_path / "lexical.db")
    expected = _reference(conn, "alice", ["quince", "tea"])
    conn.close()
    got = store.backend.lexical_hits(Filters(user_id="alice", now=clock.now), ["quince", "tea"], 2).scored
    assert [i for i, _ in got] == kept[:2]
    assert dict(got) == pytest.approx({i: expected[i] for i in kept[:2]}, rel=1e-9)
    store.close()


def _index_matches_items(path: Path) -> None:
    """The per-user index holds exactly the stored rows' words, and each user's counts add up."""
    conn = sqlite3.connect(path)
    lexicon.register(conn)
    try:
        conn.execute("INSERT INTO lex_fts (lex_fts, rank) VALUES ('integrity-check', 0)")
        stored = conn.execute("SELECT i.id, u.pk, navi_stems(coalesce(i.title, '')), navi_stems(i.content),"
                              " navi_stems(coalesce(i.context, '')) FROM items i JOIN users u ON u.id = i.user_id"
                              " ORDER BY i.id").fetchall()
        assert conn.execute("SELECT item_id, user_pk, title, content, context FROM lex_rows ORDER BY item_id").fetchall() == stored
        assert dict(conn.execute("SELECT user_pk, rows FROM lex_users WHERE rows > 0").fetchall()) == dict(
            conn.execute("SELECT user_pk, count(*) FROM lex_rows GROUP BY user_pk").fetchall())
        assert dict(conn.execute("SELECT user_pk, tokens FROM lex_users WHERE rows > 0").fetchall()) == dict(
            conn.execute("SELECT user_pk, sum(length) FROM lex_rows GROUP BY user_pk").fetchall())
    finally:
        conn.close()


def test_the_index_follows_every_write(filled, clock, tmp_path):
    first = filled.add(user_id="alice", title="Tea", content="green tea garden", context="the café", dedup=False)
    filled.update(first, user_id="alice", content="black tea, no garden")
    filled.update(first, user_id="alice", title="Quince")
    filled.delete(filled.add(user_id="alice", content="gone tea", dedup=False), user_id="alice")
    filled.forget(user_id="bob")
    _index_matches_items(tmp_path / "lexical.db")
    assert first in dict(filled.backend.lexical_hits(Filters(user_id="alice", now=clock.now), ["quince"], 10).scored)
    assert first not in dict(filled.backend.lexical_hits(Filters(user_id="alice", now=clock.now), ["green"], 10).scored)


def test_a_version_11_database_gets_the_index_of_its_rows(tmp_path, clock):
    path = tmp_path / "lexical.db"
    conn = sqlite_at_version(path, 11)
    conn.execute("INSERT INTO users (id, created_at) VALUES ('alice', '2024-01-01T00:00:00.000000Z')")
    conn.execute("INSERT INTO themes (user_id, slug, display_name, created_at, updated_at) VALUES"
                 " ('alice', 'general', 'General', '2024-01-01T00:00:00.000000Z', '2024-01-01T00:00:00.000000Z')")
    for n, text in enumerate(("tea garden", "quince tea", "garden w3")):
        conn.execute("INSERT INTO items (user_id, theme, type, content, title, created_at, updated_at) VALUES"
                     " ('alice', 'general', 'note', ?, ?, '2024-01-01T00:00:00.000000Z', '2024-01-01T00:00:00.000000Z')",
                     (text, "Tea" if n else None))
    conn.close()
    store = _open(tmp_path, clock)
    assert store.migrate() == LATEST_VERSION
    _index_matches_items(path)
    found = store.backend.lexical_hits(Filters(user_id="alice", now=clock.now), ["tea", "garden"], 10).scored
    assert sorted(i for i, _ in found) == [1, 2, 3]
    store.close()


_texts = st.lists(st.lists(st.sampled_from(["tea ", "garden ", "quince ", "w3 ", "x ", "é", "Tea-"]), max_size=30)
                  .map("".join), min_size=1, max_size=8)


@settings(max_examples=15, deadline=None)
@given(others=st.lists(st.tuples(st.sampled_from(["bob", "carol", "dave"]), _texts), max_size=3))
def test_no_other_users_rows_move_a_users_top_k(tmp_path_factory, others):
    path, clock = tmp_path_factory.mktemp("lex"), FakeClock()
    store = MemoryStore.open(f"sqlite:///{path / 'lexical.db'}", embeddings=False, clock=clock)
    for n in range(12):
        store.add(user_id="alice", content=f"{'tea ' * (n % 3)}garden w{n % 5} {'quince' if n % 4 == 0 else ''}",
                  dedup=False)
    before = {k: _candidates(store.backend, clock, k=k) for k in (1, 5, 20)}
    for user, texts in others:
        for text in texts:
            store.add(user_id=user, content=text or "x", dedup=False)
    assert {k: _candidates(store.backend, clock, k=k) for k in (1, 5, 20)} == before
    store.close()


# -- the ranking itself (pure) ---------------------------------------------------------------------------

_occurrence = st.tuples(st.integers(1, 12), st.sampled_from(list(COLUMN_WEIGHTS)))


@settings(max_examples=60, deadline=None)
@given(found=st.dictionaries(st.sampled_from(["tea", "garden", "quince"]), st.lists(_occurrence, max_size=25)),
       limit=st.one_of(st.none(), st.integers(0, 15)))
def test_row_scores_and_best_first_are_bm25_per_row_by_score_then_row(found, limit):
    length = {row: 3 + row % 4 for row in range(1, 13)}
    bm25 = Bm25.create({"tea": 1, "garden": 2, "quince": 1}, {w: len(o) for w, o in found.items()}, 12, 50)
    occurrences = {w: Occurrences(np.array(sorted(r for r, _ in o), dtype=np.int64),
                                  np.array([length[r] for r, _ in sorted(o)], dtype=np.int64),
                                  np.array([COLUMN_WEIGHTS[c] for _, c in sorted(o)])) for w, o in found.items()}
    rows, scores = bm25.row_scores(occurrences)
    counts: dict[int, dict[str, float]] = {}
    for word, held in found.items():
        for row, column in held:
            counts.setdefault(row, {}).setdefault(word, 0.0)
            counts[row][word] += COLUMN_WEIGHTS[column]
    expected = {row: bm25.score(c, length[row]) for row, c in counts.items()}
    assert dict(zip(rows.tolist(), scores.tolist())) == pytest.approx(expected, rel=1e-12)
    ordered = sorted(zip(rows.tolist(), scores.tolist()), key=lambda p: (-p[1], p[0]))
    assert best_first(rows, scores, limit) == ordered[:limit]


# -- across users: the shared FTS5 index ------------------------------------------------------------------

def test_narrow_query_equals_wide_one(filled, clock):
    backend = filled.backend
    for user in ("alice", "bob", "nobody"):
        filters = Filters(user_id=user, now=clock.now)
        for terms in (["tea", "garden"], ["quince"], ["garden", "quince", "w3"]):
            for k in (1, 5, 12, 45, 100):
                for rate in (1.0, 0.0):  # the narrow path, and the wide one taken after misses
                    backend._narrow_rate = rate
                    assert backend._shared_candidates(filters, terms, k) == _wide(backend, filters, terms, k)


def test_narrow_query_skips_archived_rows(filled, clock):
    backend, filters = filled.backend, Filters(user_id="alice", now=clock.now)
    before = backend._shared_candidates(filters, ["quince", "tea"], 5)
    filled.archive(before[0][0], user_id="alice")
    after = backend._shared_candidates(filters, ["quince", "tea"], 5)
    assert after == _wide(backend, filters, ["quince", "tea"], 5)
    assert before[0][0] not in [i for i, _ in after]


def test_misses_turn_to_the_wide_query_then_back(filled, clock):
    backend = filled.backend
    backend._narrow_rate = 1.0
    for _ in range(10):  # bob's rows are tea's best: alice's narrow query misses
        backend._shared_candidates(Filters(user_id="alice", now=clock.now), ["tea"], 3)
    assert backend._narrow_rate <= 0.5
    for _ in range(30):
        backend._shared_candidates(Filters(user_id="bob", now=clock.now), ["tea"], 3)
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
    exact = dict(exact_backend.lexical_hits(filters, terms, 100).scored)
    cut = budget_backend.lexical_hits(filters, terms, 100).scored
    quince = {i for i, _ in exact_backend.lexical_hits(filters, ["quince"], 100).scored}
    assert {i for i, _ in cut} == quince  # tea (58 rows) is over the budget
    assert all(score == exact[i] for i, score in cut)  # scored on tea as well
    assert exact_backend.lexical_row_budget is None


def test_row_budget_over_budget_needs_every_term_else_the_rarest(budgeted, clock):
    exact_backend, budget_backend = budgeted(None), budgeted(2)
    filters = Filters(user_id="alice", now=clock.now)

    def ids(backend, terms: list[str]) -> set[int]:
        return {i for i, _ in backend.lexical_hits(filters, terms, 100).scored}

    exact = dict(exact_backend.lexical_hits(filters, ["tea", "quince"], 100).scored)
    both = budget_backend.lexical_hits(filters, ["tea", "quince"], 100).scored
    assert {i for i, _ in both} == ids(exact_backend, ["quince"]) & ids(exact_backend, ["tea"])
    assert all(score == exact[i] for i, score in both)
    # no row holds garden and quince: the rarest (quince) selects
    assert ids(budget_backend, ["garden", "quince"]) == ids(exact_backend, ["quince"])


def test_row_budget_across_users_ranks_rows_of_the_rare_terms_on_every_term(budgeted, clock):
    """The same rules on the shared index (a search across users: ``_rare_terms``)."""
    exact_backend, budget_backend, tight = budgeted(None), budgeted(10), budgeted(2)
    everyone = Filters(user_id=None, now=clock.now)

    def ids(backend, terms: list[str]) -> set[int]:
        return {i for i, _ in backend.lexical_hits(everyone, terms, 100).scored}

    exact = dict(exact_backend.lexical_hits(everyone, ["tea", "quince"], 100).scored)
    cut = budget_backend.lexical_hits(everyone, ["tea", "quince"], 100).scored
    assert {i for i, _ in cut} == ids(exact_backend, ["quince"])  # tea (70 rows) is over the budget
    assert all(score == exact[i] for i, score in cut)
    both = tight.lexical_hits(everyone, ["tea", "quince"], 100).scored  # even quince is over 2 rows
    assert {i for i, _ in both} == ids(exact_backend, ["quince"]) & ids(exact_backend, ["tea"])
    assert all(score == exact[i] for i, score in both)
    assert ids(tight, ["garden", "quince"]) == ids(exact_backend, ["quince"])  # none holds both: the rarest
