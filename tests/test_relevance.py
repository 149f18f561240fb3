"""Search never scores unrelated memories as relevant, and the adapters inject nothing for an unrelated message.

Min-max scaling used to turn a candidate set without spread (one note, or equal similarities)
into 1.0, so "what is the capital of France?" scored "my bank PIN is 4242" as a perfect match
and every adapter put it into the prompt. Now such sets keep their absolute similarity, and
``search(min_similarity=...)`` (the store's ``NAVI_MEMORY_MIN_SIMILARITY`` for the adapters)
drops results without evidence. Embeddings here: the hashing fake (cosines fixed by its
hashing; the ones relied on are stated); real semantics: tests/test_minilm.py.
"""

from __future__ import annotations

import pytest
from langchain.agents import create_agent
from langchain_core.messages import HumanMessage
from llama_index.core.base.llms.types import ChatMessage, MessageRole

from navi_memory import AsyncMemoryStore, MemoryStore, Settings, ValidationError, prompt
from navi_memory.config import DEFAULT_MIN_SIMILARITY
from navi_memory.errors import ConfigurationError
from navi_memory.integrations._context import MemoryContextBuilder
from navi_memory.integrations._tools import StoreCaller
from navi_memory.integrations.langchain import NaviMemoryMiddleware, NaviMemoryRunnable
from navi_memory.integrations.llamaindex import NaviMemoryBlock

from .fakes import FakeEmbeddings
from .test_langchain_memory import AgentChat

U = "u1"
FRANCE = "what is the capital of France?"
PIN_QUESTION = "what is my bank PIN?"
DIMS = 64  # FakeEmbeddings' size


def unit(index: int) -> list[float]:
    vector = [0.0] * DIMS
    vector[index] = 1.0
    return vector


@pytest.fixture
def pin_user(store):
    """The PIN and unrelated notes; hashing cosines with FRANCE: 0.0, 0.072, 0.12, -0.304 (all < 0.2)."""
    ids = {"pin": store.add(user_id=U, content="My bank PIN: 4242")}
    for name, text in (("dog", "I walk the dog every morning"), ("dentist", "Dentist appointment on Tuesday at 10"),
                       ("allergy", "Allergic to penicillin")):
        ids[name] = store.add(user_id=U, content=text)
    return ids


# -- normalisation through the store --------------------------------------------------------------

def test_a_single_unrelated_note_is_not_a_perfect_match(store):
    pin = store.add(user_id=U, content="my bank PIN is 4242")
    (only,) = store.search(FRANCE, user_id=U, min_score=0)
    assert only.id == pin and only.signals["fts"] is False
    # was 1.0: one candidate, min-max scaled to the top; now its cosine (0.198 with the hashing fake)
    assert only.scores["semantic_part"] == pytest.approx(only.scores["semantic"]) and only.score < 0.25
    assert only.score == pytest.approx(only.scores["semantic"])  # the score is the evidence, not the rank
    assert store.search(FRANCE, user_id=U, min_similarity=0.25) == []
    hidden = store.search(FRANCE, user_id=U)  # the store's floor, 0.25, by default
    assert hidden == [] and hidden.hidden == 1


def test_equal_similarities_are_not_scaled_to_one(store):
    ids = [store.add(user_id=U, content=text, embedding=unit(i + 1))
           for i, text in enumerate(["my bank PIN is 4242", "walk the dog", "tea: jasmine"])]
    results = store.search(FRANCE, user_id=U, query_embedding=unit(0), min_score=0)  # orthogonal to every note
    assert {r.id for r in results} == set(ids)
    assert all(r.scores["semantic"] == pytest.approx(0.0) for r in results)
    assert all(r.score == pytest.approx(0.0) for r in results)  # each was 0.6: equal scores min-maxed to 1.0
    assert store.search(FRANCE, user_id=U, query_embedding=unit(0), min_similarity=0.01) == []
    (same,) = store.search(FRANCE, user_id=U, query_embedding=unit(1), min_similarity=0.25)
    assert same.id == ids[0] and same.scores["semantic"] == pytest.approx(1.0)


