"""Embedding providers: outages, backfill, model changes, rebuilds, fixed dimensions, provider resolution."""

from __future__ import annotations

import math

import numpy as np
import pytest

from navi_memory import ConfigurationError, EmbeddingError, MemoryStore, Settings, ValidationError
from navi_memory.embeddings import Embedder, resolve_embedder

from .fakes import FakeEmbeddings
from .helpers import count_rows
from .test_items import stored_vector

U = "alice"


def states(store, ids):
    return [store.get(i, user_id=U).embedding.state for i in ids]


def test_provider_outage_on_write_keeps_the_write_and_lexical_search(store, fake_embeddings):
    fake_embeddings.fail = True
    first = store.add(user_id=U, content="I love lattes")
    second = store.add(user_id=U, content="espresso every morning")
    assert states(store, [first, second]) == ["error", "pending"]  # second: provider is backing off
    assert "ConnectionError" in store.get(first, user_id=U).embedding.error
    results = store.search("lattes", user_id=U)
    assert [r.id for r in results] == [first]
    assert results[0].signals == {"fts": True, "semantic": False, "substring": False, "context": False}
    status = store.embedding_status()
    assert (status["ready"], status["error"], status["pending"]) == (0, 1, 1)


def test_backing_off_provider_is_not_called_again(store, fake_embeddings):
    fake_embeddings.fail = True
    store.add(user_id=U, content="one")
    calls = fake_embeddings.calls
    store.add(user_id=U, content="two")
    store.search("two", user_id=U)
    assert fake_embeddings.calls == calls


def test_failing_query_embedding_falls_back_to_lexical(store, fake_embeddings):
    item = store.add(user_id=U, content="I love lattes")
    fake_embeddings.fail = True
    results = store.search("lattes", user_id=U)
    assert [r.id for r in results] == [item] and results[0].signals["semantic"] is False


def test_a_query_vector_of_another_size_still_gets_the_full_text_results(store):
    # The semantic query fails (PostgreSQL: EmbeddingError) or finds nothing (SQLite) while the
    # full-text query, sent at the same time, answers.
    item = store.add(user_id=U, content="I love lattes")
    store.add(user_id=U, content="tea in the morning")
    results = store.search("lattes", user_id=U, query_embedding=np.ones(7))
    assert [r.id for r in results] == [item]
    assert results[0].signals["fts"] is True and results[0].signals["semantic"] is False


def test_backfill_after_outage_embeds_everything(store, fake_embeddings):
    fake_embeddings.fail = True
    ids = [store.add(user_id=U, content=text) for text in ("I love lattes", "hiking trips", "tea at five")]
    fact = store.upsert_fact(user_id=U, category="preferences", key="drink", value="oat latte")
    fake_embeddings.fail = False
    seen = []
    report = store.backfill(progress=lambda done, total: seen.append((done, total)))
    assert (report.embedded, report.failed, report.remaining) == (4, 0, 0)
    assert seen and seen[-1] == (4, 4)
    assert states(store, ids + [fact.fact.item_id]) == ["ready"] * 4
    assert store.embedding_status()["ready"] == 4
    top = store.search("lattes", user_id=U)[0]
    assert top.id == ids[0] and top.signals["semantic"] is True
    assert store.backfill().embedded == 0


def test_backfill_while_provider_still_down_reports_failures(store, fake_embeddings):
    fake_embeddings.fail = True
    ids = [store.add(user_id=U, content=f"note {n}") for n in range(3)]
    report = store.backfill()
    assert (report.embedded, report.failed, report.remaining) == (0, 3, 3)
    assert states(store, ids) == ["error"] * 3


def test_backfill_one_user_only(store, fake_embeddings):
    fake_embeddings.fail = True
    mine = store.add(user_id=U, content="mine")
    theirs = store.add(user_id="bob", content="theirs")
    fake_embeddings.fail = False
    report = store.backfill(user_id=U)
    assert (report.embedded, report.remaining) == (1, 1)
    assert store.get(mine, user_id=U).embedding.state == "ready"
    assert store.get(theirs, user_id="bob").embedding.state != "ready"


