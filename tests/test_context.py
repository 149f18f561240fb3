"""Conversation context in retrieval: neighbour smoothing, item context, automatic person hints."""

from __future__ import annotations

import numpy as np
import pytest

from navi_memory import ValidationError
from navi_memory.retrieval import context
from navi_memory.retrieval.context import focus, name_grams, smooth, without_names
from navi_memory.retrieval.search import Fused

U = "alice"


def fused(score: float, **signals: bool) -> Fused:
    base = {"fts": False, "semantic": False, "substring": False, "context": False}
    return Fused(score=score, raw={}, parts={}, signals={**base, **signals})


def test_smooth_adds_a_share_of_the_best_neighbour_and_brings_neighbours_in():
    scores = {1: fused(1.0, fts=True), 2: fused(0.5, semantic=True)}
    out = smooth(scores, {1: [2, 9], 2: [1, 3]}, weight=0.2)
    assert out[1].score == pytest.approx(1.0 + 0.2 * 0.5)
    assert out[2].score == pytest.approx(0.5 + 0.2 * 1.0)
    assert out[9].score == pytest.approx(0.2) and out[9].signals["context"] is True
    assert out[3].score == pytest.approx(0.1) and out[3].signals["fts"] is False
    assert out[1].parts["context"] == pytest.approx(0.1)


def test_smooth_without_neighbours_changes_nothing():
    scores = {1: fused(1.0, fts=True)}
    assert smooth(scores, {}, 0.2) == scores


def test_name_grams_are_lowercased_runs_of_up_to_three_words():
    grams = name_grams("When did Mary Ann Smith visit Paris?")
    assert {"mary", "mary ann", "mary ann smith", "paris"} <= set(grams)
    assert "when did mary ann" not in grams


def test_without_names_drops_whole_names_first_names_and_possessives():
    assert without_names("What is Caroline's identity?", ["Caroline"]) == "What is identity?"
    assert without_names("Did mary ann smith meet MARY’s dog?", ["Mary Ann Smith"]) == "Did meet dog?"
    assert without_names("Where did Bob and Alice go?", ["Alice", "bob"]) == "Where did and go?"


def test_without_names_is_none_when_no_name_occurs_or_nothing_else_is_left():
    assert without_names("Carolines dog", ["Caroline"]) is None  # whole words only
    assert without_names("what about Alice", []) is None
    assert without_names("Alice?", ["Alice"]) is None
    assert without_names("Alice (Al+)!", ["Alice", "Al+", " "]) is None  # names are text, not patterns


def test_focus_mixes_unit_vectors_and_returns_a_unit_vector():
    mixed = focus(np.array([2.0, 0.0]), np.array([0.0, 3.0]), 0.5)
    assert mixed == pytest.approx([2 ** -0.5, 2 ** -0.5])
    assert focus(np.array([1.0, 0.0]), np.array([0.0, 5.0]), 1.0) == pytest.approx([0.0, 1.0])
    assert focus(np.array([1.0, 0.0]), np.array([-1.0, 0.0]), 0.5) == pytest.approx([1.0, 0.0])  # no length: whole


def test_a_query_naming_a_known_person_is_embedded_also_without_the_name(store, fake_embeddings, monkeypatch):
    conversation(store)
    before = fake_embeddings.query_calls
    whole = store.search("Where did Alice go on holiday?", user_id=U)
    assert fake_embeddings.query_calls == before + 2  # the query, and "Where did go on holiday?"
    monkeypatch.setattr(context, "PERSON_FOCUS", 1.0)
    focused = store.search("Where did Alice go on holiday?", user_id=U)
    rest = store.search("Where did Alice go on holiday?", user_id=U,
                        query_embedding=fake_embeddings.expected("Where did go on holiday?"))
    assert [(r.id, r.scores.get("semantic")) for r in focused] == \
        [(r.id, pytest.approx(r.scores.get("semantic"))) for r in rest]
    assert [r.scores.get("semantic") for r in whole] != [r.scores.get("semantic") for r in focused]
    monkeypatch.setattr(context, "PERSON_FOCUS", 0.0)
    calls = fake_embeddings.query_calls
    store.search("Where did Alice go on holiday?", user_id=U)
    store.search("Where did Carol go?", user_id=U)  # not a person of this user's
    assert fake_embeddings.query_calls == calls + 2


def test_a_caller_vector_is_used_as_given(store, fake_embeddings):
    conversation(store)
    before = fake_embeddings.query_calls
    store.search("Where did Alice go?", user_id=U, query_embedding=fake_embeddings.expected("x"))
    assert fake_embeddings.query_calls == before


def conversation(store, session="s1"):
    turns = ["Bob: Where did you go on holiday last spring?",
             "Alice: We spent two weeks in Lisbon, walking everywhere.",
             "Bob: I have a new puppy called Max.",
             "Alice: Lovely, what breed is it?"]
    return store.add_many([{"user_id": U, "content": text, "source_ref": {"session_id": session},
                            "person": text.split(":")[0], "context": turns[n - 1] if n else None}
                           for n, text in enumerate(turns)])