@pytest.mark.parametrize("fusion", ["weighted", "rrf"])
def test_a_zero_query_vector_scores_no_similarity_on_every_backend(store, fusion):
    store.add(user_id=U, content="my bank PIN is 4242")
    store.add(user_id=U, content="walk the dog")
    results = store.search(FRANCE, user_id=U, query_embedding=[0.0] * DIMS, fusion=fusion, min_score=0)
    assert len(results) == 2
    assert all(r.scores["semantic"] == 0.0 for r in results)  # PostgreSQL's cosine distance was NaN
    assert store.search(FRANCE, user_id=U, query_embedding=[0.0] * DIMS, fusion=fusion, min_similarity=0.1) == []


# -- the relevance floor of search --------------------------------------------------------------------

@pytest.mark.parametrize("fusion", ["weighted", "rrf"])
def test_min_similarity_keeps_only_results_with_evidence(store, pin_user, fusion):
    assert len(store.search(FRANCE, user_id=U, fusion=fusion, min_score=0)) == 4  # off: a ranking of everything
    assert store.search(FRANCE, user_id=U, fusion=fusion, min_similarity=0.2) == []
    assert store.search(FRANCE, user_id=U, fusion=fusion) == []  # on by default (the store's 0.25)
    relevant = store.search(PIN_QUESTION, user_id=U, fusion=fusion, min_similarity=0.25)
    assert [r.id for r in relevant] == [pin_user["pin"]]
    # a full-text match of a content word counts as 0.1 of similarity: the dentist note shares
    # "dentist" with the query at a hashing cosine of 0.169
    dentist = store.search("when is the dentist appointment?", user_id=U, fusion=fusion, min_similarity=0.25)
    assert pin_user["dentist"] in [r.id for r in dentist]
    assert all(r.signals["fts"] or r.scores["semantic"] >= 0.25 for r in dentist)


def test_min_similarity_without_vectors_keeps_content_word_matches(lexical_store):
    shoes = lexical_store.add(user_id=U, content="running shoes size 44")
    lexical_store.add(user_id=U, content="it is what it is")
    assert [r.id for r in lexical_store.search("my shoes?", user_id=U, min_similarity=0.9)] == [shoes]
    assert lexical_store.search(FRANCE, user_id=U, min_similarity=0.9) == []
    assert lexical_store.search("what is it?", user_id=U, min_similarity=0.9) == []  # stop words only
    assert len(lexical_store.search("what is it?", user_id=U, min_score=0)) == 1


def test_min_similarity_keeps_the_conversation_neighbours_of_relevant_results(lexical_store):
    session = {"session_id": "s1"}
    question = lexical_store.add(user_id=U, content="Ann: where did you go on holiday?", source_ref=session)
    answer = lexical_store.add(user_id=U, content="Bob: Lisbon, last May", source_ref=session)
    lexical_store.add(user_id=U, content="Ann: I bought a bike", source_ref={"session_id": "s2"})
    results = lexical_store.search("holiday", user_id=U, min_similarity=0.5)
    assert [r.id for r in results] == [question, answer]
    assert results[1].signals["context"] is True


@pytest.mark.parametrize("bad", [-0.1, 1.5, "0.3", True, float("nan")])
def test_min_similarity_is_validated(store, bad):
    with pytest.raises(ValidationError, match="min_similarity"):
        store.search("x", user_id=U, min_similarity=bad)


def test_the_store_floor_comes_from_the_settings(monkeypatch, new_db_url):
    assert Settings(url="sqlite:///:memory:").min_similarity == DEFAULT_MIN_SIMILARITY == 0.25
    monkeypatch.setenv("NAVI_MEMORY_MIN_SIMILARITY", "0.4")
    with MemoryStore.open(new_db_url(), embeddings=False) as other:
        assert other.settings.min_similarity == 0.4
    for bad in ("-1", "1.5", "high", "nan"):
        monkeypatch.setenv("NAVI_MEMORY_MIN_SIMILARITY", bad)
        with pytest.raises(ConfigurationError, match="NAVI_MEMORY_MIN_SIMILARITY"):
            Settings.from_env()


# -- what the adapters inject -----------------------------------------------------------------------