def test_rows_of_another_model_are_pending_for_the_active_model(db_url, clock):
    model_a, model_b = FakeEmbeddings(model="model-a"), FakeEmbeddings(model="model-b", dimensions=32)
    with MemoryStore.open(db_url, embeddings=model_a, clock=clock) as a:
        ids = [a.add(user_id=U, content=t) for t in ("I love lattes", "hiking trips", "tea at five")]
        assert a.embedding_status()["ready"] == 3
    with MemoryStore.open(db_url, embeddings=model_b, clock=clock) as b:
        status = b.embedding_status()
        assert status["model"] == "FakeEmbeddings:model-b"
        assert (status["ready"], status["other_model"], status["items"]) == (0, 3, 3)
        assert b.search("lattes", user_id=U)[0].signals["semantic"] is False
        report = b.backfill()
        assert (report.embedded, report.remaining) == (3, 0)
        assert len(model_b.embedded_texts) == 3
        assert {b.get(i, user_id=U).embedding.model for i in ids} == {"FakeEmbeddings:model-b"}
        assert {b.get(i, user_id=U).embedding.dimensions for i in ids} == {32}
        assert b.search("lattes", user_id=U)[0].signals["semantic"] is True
    with MemoryStore.open(db_url, embeddings=model_a, clock=clock) as a:
        assert (a.embedding_status()["ready"], a.embedding_status()["other_model"]) == (0, 3)


def test_two_stores_on_one_file_see_each_others_vectors(db_url, clock):
    with MemoryStore.open(db_url, embeddings=FakeEmbeddings(), clock=clock) as a, \
            MemoryStore.open(db_url, embeddings=FakeEmbeddings(), clock=clock) as b:
        hike = a.add(user_id=U, content="hiking mountains")
        tea = a.add(user_id=U, content="tea time")
        assert b.search("hiking mountains", user_id=U, min_score=0)[0].scores["semantic"] == pytest.approx(1.0)
        a.update(hike, user_id=U, content="swimming lake")  # b's cached vector is now stale
        top = b.search("swimming lake", user_id=U, min_score=0)[0]
        assert top.id == hike and top.scores["semantic"] == pytest.approx(1.0)
        a.delete(tea, user_id=U)
        assert [r.id for r in b.search("tea time", user_id=U, min_score=0)] == [hike]
        a.forget(user_id=U)
        chess = a.add(user_id=U, content="chess club")
        assert [r.id for r in b.search("chess", user_id=U, min_score=0)] == [chess]
        assert b.search("chess", user_id=U, min_score=0)[0].signals["semantic"] is True


def test_lexical_rows_are_missing_until_backfilled(db_url, clock):
    with MemoryStore.open(db_url, embeddings=False, clock=clock) as lexical:
        lexical.add(user_id=U, content="I love lattes")
        assert lexical.embedding_status()["model"] is None
        with pytest.raises(ValidationError):
            lexical.backfill()
        with pytest.raises(ValidationError):
            lexical.rebuild_embeddings()
    with MemoryStore.open(db_url, embeddings=FakeEmbeddings(), clock=clock) as s:
        assert s.embedding_status()["missing"] == 1
        assert s.backfill().embedded == 1
        assert s.embedding_status()["missing"] == 0


def test_rebuild_embeddings_re_embeds_everything(store, fake_embeddings, db_path):
    ids = [store.add(user_id=U, content=t) for t in ("alpha one", "beta two")]
    store.add(user_id="bob", content="gamma three")
    fake_embeddings.embedded_texts.clear()
    report = store.rebuild_embeddings()
    assert (report.embedded, report.failed, report.remaining) == (3, 0, 0)
    assert sorted(fake_embeddings.embedded_texts) == ["alpha one", "beta two", "gamma three"]
    assert states(store, ids) == ["ready", "ready"]
    fake_embeddings.embedded_texts.clear()
    assert store.rebuild_embeddings(user_id="bob").embedded == 1
    assert fake_embeddings.embedded_texts == ["gamma three"]
    assert count_rows(db_path, "embeddings", "state = 'ready'") == 3


