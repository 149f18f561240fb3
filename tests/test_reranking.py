"""The optional reranking stage: the pure re-ordering, the model adapters, and search with a model
(a deterministic scorer here; a real cross-encoder in test_onnx_reranker.py)."""

from __future__ import annotations

import asyncio
import math

import pytest

from navi_memory import AsyncMemoryStore, MemoryStore
from navi_memory.config import Settings
from navi_memory.errors import ConfigurationError
from navi_memory.reranking import DEFAULT_DEPTH, DEFAULT_WEIGHT, RerankError, Reranker, resolve_reranker
from navi_memory.retrieval.stage import blend, depth, reads_on, reorder

U = "alice"
NOTES = ["I love lattes with oat milk", "Espresso in the morning is a must", "Coffee beans from Kenya are fruity",
         "Went hiking in the Alps last summer"]


def by_length(query: str, texts: list[str]) -> list[float]:
    """A deterministic stand-in for a cross-encoder: shorter texts are better."""
    return [-float(len(t)) for t in texts]


def test_reorder_puts_scored_ids_first_best_first_and_keeps_ties_and_the_rest_in_order():
    assert reorder(["a", "b", "c", "d"], {"a": 0.1, "b": 0.9, "c": 0.1}) == ["b", "a", "c", "d"]
    assert reorder(["a", "b"], {}) == ["a", "b"]
    assert reorder([], {"x": 1.0}) == []
    assert depth(10, 30) == 30 and depth(50, 30) == 50


def test_blend_scales_both_scores_over_the_candidates_and_keeps_dropped_texts_last():
    assert blend([0.9, 0.5, 0.1], [-3.0, 5.0, 1.0], 0.5) == pytest.approx([0.5, 0.75, 0.25])
    assert blend([0.9, 0.5, 0.1], [-3.0, 5.0, 1.0], 1.0) == pytest.approx([0.0, 1.0, 0.5])  # the model's order
    assert blend([0.9, 0.5], [2.0, 2.0], 0.5) == pytest.approx([1.0, 0.5])  # a flat model keeps the first order
    assert blend([0.9, 0.5, 0.1], [-math.inf, 1.0, 0.0], 0.5)[0] == -math.inf
    assert blend([], [], 0.5) == []
    with pytest.raises(ValueError):
        blend([0.1], [], 0.5)
    with pytest.raises(ValueError):
        blend([0.1], [0.2], 1.5)


def test_reranker_checks_what_the_model_answers():
    assert Reranker(by_length, "len").score("q", ["aa", "a"]) == [-2.0, -1.0]
    assert Reranker(by_length, "len").score("q", []) == []
    assert Reranker(lambda q, t: [math.nan] * len(t), "nan").score("q", ["a"]) == [-math.inf]
    with pytest.raises(RerankError, match="1 scores for 2 texts"):
        Reranker(lambda q, t: [1.0], "short").score("q", ["a", "b"])
    with pytest.raises(RerankError, match="ZeroDivisionError"):
        Reranker(lambda q, t: [1 / 0], "broken").score("q", ["a"])
    with pytest.raises(ConfigurationError):
        Reranker(by_length, "len", depth=0)
    for weight in (0, -0.5, 1.5, True, "0.5"):
        with pytest.raises(ConfigurationError, match="weight"):
            Reranker(by_length, "len", weight=weight)  # type: ignore[arg-type]
    assert Reranker(by_length, "len").weight == DEFAULT_WEIGHT == 0.5


