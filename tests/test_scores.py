"""Scores mean relevance (issue 32, deliverable 5): a result's score is its own evidence, in [0, 1]
and comparable across queries; the rank is kept apart (``scores["rank"]``); one relevance floor,
the store's, on every surface, with what it hid reported; a user's scores and order depend on that
user's memories only (both backends)."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given, strategies as st

from navi_memory.retrieval.search import LEXICAL_CREDIT, Fused, SearchPlan, floored

from .test_cli import run

U = "u1"
NOTES = ("I like green tea", "My flight LH400 departs from gate A12", "The dentist appointment is on Tuesday at 10",
         "Anna's birthday is on 3 June", "I walk the dog every morning before work")
OTHERS = ("green tea every day, green tea all day", "tea tea tea and more tea", "flight gate dentist dog",
          "Tuesday birthday June morning walk", "I like coffee better than green tea")
QUERIES = ("green tea", "when is my flight?", "dentist Tuesday", "birthday", "dog walk morning", "tea", "gate A12")

finite = st.floats(allow_nan=True, allow_infinity=False, width=32)
signals = st.fixed_dictionaries({"fts": st.booleans(), "semantic": st.booleans(), "substring": st.booleans(),
                                 "context": st.just(False)})


@given(query=st.text(max_size=40), text=st.text(max_size=80), similarity=st.one_of(st.none(), finite),
       flags=signals, rank=finite)
def test_relevance_is_between_0_and_1_never_minus_zero(query, text, similarity, flags, rank):
    plan = SearchPlan.create(query, "weighted")
    raw = {} if similarity is None else {"semantic": similarity}
    score = plan.relevance(Fused(rank, raw, {}, flags), text)
    assert 0.0 <= score <= 1.0 and math.copysign(1.0, score) == 1.0


def test_relevance_does_not_depend_on_the_other_candidates():
    """The same row and query score the same whether it is the only candidate or one of many,
    and a row's score does not depend on its rank (min-max gave the best of any set 1.0)."""
    plan = SearchPlan.create("what is the capital of peru", "weighted")
    alone = plan.judged(plan.fuse([], [(1, 0.05)], [], {}), {1: "I like green tea"})
    crowd = plan.judged(plan.fuse([], [(1, 0.05), (2, 0.01), (3, -0.2)], [], {}), {1: "I like green tea"})
    assert crowd[1].score == 1.0  # first of the crowd's ranking (min-max) ...
    assert alone[1].relevance == crowd[1].relevance == pytest.approx(0.05)  # ... but scored by its evidence
    kept, hidden = floored(alone, 0.25, 10)
    assert kept == {} and hidden == 1  # an unrelated query injects nothing


def test_relevance_is_comparable_across_queries():
    """Equal evidence, equal score, whatever else the query's candidates look like."""
    one = SearchPlan.create("green tea", "weighted")
    other = SearchPlan.create("gate A12", "rrf")
    a = one.judged(one.fuse([(1, 3.0)], [(1, 0.4), (2, 0.1)], [], {}), {1: "I like green tea", 2: ""})
    b = other.judged(other.fuse([(7, 0.2), (8, 9.0)], [(7, 0.4)], [], {8: 0.9}), {7: "gate A12 is far", 8: "A12"})
    assert a[1].relevance == b[7].relevance == pytest.approx(0.4 + LEXICAL_CREDIT)
    assert a[1].score != b[7].score  # the fused ranks differ: they are kept apart


def test_a_row_holding_every_content_word_passes_the_floor_without_a_similar_vector():
    plan = SearchPlan.create("cafe creme", "weighted")
    row = Fused(0.5, {"semantic": 0.02}, {}, {"fts": True, "semantic": True, "substring": False, "context": False})
    assert plan.relevance(row, "Café crème at the corner") == 0.5
    assert plan.relevance(row, "Café at the corner") == pytest.approx(0.125)  # half of the words: weak


# -- through the store, both backends -----------------------------------------------------------------

def _ranking(store, user=U):
    return {q: [(r.id, r.score, r.scores["rank"]) for r in store.search(q, user_id=user, min_score=0, limit=20)]
            for q in QUERIES}


@pytest.mark.parametrize("embedded", [True, False])
def test_other_users_memories_change_neither_order_nor_scores(store, lexical_store, embedded):
    """A result's score is its own evidence and its rank reads the user's memories alone: other users'
    memories change neither (PostgreSQL: ts_rank_cd, per row; SQLite: BM25 with the user's own
    statistics, ``backends.sqlite.lexicon``). Then they are forgotten: still nothing changed."""
    s = store if embedded else lexical_store
    for text in NOTES:
        s.add(user_id=U, content=text)
    before = _ranking(s)
    assert all(before[q] for q in ("green tea", "dentist Tuesday", "birthday"))
    for n in range(5):  # five other users, with the same words more often (FTS5's bm25 moved on them)
        for text in OTHERS:
            s.add(user_id=f"other{n}", content=f"{text} {n}")
    assert _ranking(s) == before
    for n in range(0, 5, 2):
        s.forget(user_id=f"other{n}")
    assert _ranking(s) == before