def test_context_is_embedded_and_indexed_but_not_shown(store):
    ids = conversation(store)
    item = store.get(ids[1], user_id=U)
    assert item.context == "Bob: Where did you go on holiday last spring?"
    assert item.content == "Alice: We spent two weeks in Lisbon, walking everywhere."
    assert item.embedding.state == "ready"
    hits = store.search("holiday", user_id=U, context_weight=0)
    assert ids[1] in [r.id for r in hits]  # found through its context
    assert all("holiday" not in r.content or r.id == ids[0] for r in hits)


def test_changing_the_context_re_embeds(store, fake_embeddings):
    ids = conversation(store)
    before = len(fake_embeddings.embedded_texts)
    store.update(ids[1], user_id=U, context="Bob: any trips this year?")
    assert fake_embeddings.embedded_texts[before:] == [
        "Bob: any trips this year?\nAlice: We spent two weeks in Lisbon, walking everywhere."]
    assert store.get(ids[1], user_id=U).embedding.state == "ready"


def test_neighbour_of_a_match_is_returned_with_the_context_signal(lexical_store):
    ids = conversation(lexical_store)
    results = {r.id: r for r in lexical_store.search("puppy", user_id=U)}
    assert results[ids[2]].signals["fts"] is True
    neighbour = results[ids[3]]  # "what breed is it?" shares no word with the query
    assert neighbour.signals["context"] is True and neighbour.score < results[ids[2]].score
    assert results[ids[1]].signals["context"] is True and ids[0] not in results  # only adjacent turns


def test_neighbours_are_the_session_turns_around_a_match_whatever_was_stored_between(lexical_store):
    """Turns of one session stored by two passes, other users' and sessions' items between them:
    the turns before and after are still its neighbours (ids are not consecutive)."""
    ids = []
    for n, text in enumerate(["Bob: I have a new puppy called Max.", "Alice: Lovely, what breed is it?",
                              "Bob: A beagle, two months old."]):
        ids.append(lexical_store.add(user_id=U, content=text, source_ref={"session_id": "s1"}))
        lexical_store.add(user_id="someone-else", content="Bob: puppy food", source_ref={"session_id": "s1"})
        lexical_store.add(user_id=U, content=f"an unrelated note {n}", source_ref={"session_id": "s2"})
        lexical_store.add(user_id=U, content=f"a note without a session {n}")
    results = {r.id: r for r in lexical_store.search("beagle", user_id=U)}
    assert results[ids[1]].signals["context"] is True and ids[0] not in results  # one turn each way
    results = {r.id: r for r in lexical_store.search("puppy", user_id=U)}
    assert results[ids[1]].signals["context"] is True and ids[2] not in results
    lexical_store.archive(ids[1], user_id=U)  # a neighbour that fails the filters is left out, not skipped
    assert set(r.id for r in lexical_store.search("puppy", user_id=U)) == {ids[0]}


def test_no_smoothing_across_sessions_or_with_weight_zero(lexical_store):
    first = conversation(lexical_store, "s1")
    second = conversation(lexical_store, "s2")
    results = lexical_store.search("puppy", user_id=U, context_weight=0)
    assert all(not r.signals["context"] for r in results)
    smoothed = {r.id for r in lexical_store.search("puppy", user_id=U)}
    assert {first[3], second[3]} <= smoothed
    assert first[3] + 1 != second[0] or second[0] not in smoothed  # the next session's first turn is not pulled in


def test_a_person_named_in_the_query_becomes_a_hint(lexical_store):
    a = lexical_store.add(user_id=U, content="likes hiking in the mountains", person="Carol")
    b = lexical_store.add(user_id=U, content="likes hiking near the sea", person="Dave")
    results = lexical_store.search("does carol like hiking", user_id=U)
    assert results[0].id == a and results[0].scores.get("person") == pytest.approx(0.15)
    assert "person" not in {k for r in results if r.id == b for k in r.scores}


@pytest.mark.parametrize("weight", [-0.1, 1.5, "0.2", True])
def test_context_weight_is_validated(lexical_store, weight):
    with pytest.raises(ValidationError):
        lexical_store.search("x", user_id=U, context_weight=weight)


def test_semantic_weight_defaults_to_the_settings_and_is_validated(store, monkeypatch, new_db_url):
    store.add(user_id=U, content="oat milk latte every morning")
    scores = store.search("oat milk", user_id=U)[0].scores
    # one candidate: its full-text match counts 1.0, its cosine its own value (no longer 1.0 by construction)
    assert scores["fts_part"] == 1.0 and scores["semantic_part"] == pytest.approx(scores["semantic"])
    assert scores["fused"] == pytest.approx(0.6 * scores["semantic_part"] + 0.4 * scores["fts_part"])
    parts = store.search("morning coffee", user_id=U, semantic_weight=1.0)[0].scores
    assert parts["fused"] == pytest.approx(parts["semantic_part"])
    for bad in (-0.5, 2, "0.6"):
        with pytest.raises(ValidationError):
            store.search("x", user_id=U, semantic_weight=bad)
    monkeypatch.setenv("NAVI_MEMORY_SEMANTIC_WEIGHT", "0.25")
    from navi_memory import MemoryStore

    with MemoryStore.open(new_db_url(), embeddings=False) as other:
        assert other.settings.semantic_weight == 0.25