def test_rebuild_during_outage_leaves_rows_not_ready(store, fake_embeddings):
    item = store.add(user_id=U, content="alpha")
    fake_embeddings.fail = True
    report = store.rebuild_embeddings()
    assert (report.embedded, report.failed, report.remaining) == (0, 1, 1)
    assert store.get(item, user_id=U).embedding.state == "error"
    assert store.search("alpha", user_id=U)[0].id == item


def test_fixed_dimension_zero_pads_smaller_vectors(db_url, db_path, clock):
    fake = FakeEmbeddings(dimensions=64)
    settings = Settings(url=db_url, embedding_dimensions=100)
    with MemoryStore.open(db_url, embeddings=fake, settings=settings, clock=clock) as s:
        item = s.add(user_id=U, content="I love lattes")
        assert s.get(item, user_id=U).embedding.dimensions == 100
        vec = stored_vector(db_path, item)
        assert vec.size == 100 and not vec[64:].any()
        assert vec[:64].tolist() == pytest.approx(fake.expected("I love lattes"))
        assert s.search("lattes", user_id=U)[0].signals["semantic"] is True
        padded = s.add(user_id=U, content="precomputed", embedding=[1.0, 2.0])
        assert stored_vector(db_path, padded).tolist() == [1.0, 2.0] + [0.0] * 98
        with pytest.raises(ValidationError, match="dimensions"):
            s.add(user_id=U, content="too big", embedding=[0.1] * 101)


def test_fixed_dimension_smaller_than_provider_vectors_is_an_embedding_error(db_url, clock):
    settings = Settings(url=db_url, embedding_dimensions=32)
    with MemoryStore.open(db_url, embeddings=FakeEmbeddings(dimensions=64), settings=settings, clock=clock) as s:
        item = s.add(user_id=U, content="I love lattes")
        info = s.get(item, user_id=U).embedding
        assert info.state == "error" and "dimensions" in info.error
        assert s.search("lattes", user_id=U)[0].id == item


class NaNEmbeddings(FakeEmbeddings):
    def embed_documents(self, texts):
        return [[math.nan] * self.dimensions for _ in texts]


class ShortEmbeddings(FakeEmbeddings):
    def embed_documents(self, texts):
        return super().embed_documents(texts)[:-1]


@pytest.mark.parametrize("provider", [NaNEmbeddings(), ShortEmbeddings()], ids=["nan", "missing-vector"])
def test_bad_vectors_from_the_provider_are_recorded_as_errors(db_url, clock, provider):
    with MemoryStore.open(db_url, embeddings=provider, clock=clock) as s:
        item = s.add(user_id=U, content="hello world")
        assert s.get(item, user_id=U).embedding.state == "error"
        assert s.search("hello", user_id=U)[0].id == item


def test_resolve_embedder_choices(tmp_path):
    settings = Settings(url=f"sqlite:///{tmp_path}/x.db")
    assert resolve_embedder("none", settings) is None
    assert resolve_embedder("NONE", settings) is None
    assert resolve_embedder(False, settings) is None
    hashing = resolve_embedder("hashing", settings)
    assert isinstance(hashing, Embedder) and hashing.model_name == "hashing-256"
    assert resolve_embedder("hashing", Settings(url=settings.url, embedding_dimensions=128)).model_name == "hashing-128"
    wrapped = resolve_embedder(FakeEmbeddings(model="m"), settings)
    assert wrapped.model_name == "FakeEmbeddings:m"
    assert resolve_embedder(wrapped, settings) is wrapped
    assert resolve_embedder(None, Settings(url=settings.url, embeddings="none")) is None