def test_resolve_accepts_callables_cross_encoders_compressors_and_names():
    class Pairs:
        def predict(self, pairs):
            return [len(text) for _, text in pairs]

    assert resolve_reranker(None) is None and resolve_reranker(False) is None
    assert resolve_reranker(None, "none") is None and resolve_reranker("") is None
    assert resolve_reranker(by_length).score("q", ["abc"]) == [-3.0]
    assert resolve_reranker(Pairs()).score("q", ["ab", "abc"]) == [2.0, 3.0]
    made = resolve_reranker("cross-encoder:some/model")
    assert made is not None and made.name == "cross-encoder:some/model" and made.depth == DEFAULT_DEPTH
    assert made.weight == DEFAULT_WEIGHT
    tuned = resolve_reranker(by_length, depth=50, weight=1.0)
    assert tuned is not None and (tuned.depth, tuned.weight) == (50, 1.0)
    with pytest.raises(ConfigurationError, match="unknown reranker"):
        resolve_reranker("bm25")
    with pytest.raises(ConfigurationError):
        resolve_reranker(42)


def test_a_langchain_document_compressor_scores_by_its_order_and_drops_rank_last():
    pytest.importorskip("langchain_core")
    from langchain_core.documents.compressor import BaseDocumentCompressor

    class KeepWithWord(BaseDocumentCompressor):
        """Keeps the documents holding a query word, shortest first."""

        def compress_documents(self, documents, query, callbacks=None):
            words = set(query.lower().split())
            kept = [d for d in documents if words & set(d.page_content.lower().split())]
            return sorted(kept, key=lambda d: len(d.page_content))

    scores = resolve_reranker(KeepWithWord()).score("coffee beans", ["beans and more beans", "no", "coffee"])
    assert scores[2] > scores[0] > scores[1] == -math.inf


def test_a_llamaindex_node_postprocessor_gives_its_scores_and_drops_rank_last(store):
    from llama_index.core.postprocessor.types import BaseNodePostprocessor  # the llamaindex extra

    class Shortest(BaseNodePostprocessor):
        """Scores nodes by shortness; ``drop`` leaves out the longest; ``unscored`` keeps order only."""

        drop: bool = True
        unscored: bool = False

        def _postprocess_nodes(self, nodes, query_bundle=None):
            assert query_bundle is not None and query_bundle.query_str.startswith("coffee")
            ranked = sorted(nodes, key=lambda n: len(n.node.get_content()))[:len(nodes) - 1 if self.drop else None]
            for n in ranked:
                n.score = None if self.unscored else 100.0 - len(n.node.get_content())
            return ranked

    texts = ["a long long text", "short", "mid text"]
    assert resolve_reranker(Shortest()).score("coffee", texts) == [-math.inf, 95.0, 92.0]
    assert resolve_reranker(Shortest(drop=False, unscored=True)).score("coffee", texts) == [1.0, 3.0, 2.0]
    _fill(store)
    store.set_reranker(resolve_reranker(Shortest(drop=False), weight=1.0))
    found = store.search("coffee espresso lattes", user_id=U, limit=3)
    assert [len(r.content) for r in found] == sorted(len(r.content) for r in found)


def _fill(store) -> None:
    for note in NOTES:
        store.add(user_id=U, content=note)


def test_search_reorders_its_candidates_by_the_model_and_records_the_score(store):
    _fill(store)
    plain = store.search("coffee espresso lattes", user_id=U, limit=3)
    store.set_reranker(Reranker(by_length, "len", depth=10, weight=1.0))  # the model's order alone
    ranked = store.search("coffee espresso lattes", user_id=U, limit=3)
    assert len(ranked) == 3 and [len(r.content) for r in ranked] == sorted(len(r.content) for r in ranked)
    assert all(r.scores["rerank"] == -len(r.content) for r in ranked)
    store.set_reranker(Reranker(by_length, "len", depth=10))  # blended with the first stage's score
    mixed = store.search("coffee espresso lattes", user_id=U, limit=3)
    blended = [r.scores["rerank_blend"] for r in mixed]
    assert blended == sorted(blended, reverse=True) and all(r.scores["rerank"] == -len(r.content) for r in mixed)
    assert {r.content for r in ranked} <= set(NOTES) and "rerank" not in plain[0].scores
    store.set_reranker(None)
    assert store.reranker is None and [r.id for r in store.search("coffee espresso lattes", user_id=U, limit=3)] \
        == [r.id for r in plain]


