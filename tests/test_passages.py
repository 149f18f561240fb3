"""A long text's vector from its passages: the cutting, the pooling, and the embedder that uses them."""

from __future__ import annotations

import asyncio
import re

import numpy as np
import pytest
from hypothesis import given, strategies as st

from navi_memory import ConfigurationError, MemoryStore, Settings
from navi_memory.embeddings import Embedder, resolve_embedder
from navi_memory.passages import PASSAGE_CHARS, passages, pooled

from .fakes import FakeEmbeddings


def _letters(text: str) -> str:
    return re.sub(r"\s+", "", text)


def test_a_text_within_the_limit_is_one_passage() -> None:
    assert passages("short note", 100) == ["short note"]
    assert passages("x" * PASSAGE_CHARS) == ["x" * PASSAGE_CHARS]


def test_cut_at_the_coarsest_break_that_fits() -> None:
    first, second = "First paragraph. " * 4, "Second one, longer. " * 6
    text = f"{first.strip()}\n\n{second.strip()}"
    assert passages(text, 130) == [first.strip(), second.strip()]  # whole paragraphs, not sentences
    lines = "\n".join(f"line {n} of the log" for n in range(20))
    assert all(p.startswith("line ") and p.endswith(" of the log") for p in passages(lines, 60))
    sentences = passages("One two three. Four five six! Seven eight nine? Ten.", 30)
    assert sentences == ["One two three. Four five six!", "Seven eight nine? Ten."]
    assert passages("alpha beta gamma delta", 11) == ["alpha beta", "gamma delta"]
    assert passages("x" * 25, 10) == ["x" * 10, "x" * 10, "x" * 5]  # a word longer than a passage


@given(st.text(st.sampled_from("ab .\n!"), max_size=400), st.integers(1, 60))
def test_passages_fit_and_lose_nothing_but_whitespace(text: str, limit: int) -> None:
    pieces = passages(text, limit)
    assert all(len(p) <= limit for p in pieces)
    assert _letters("".join(pieces)) == _letters(text)
    assert pieces and (len(text) <= limit or all(p.strip() for p in pieces))


def test_passages_refuse_a_limit_below_one() -> None:
    with pytest.raises(ValueError):
        passages("text", 0)


def test_pooled_is_the_length_weighted_mean_direction() -> None:
    assert np.allclose(pooled([[1.0, 0.0], [0.0, 1.0]], [1, 3]), np.array([1.0, 3.0]) / np.sqrt(10))
    assert np.allclose(pooled([[2.0, 0.0], [0.0, 4.0]], [1, 1]), np.array([1.0, 1.0]) / np.sqrt(2) * 3.0)
    assert np.allclose(pooled([[0.0, 0.0], [0.0, 5.0]], [1, 1]), [0.0, 2.5])  # a zero vector adds no direction
    assert not pooled([[1.0, 0.0], [-1.0, 0.0]], [1, 1]).any()
    with pytest.raises(ValueError):
        pooled([[1.0, 0.0]], [1, 2])


LONG = " ".join(f"Sentence number {n} says something about topic {n % 7}." for n in range(80))


def test_a_long_document_is_embedded_as_its_passages_in_one_call() -> None:
    provider = FakeEmbeddings()
    embedder = Embedder.wrap(provider, "fake")
    short, long_vector = embedder.embed_documents(["short", LONG])
    pieces = passages(LONG)
    assert len(pieces) > 1 and (provider.document_calls, provider.embedded_texts) == (1, ["short", *pieces])
    expected = pooled(provider.embed_documents(pieces), [len(p) for p in pieces])
    assert np.allclose(long_vector, expected) and np.allclose(short, provider.embed_documents(["short"])[0])
    assert np.allclose(asyncio.run(embedder.aembed_documents(["short", LONG]))[1], expected)
    whole = Embedder.wrap(provider, "fake", passage_chars=0).embed_documents([LONG])[0]
    assert np.allclose(whole, provider.embed_documents([LONG])[0]) and not np.allclose(whole, expected)


def test_long_texts_go_to_the_provider_in_bounded_requests() -> None:
    provider = FakeEmbeddings()
    embedder = Embedder.wrap(provider, "fake", passage_chars=100)
    texts = [LONG, LONG.upper(), "short"]  # 40 passages each, and one
    vectors = embedder.embed_documents(texts)
    every = [passages(text, 100) for text in texts]
    assert sum(map(len, every)) == 81 and provider.document_calls == 2  # 64 + 17, not one request of 81
    for text_vector, pieces in zip(vectors, every):
        assert np.allclose(text_vector, pooled(provider.embed_documents(pieces), [len(p) for p in pieces]))
    asyncio.run(embedder.aembed_documents(texts))
    assert provider.document_calls == 2 + 3 + 2  # the checks above: 3 calls; async: 2 again
    many = Embedder.wrap(FakeEmbeddings(), "fake").embed_documents(["short"] * 300)  # short texts: one request
    assert len(many) == 300


def test_the_passage_size_is_a_setting(tmp_path, monkeypatch) -> None:
    url = f"sqlite:///{tmp_path / 'm.db'}"
    assert Settings(url=url).embedding_passage_chars == PASSAGE_CHARS
    assert Settings.from_env({"NAVI_MEMORY_URL": url, "NAVI_MEMORY_EMBEDDING_PASSAGE_CHARS": "0"}
                             ).embedding_passage_chars == 0
    chosen = Settings.from_env({"NAVI_MEMORY_URL": url, "NAVI_MEMORY_EMBEDDING_PASSAGE_CHARS": "400"})
    assert resolve_embedder(FakeEmbeddings(), chosen).passage_chars == 400
    assert resolve_embedder("hashing", chosen).passage_chars == 0  # hashed words have no window
    for bad in ("50", "-1", "many"):
        with pytest.raises(ConfigurationError):
            Settings.from_env({"NAVI_MEMORY_URL": url, "NAVI_MEMORY_EMBEDDING_PASSAGE_CHARS": bad})
    with pytest.raises(ConfigurationError, match="embedding_passage_chars"):
        Settings(url=url, embedding_passage_chars=True)


def test_a_stored_long_note_carries_its_pooled_vector(db_url, clock) -> None:
    provider = FakeEmbeddings()
    with MemoryStore.open(db_url, Embedder.wrap(provider, "fake"), clock=clock) as store:
        store.add(user_id="u1", content=LONG)
        pieces = passages(LONG)
        assert provider.embedded_texts == pieces
        [text] = store.embed_texts([LONG], user_id="u1").vectors  # what a caller of the store gets
        records: list[dict] = []
        store.export(records.append, user_id="u1", with_vectors=True)
        [item] = [r for r in records if r.get("type") == "item"]
        expected = pooled(provider.embed_documents(pieces), [len(p) for p in pieces])
        assert np.allclose(item["embedding"]["vector"], expected, atol=1e-6)
        assert np.allclose(text, expected, atol=1e-6)