def relevant_block(context) -> str | None:
    return None if context is None else context.volatile


def test_builder_injects_nothing_for_an_unrelated_message(store, pin_user):
    builder = MemoryContextBuilder(StoreCaller(store))
    assert builder.min_similarity == 0.25  # the store's setting
    context = builder.build(FRANCE, user_id=U)
    assert context.searched and context.results == [] and context.volatile is None
    pin = builder.build(PIN_QUESTION, user_id=U)
    assert [r.id for r in pin.results] == [pin_user["pin"]] and "4242" in pin.volatile
    # per adapter: 0 turns the floor off, a number overrides the store's
    assert MemoryContextBuilder(StoreCaller(store), min_similarity=0).build(FRANCE, user_id=U).volatile is not None
    strict = MemoryContextBuilder(StoreCaller(store), min_similarity=0.9)
    assert strict.build(PIN_QUESTION, user_id=U).results == []  # hashing cosine 0.671, + 0.1 for the word match
    with pytest.raises(ValueError, match="min_similarity"):
        MemoryContextBuilder(StoreCaller(store), min_similarity=2)


def test_store_setting_reaches_the_adapters(db_url, fake_embeddings, clock, pin_user):
    settings = Settings(url=db_url, min_similarity=0.0)
    with MemoryStore.open(db_url, embeddings=fake_embeddings, clock=clock, settings=settings) as loose:
        assert relevant_block(MemoryContextBuilder(StoreCaller(loose)).build(FRANCE, user_id=U)) is not None


def test_langchain_runnable_and_middleware_inject_no_unrelated_memory(store, pin_user):
    runnable = NaviMemoryRunnable(store=store, user_id=U)
    unrelated = runnable.invoke([HumanMessage(FRANCE)])
    assert not any(prompt.RELEVANT_HEADING in str(m.content) for m in unrelated)
    related = runnable.invoke([HumanMessage(PIN_QUESTION)])
    (block,) = [m.content for m in related if prompt.RELEVANT_HEADING in str(m.content)]
    assert "My bank PIN: 4242" in block and block.count("\n- [") == 1
    off = NaviMemoryRunnable(store=store, user_id=U, min_similarity=0).invoke([HumanMessage(FRANCE)])
    assert any(prompt.RELEVANT_HEADING in str(m.content) for m in off)

    model = AgentChat(script=["Paris.", "It is 4242."], tool_names=[])
    agent = create_agent(model, tools=[], middleware=[NaviMemoryMiddleware(store=store, user_id=U, session_id="s")])
    agent.invoke({"messages": [HumanMessage(FRANCE)]})
    assert not any(prompt.RELEVANT_HEADING in str(m.content) for m in model.calls[0])
    agent.invoke({"messages": [HumanMessage(PIN_QUESTION)]})
    assert "My bank PIN: 4242" in model.calls[1][-2].content


async def test_llamaindex_block_injects_no_unrelated_memory(store, pin_user, db_url, clock):
    def user(text: str) -> ChatMessage:
        return ChatMessage(role=MessageRole.USER, content=text)

    block = NaviMemoryBlock(store=store, user_id=U, record=False)
    assert prompt.RELEVANT_HEADING not in await block.aget([user(FRANCE)])
    assert "My bank PIN: 4242" in await block.aget([user(PIN_QUESTION)])
    astore = await AsyncMemoryStore.open(db_url, embeddings=FakeEmbeddings(), clock=clock)
    try:
        native = NaviMemoryBlock(store=astore, user_id=U, record=False)
        assert native.min_similarity is None and prompt.RELEVANT_HEADING not in await native.aget([user(FRANCE)])
        loose = NaviMemoryBlock(store=astore, user_id=U, record=False, min_similarity=0.0)
        assert prompt.RELEVANT_HEADING in await loose.aget([user(FRANCE)])
    finally:
        await astore.close()


def test_a_bare_asterisk_message_is_not_a_memory_query():
    assert prompt.should_retrieve("*", first_turn=False) is False
    assert prompt.should_retrieve(" * ", first_turn=False) is False
    assert prompt.should_retrieve("what is 6 * 7?", first_turn=False) is True