def test_resolve_embedder_rejects_unknown_providers(tmp_path):
    settings = Settings(url=f"sqlite:///{tmp_path}/x.db")
    with pytest.raises(ConfigurationError, match="unknown embeddings provider"):
        resolve_embedder("word2vec", settings)
    with pytest.raises(ConfigurationError):
        resolve_embedder(object(), settings)
    with pytest.raises(ConfigurationError):
        MemoryStore.open(settings.url, embeddings="word2vec")


def test_hashing_provider_by_name_works_end_to_end(db_url, clock):
    with MemoryStore.open(db_url, embeddings="hashing", clock=clock) as s:
        item = s.add(user_id=U, content="I love lattes")
        assert s.embedding_model == "hashing-256"
        assert s.search("lattes", user_id=U)[0].signals == {"fts": True, "semantic": True, "substring": False, "context": False}
        assert s.get(item, user_id=U).embedding.dimensions == 256


def test_environment_selects_lexical_mode(db_url, monkeypatch):
    monkeypatch.setenv("NAVI_MEMORY_EMBEDDINGS", "none")
    with MemoryStore.open(db_url) as s:
        assert s.embedding_model is None
        item = s.add(user_id=U, content="plain text")
        assert s.get(item, user_id=U).embedding is None


def test_embed_on_write_false_leaves_rows_pending(db_url, clock, fake_embeddings):
    with MemoryStore.open(db_url, embeddings=fake_embeddings, clock=clock, embed_on_write=False) as s:
        item = s.add(user_id=U, content="later")
        assert fake_embeddings.document_calls == 0
        assert s.get(item, user_id=U).embedding.state == "pending"
        assert s.backfill().embedded == 1
        assert np.isclose(s.search("later", user_id=U)[0].scores["semantic"], 1.0)


def test_the_first_write_after_an_outage_catches_up_in_the_background(store, fake_embeddings):
    fake_embeddings.fail = True
    ids = [store.add(user_id=U, content=text) for text in ("I love lattes", "hiking trips")]
    other = store.add(user_id="bob", content="tea at five")
    assert states(store, ids) == ["error", "pending"]  # the second: backing off
    assert store.get(other, user_id="bob").embedding.state == "pending"
    fake_embeddings.fail = False
    fresh = store.add(user_id=U, content="still backing off")  # inside the back-off window: pending too
    store.embedder.reset_backoff()  # as if the window (30 s) had passed
    later = store.add(user_id=U, content="the provider answers again")
    assert store.wait_for_background(30)
    assert states(store, ids + [fresh, later]) == ["ready"] * 4
    assert store.get(other, user_id="bob").embedding.state == "ready"  # every user's rows
    assert store.embedding_status()["ready"] == 5
    calls = fake_embeddings.calls
    store.add(user_id=U, content="no debt left")
    assert store.wait_for_background(30) and fake_embeddings.calls == calls + 1  # no second catch-up


def test_embed_texts_gives_the_users_model_and_its_vectors(store, lexical_store, fake_embeddings) -> None:
    made = store.embed_texts(["oat milk", "a train"], user_id="u1")
    assert made.model == store.embedding_model
    assert made.vectors == [pytest.approx(v, abs=1e-6) for v in fake_embeddings.embed_documents(["oat milk", "a train"])]
    asked = store.embed_texts(["oat milk"], user_id="u1", query=True)
    assert asked.vectors == [pytest.approx(fake_embeddings.embed_query("oat milk"), abs=1e-6)]
    assert store.embed_texts([], user_id="u1").vectors == []
    for texts, message in ((["x"] * 257, "at most 256"), ("oat", "list of strings"), ([1], "must be a string"),
                           (["a\x00"], "NUL")):
        with pytest.raises(ValidationError, match=message):
            store.embed_texts(texts, user_id="u1")
    with pytest.raises(ValidationError, match="no embedding provider"):
        lexical_store.embed_texts(["x"], user_id="u1")
    fake_embeddings.fail = True
    with pytest.raises(EmbeddingError):
        store.embed_texts(["x"], user_id="u1")