def test_only_the_best_depth_candidates_are_read_by_the_model(store):
    _fill(store)
    seen: list[int] = []

    def count(query: str, texts: list[str]) -> list[float]:
        seen.append(len(texts))
        return [0.0] * len(texts)

    store.set_reranker(Reranker(count, "count", depth=2))
    plain_order = [r.id for r in MemoryStore.search(store, "coffee espresso lattes milk", user_id=U, limit=4)]
    assert seen == [2] and len(plain_order) >= 2



def test_a_reranker_with_first_and_enough_reads_the_rest_only_when_none_of_the_first_is_enough(store):
    for i in range(6):
        store.add(user_id=U, content=f"coffee note {i}: espresso lattes" + " milk" * i)
    plain = [r.content for r in store.search("coffee espresso lattes", user_id=U, limit=6, min_score=0)]
    calls: list[list[str]] = []

    def last_is_best(query: str, texts: list[str]) -> list[float]:
        calls.append(texts)
        return [3.0 if t == plain[-1] else 0.0 for t in texts]

    two_steps = Reranker(last_is_best, "last", depth=6, weight=1.0, first=2, enough=2.5)
    assert two_steps.to_dict() == {"name": "last", "depth": 6, "weight": 1.0, "first": 2, "enough": 2.5}
    store.set_reranker(two_steps)
    found = store.search("coffee espresso lattes", user_id=U, limit=6, min_score=0)
    assert len(plain) == 6 and calls == [plain[:2], plain[2:]]  # none of the first two was enough
    assert found[0].content == plain[-1] and all("rerank" in r.scores for r in found)
    calls.clear()
    store.set_reranker(Reranker(lambda q, t: calls.append(t) or [3.0] * len(t), "sure", depth=6, first=2, enough=2.5))
    store.search("coffee espresso lattes", user_id=U, limit=6, min_score=0)
    assert [len(c) for c in calls] == [2]  # one of the first two was enough: the other four stay unread
    assert reads_on([0.5, 1.9], 2.0) and not reads_on([0.5, 2.0], 2.0) and reads_on([], 2.0)
    for bad in ({"first": 2}, {"enough": 1.0}, {"first": 0, "enough": 1.0}, {"first": True, "enough": 1.0},
                {"first": 2, "enough": math.inf}, {"first": 2, "enough": "1"}):
        with pytest.raises(ConfigurationError, match="first|enough"):
            Reranker(by_length, "len", **bad)  # type: ignore[arg-type]

def test_reranker_from_open_and_from_the_environment(db_url, fake_embeddings, monkeypatch):
    with MemoryStore.open(db_url, fake_embeddings, reranker=by_length) as store:
        assert store.reranker is not None and store.reranker.name == "by_length"
    monkeypatch.setenv("NAVI_MEMORY_RERANKER", "cross-encoder:some/model")
    assert Settings.from_env().reranker == "cross-encoder:some/model"
    with MemoryStore.open(db_url, fake_embeddings, settings=Settings.from_env()) as store:
        assert store.reranker is not None and store.reranker.name == "cross-encoder:some/model"
    with MemoryStore.open(db_url, fake_embeddings, settings=Settings.from_env(), reranker=False) as store:
        assert store.reranker is None


def test_async_store_reranks_too(db_url, fake_embeddings):
    async def main() -> list[str]:
        store = await AsyncMemoryStore.open(db_url, fake_embeddings,
                                            reranker=Reranker(by_length, "len", weight=1.0))
        try:
            for note in NOTES:
                await store.add(user_id=U, content=note)
            return [r.content for r in await store.search("coffee espresso lattes", user_id=U, limit=3)]
        finally:
            await store.close()

    found = asyncio.run(main())
    assert [len(t) for t in found] == sorted(len(t) for t in found)