def test_a_title_match_is_judged_relevant_without_vectors(lexical_store):
    """A row found by the words of its title holds them: the relevance floor keeps it."""
    found = lexical_store.add(user_id=U, title="Dentist appointment", content="Tuesday at nine, bring the card")
    lexical_store.add(user_id=U, content="Green tea in the morning")
    results = lexical_store.search("dentist appointment", user_id=U)
    assert [r.id for r in results] == [found] and results[0].score == 1.0


def test_scores_are_bounded_and_unrelated_queries_find_nothing_by_default(store):
    for text in NOTES:
        store.add(user_id=U, content=text)
    for query in (*QUERIES, "what is the capital of peru", "who won the 1998 world cup"):
        for r in store.search(query, user_id=U, min_score=0, limit=20):
            assert 0.0 <= r.score <= 1.0 and math.copysign(1.0, r.score) == 1.0
    assert store.search("green tea", user_id=U)[0].score >= store.settings.min_score


def test_an_unrelated_query_finds_nothing_by_default(store):
    # no word in common with the queries: the hashing fake's cosines are then near 0 (as MiniLM's
    # are for unrelated text: tests/test_minilm.py)
    for text in ("I like green tea", "My flight LH400 departs from gate A12", "Walking my dog every morning"):
        store.add(user_id=U, content=text)
    for query in ("what is the capital of peru", "who won the 1998 world cup"):
        results = store.search(query, user_id=U)
        assert results == [] and results.hidden > 0
    shown = store.search("green tea", user_id=U)
    assert shown and all(r.score >= store.settings.min_score for r in shown)


def test_the_floor_defaults_to_the_store_setting_and_min_score_wins(db_url, fake_embeddings, clock):
    from navi_memory import MemoryStore, Settings
    from navi_memory.errors import ValidationError

    with MemoryStore.open(db_url, embeddings=fake_embeddings, clock=clock,
                          settings=Settings(url=db_url, min_similarity=0.0)) as off:
        off.add(user_id=U, content="I like green tea")
        assert off.settings.min_score == 0.0
        assert len(off.search("who won the 1998 world cup", user_id=U)) == 1  # the store's floor: off
        assert off.search("who won the 1998 world cup", user_id=U, min_score=0.25) == []
        assert off.search("who won the 1998 world cup", user_id=U, min_score=0.25, min_similarity=0) == []
        with pytest.raises(ValidationError, match="min_score"):
            off.search("tea", user_id=U, min_score=1.5)


# -- surfaces --------------------------------------------------------------------------------------------

def test_cli_search_applies_the_floor_and_says_what_it_hid(tmp_path):
    db = f"sqlite:///{tmp_path / 'cli.db'}"
    run("add", "--user", U, "I like green tea", db=db)
    hidden = run("search", "--user", U, "who won the 1998 world cup", db=db)
    assert hidden.stdout == "" and "1 result(s) below the relevance floor 0.25 hidden" in hidden.stderr
    shown = json.loads(run("search", "--user", U, "who won the 1998 world cup", "--min-score", "0", "--json",
                           db=db).stdout)
    assert len(shown) == 1 and 0 <= shown[0]["score"] < 0.25
    assert json.loads(run("search", "--user", U, "green tea", "--json", db=db).stdout)[0]["score"] >= 0.25
    bad = run("search", "--user", U, "tea", "--min-score", "2", db=db, check=False)
    assert bad.returncode != 0 and "min_score" in bad.stderr


def test_rest_search_takes_min_score(store):
    from starlette.testclient import TestClient

    from navi_memory.ui.app import create_app

    store.add(user_id=U, content="I like green tea")
    client = TestClient(create_app(store), base_url="http://127.0.0.1")
    data = client.get(f"/api/users/{U}/search", params={"q": "who won the 1998 world cup"}).json()
    assert data["results"] == [] and data["relevance"]["hidden"] == 1 and data["relevance"]["floor"] == 0.25
    data = client.get(f"/api/users/{U}/search", params={"q": "who won the 1998 world cup", "min_score": "0"}).json()
    assert len(data["results"]) == 1 and data["relevance"]["floor"] == 0.0
    assert client.get(f"/api/users/{U}/search", params={"q": "tea", "min_score": "2"}).status_code == 400


def test_tools_and_adapters_use_the_store_floor(store):
    from navi_memory.integrations._tools import MemoryTools
    from navi_memory.integrations.langchain import NaviMemoryRetriever

    store.add(user_id=U, content="I like green tea")
    tools = MemoryTools(store, U)
    found = json.loads(tools.run("memory_search", query="who won the 1998 world cup"))
    assert found["results"] == [] and found["hidden"] == 1
    assert NaviMemoryRetriever(store=store, user_id=U).invoke("who won the 1998 world cup") == []
    assert len(NaviMemoryRetriever(store=store, user_id=U, min_score=0).invoke("who won the 1998 world cup")) == 1


def test_navistore_hybrid_ranking_applies_the_store_floor(store):
    from navi_memory.integrations.langgraph import NaviStore

    navi = NaviStore(store, user_id=U, index={"fields": ["text"]}, ranking="hybrid")
    navi.put(("docs",), "tea", {"text": "I like green tea"})
    assert navi.search(("docs",), query="who won the 1998 world cup") == []
    (found,) = navi.search(("docs",), query="green tea")
    assert found.key == "tea" and 0.25 <= found.score <= 1
