"""Fuzzing search, listing and fact queries on both backends: only documented errors come out.

One seeded store per backend serves every example (no per-example database); the fuzzed user
has a household (persons with aliases and roles) and items about them, the other user a person
sharing those aliases, so person filters and hints are fuzzed against real references. The number of
examples comes from the hypothesis profile ``navi-fuzz``: 2,000 searches with valid filters per
backend by default (CI), a quarter of that each for invalid filters and for listings/fact
queries; ``NAVI_MEMORY_FUZZ_EXAMPLES=50000`` for a longer local run (docs/reliability.md). Every
call must return a well-formed, correctly scoped result or raise ``ValidationError``; a
``StorageError`` (the database choked on a query) or any other exception fails the test, and
the stored data must be the same at the end.
"""

from __future__ import annotations

import math
import os
from typing import Any, Iterator

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from navi_memory import MemoryStore, ValidationError
from navi_memory.models import FACT_CATEGORIES, FACT_SORT_FIELDS, ITEM_TYPES, SEARCH_STATUSES
from navi_memory.retrieval.query import is_match_all

from .conftest import BACKENDS
from .fakes import FakeClock, FakeEmbeddings
from .helpers import dump_tables
from .pg import dump_schema

EXAMPLES = int(os.environ.get("NAVI_MEMORY_FUZZ_EXAMPLES", "2000"))
# on top of the suite's loaded profile (tests/conftest.py): derandomized, the same examples every run
settings.register_profile("navi-fuzz", max_examples=EXAMPLES, deadline=None, database=None,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
FUZZ = settings.get_profile("navi-fuzz")

U, OTHER = "fuzzer", "other-user"
OTHER_MARK = "zzotherusermark"

SPECIAL = ['NOT', 'AND', 'OR', 'NEAR', 'NEAR(', '"', "'", '*', '-', ':', '^', '(', ')', '{', '}', '+', '~', '\\',
           '%', '_', '&', '|', '!', '<->', ';', '--', '/*', '*/', "' OR '1'='1", '"; DROP TABLE items; --',
           'content:', 'title:x', '@@', '$1', '%s', '?', '\u200b', 'é', '用户', '🙂', 'ß', 'İ']
WORDS = ['coffee', 'latte', 'berlin', 'trains', 'project', 'alice', 'the', 'a', 'running', 'dog', 'zq1']
TOKENS = st.sampled_from(SPECIAL + WORDS)
QUERY = st.one_of(
    st.none(), st.just(""), st.just("*"),
    st.lists(TOKENS, max_size=8).map(" ".join),
    st.lists(TOKENS, max_size=8).map("".join),
    st.text(max_size=60),
    st.text(st.characters(codec="utf-8"), min_size=1, max_size=300),
    st.binary(max_size=20),
)
# the fuzzed user's household, and a person of the other user whose items must never show
PERSONS = [("Anna Berg", ["mom", "Annie"], "spouse"), ("Ben", ["dad's friend", "B%"], "child"), ("Élodie", [], None)]
OTHER_PERSON = "Zora Otherperson"
PERSON_REFS = [name for name, _, _ in PERSONS] + [a for _, aliases, _ in PERSONS for a in aliases] + [
    "spouse", "child", "anna", "ANNA BERG", "Anna", OTHER_PERSON, "Zora", "%", "_", "' OR '1'='1"]
PERSON = st.one_of(st.sampled_from(PERSON_REFS), st.text(min_size=1, max_size=8).filter(
    lambda t: t.strip() and "\x00" not in t))
NUMBER = st.one_of(st.integers(-5, 400_000), st.floats(allow_nan=True, allow_infinity=True), st.none(),
                   st.sampled_from(["7", True]))
NAMES = st.one_of(st.none(), st.text(max_size=12), st.lists(st.one_of(st.sampled_from(ITEM_TYPES), st.text(max_size=8)),
                                                           max_size=3), st.integers())
SEARCH_KWARGS = st.fixed_dictionaries({}, optional={
    "limit": st.one_of(st.integers(-2, 60), st.just(10**9), st.none()),
    "theme": st.one_of(st.none(), st.sampled_from(["general", "work", "!!!", ""]), st.text(max_size=10)),
    "types": NAMES,
    "status": st.one_of(st.sampled_from(SEARCH_STATUSES), st.text(max_size=6)),
    "recency_days": NUMBER,
    "recency": st.sampled_from(["decay", "neutral", "fresh"]),
    "fusion": st.one_of(st.none(), st.sampled_from(["weighted", "rrf", "bm25"])),
    "person": st.one_of(st.none(), st.sampled_from(["Anna", "", "%"]), PERSON, st.text(max_size=8)),
    "person_hints": st.one_of(NAMES, st.lists(PERSON, max_size=3)),
    "include_expired": st.booleans(),
    "context_weight": NUMBER,
    "semantic_weight": NUMBER,
    "min_similarity": NUMBER,
    "all_users": st.booleans(),
})
# the same filters, valid values only: most examples get through to the database
VALID_SEARCH_KWARGS = st.fixed_dictionaries({}, optional={
    "limit": st.integers(1, 50),
    "theme": st.one_of(st.sampled_from(["general", "work", "travel", "nothing-here"]), st.text("abc -_", min_size=1,
                                                                                            max_size=8).filter(
        lambda t: any(c in "abc" for c in t))),
    "types": st.lists(st.sampled_from(ITEM_TYPES), min_size=1, max_size=3),
    "status": st.sampled_from(SEARCH_STATUSES),
    "recency_days": st.one_of(st.integers(0, 400_000 // 2), st.floats(0, 365_000)),
    "recency": st.sampled_from(["decay", "neutral"]),
    "fusion": st.sampled_from(["weighted", "rrf"]),
    "person": PERSON,
    "person_hints": st.lists(st.one_of(PERSON, st.just("alice")), max_size=3),
    "include_expired": st.booleans(),
    "context_weight": st.floats(0, 1),
    "semantic_weight": st.floats(0, 1),
    "min_similarity": st.one_of(st.just(0.0), st.floats(0, 1)),
    "all_users": st.booleans(),
})
LIST_KWARGS = st.fixed_dictionaries({}, optional={
    "limit": st.one_of(st.integers(-2, 20_000), st.just(10**9)),
    "offset": st.one_of(st.integers(-2, 10**6), st.just(2**63)),
    "theme": st.one_of(st.none(), st.text(max_size=10)),
    "types": NAMES,
    "status": st.one_of(st.sampled_from(SEARCH_STATUSES), st.text(max_size=6)),
    "include_expired": st.booleans(),
})
FACT_KWARGS = st.fixed_dictionaries({}, optional={
    "limit": st.one_of(st.none(), st.integers(-2, 200_000)),
    "offset": st.integers(-2, 10**6),
    "search": st.one_of(st.none(), QUERY),
    "sort_by": st.one_of(st.sampled_from(FACT_SORT_FIELDS), st.text(max_size=8)),
    "sort_order": st.sampled_from(["asc", "desc", "up", "DESC"]),
    "category": st.one_of(st.none(), st.sampled_from(FACT_CATEGORIES), st.text(max_size=8)),
    "include_history": st.booleans(),
    "include_expired": st.booleans(),
})


def _seed(store: MemoryStore) -> None:
    store.set_household_mode("multi", user_id=U)
    for name, aliases, role in PERSONS:
        store.add_person(name, user_id=U, aliases=aliases, role=role)
    texts = [f"{w} {s} note {n}" for n, (w, s) in enumerate(zip(WORDS * 8, SPECIAL * 3))]
    about = ["Anna", "Anna Berg", "mom", "Ben", "Élodie", "someone else", None]  # references, as an app passes them
    store.add_many([{"user_id": U, "content": t, "theme": ("work", "general", "travel")[n % 3],
                     "type": ITEM_TYPES[n % len(ITEM_TYPES)], "person": about[n % len(about)],
                     "pinned": n % 11 == 0, "expires_days": 1 if n % 13 == 0 else None,
                     "status": "archived" if n % 9 == 0 else "active",
                     "source_ref": {"session_id": "s1", "first_seq": n, "last_seq": n}}
                    for n, t in enumerate(texts)])
    for n, category in enumerate(FACT_CATEGORIES):
        store.upsert_fact(user_id=U, category=category, key=f"key_{n}", value=f"value {SPECIAL[n]} {WORDS[n]}")
        store.upsert_fact(user_id=U, category=category, key=f"key_{n}", value=f"changed {WORDS[n]}")
    store.add(user_id=OTHER, content=f"{OTHER_MARK} coffee latte berlin NOT * \" -")
    store.add_person(OTHER_PERSON, user_id=OTHER, aliases=["mom", "Anna"])
    store.add(user_id=OTHER, content=f"{OTHER_MARK} Anna and mom", person=OTHER_PERSON)
    store.upsert_fact(user_id=OTHER, category="profile", key="home_city", value=f"{OTHER_MARK} Berlin")


@pytest.fixture(scope="module", params=BACKENDS)
def fuzz_store(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple]:
    if request.param == "sqlite":
        path = tmp_path_factory.mktemp("fuzz") / "memory.db"
        url, dump = f"sqlite:///{path}", (lambda: dump_tables(path))
    else:
        server = request.getfixturevalue("postgres_server")
        url = server.fresh_schema_url()
        dump = lambda: dump_schema(url)  # noqa: E731
    store = MemoryStore.open(url, embeddings=FakeEmbeddings(), clock=FakeClock())
    _seed(store)
    yield store, dump
    store.close()
    if request.param == "postgres":
        request.getfixturevalue("postgres_server").drop_schema(url)


def _check_results(results: Any, kwargs: dict, listing: bool = False) -> None:
    assert isinstance(results, list)
    limit = kwargs.get("limit", 10)
    assert len(results) <= limit
    floor = 0.0 if listing else kwargs.get("min_similarity") or 0.0  # '' and '*' list the newest items
    for r in results:
        assert math.isfinite(r.score) and all(math.isfinite(v) for v in r.scores.values())
        if floor > 0:  # every result has evidence: a word match, a kept neighbour, or similarity over the floor
            assert (r.signals["fts"] or r.signals["substring"] or r.signals["context"]
                    or r.scores["semantic"] >= floor), (r.signals, r.scores, floor)
        if not kwargs.get("all_users"):
            assert OTHER_MARK not in r.content and r.person != OTHER_PERSON


def _fuzz(store_and_dump: tuple, strategy: Any, call: Any, share: int = 1) -> tuple[int, int]:
    store, dump = store_and_dump
    before = dump()
    counts = {"ok": 0, "rejected": 0}

    @settings(FUZZ, max_examples=max(1, FUZZ.max_examples // share))
    @given(strategy)
    def run(example: Any) -> None:
        try:
            call(store, example)
            counts["ok"] += 1
        except ValidationError:
            counts["rejected"] += 1

    run()
    print(f"fuzz: {counts['ok']} accepted, {counts['rejected']} rejected with ValidationError")
    assert dump() == before
    return counts["ok"], counts["rejected"]


def _search(store: MemoryStore, example: tuple) -> None:
    query, kwargs = example
    user = {} if kwargs.get("all_users") else {"user_id": U}  # all_users without a user: the admin read
    _check_results(store.search(query, **user, **kwargs), kwargs, listing=is_match_all(query))


def test_fuzz_search(fuzz_store):
    accepted, rejected = _fuzz(fuzz_store, st.tuples(QUERY, VALID_SEARCH_KWARGS), _search)
    assert accepted >= rejected > 0  # most examples reach the database; NUL or bytes queries do not


def test_fuzz_search_with_invalid_filters(fuzz_store):
    accepted, rejected = _fuzz(fuzz_store, st.tuples(QUERY, SEARCH_KWARGS), _search, share=4)
    assert accepted > 0 and rejected > 0


def _list(store: MemoryStore, kwargs: dict) -> None:
    items = store.list_items(user_id=U, **kwargs)
    assert all(i.user_id == U for i in items)


def _facts(store: MemoryStore, kwargs: dict) -> None:
    facts = store.get_all_facts(user_id=U, **kwargs)
    assert all(f.user_id == U for f in facts)


def test_fuzz_listing_and_fact_queries(fuzz_store):
    accepted, rejected = _fuzz(
        fuzz_store, st.one_of(LIST_KWARGS.map(lambda k: ("list", k)), FACT_KWARGS.map(lambda k: ("facts", k))),
        lambda store, example: (_list if example[0] == "list" else _facts)(store, example[1]), share=4)
    assert accepted > 0 and rejected > 0


@pytest.mark.parametrize("query", ['"', "NOT", "* -", "NEAR(a b)", "a:b", "' OR '1'='1", "%", "_", "\\", "(((",
                                   '"unterminated', "title:coffee", "-coffee", "coffee*", "AND OR NOT"])
def test_fts_syntax_in_queries_is_plain_text(fuzz_store, query):
    store, _ = fuzz_store
    results = store.search(query, user_id=U, limit=50, status="any", include_expired=True)
    assert all(OTHER_MARK not in r.content for r in results)



@pytest.mark.parametrize("ref", ["mom", "Anna", "anna berg", "Annie", "B%", "%", OTHER_PERSON, "Zora"])
def test_person_filters_and_hints_stay_in_the_users_household(fuzz_store, ref):
    store, _ = fuzz_store
    names = {name for name, _, _ in PERSONS} | {"someone else"}
    for kwargs in ({"person": ref}, {"person_hints": [ref]}):
        results = store.search("note coffee Anna mom", user_id=U, limit=50, status="any", include_expired=True,
                               **kwargs)
        assert all(OTHER_MARK not in r.content and (r.person is None or r.person in names) for r in results)
    assert {r.person for r in store.search("note", user_id=U, limit=50, person="mom")} == {"Anna Berg"}
