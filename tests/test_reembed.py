"""Moving the stored vectors to a new embedding model without downtime (``reembed``).

Each user's searches read one model's vectors: the old one until all of the user's items have a
vector of the new model, then the new one; the cosines a search reports are those of that model.
Runs on SQLite, PostgreSQL and the Citus cluster.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from navi_memory import ConfigurationError, MemoryStore, ValidationError

from .fakes import FakeClock, FakeEmbeddings

pytestmark = pytest.mark.on_citus

TEXTS = {
    "ann": ["ann keeps bees in the garden", "ann plays the cello on sundays", "ann is allergic to walnuts"],
    "bob": ["bob runs marathons in the autumn", "bob collects vinyl records", "bob works as a nurse"],
}


@pytest.fixture
def old() -> FakeEmbeddings:
    return FakeEmbeddings("model-old", 64)


@pytest.fixture
def new() -> FakeEmbeddings:
    return FakeEmbeddings("model-new", 48)


def name(embedder: FakeEmbeddings) -> str:
    """The name the store gives the fake's vectors."""
    return f"FakeEmbeddings:{embedder.model}"


def cosine(embedder: FakeEmbeddings, query: str, text: str) -> float:
    a, b = np.array(embedder.expected(query)), np.array(embedder.expected(text))
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def semantic_of(store: MemoryStore, query: str, **where: Any) -> dict[str, float]:
    """Content -> the cosine the search reported, of the results with a semantic score."""
    results = store.search(query, limit=20, min_score=0, **where)
    return {r.content: r.scores["semantic"] for r in results if "semantic" in r.scores}


def reads_model(store: MemoryStore, embedder: FakeEmbeddings, user: str, query: str) -> bool:
    """Whether every semantic score of ``user``'s search is the cosine of ``embedder``'s vectors
    (and there is at least one)."""
    found = semantic_of(store, query, user_id=user)
    return bool(found) and all(score == pytest.approx(cosine(embedder, query, text), abs=1e-5)
                               for text, score in found.items())


@pytest.fixture
def filled(db_url: str, old: FakeEmbeddings, clock: FakeClock) -> str:
    with MemoryStore.open(db_url, embeddings=old, clock=clock) as store:
        for user, texts in TEXTS.items():
            for text in texts:
                store.add(user_id=user, content=text)
    return db_url


def moving(url: str, old: FakeEmbeddings, new: FakeEmbeddings, clock: FakeClock) -> MemoryStore:
    return MemoryStore.open(url, embeddings=new, previous_embeddings=old, clock=clock)


def test_each_user_reads_one_model_while_the_store_moves(filled: str, old: FakeEmbeddings, new: FakeEmbeddings,
                                                         clock: FakeClock) -> None:
    with moving(filled, old, new, clock) as store:
        # nothing moved yet: every search reads the old vectors, as before the model changed
        assert reads_model(store, old, "ann", "bees garden") and reads_model(store, old, "bob", "vinyl records")
        report = store.reembed(max_users=1)
        assert (report.users_moved, report.users_remaining, report.complete) == (1, 1, False)
        assert report.embedded == 3 and report.model == name(new) and report.previous_model == name(old)
        # ann (first by id) reads the new model, bob still the old one
        assert reads_model(store, new, "ann", "bees garden") and reads_model(store, old, "bob", "vinyl records")
        # writes meanwhile: each user's new item gets the vector their searches read
        store.add(user_id="ann", content="ann grows tomatoes")
        store.add(user_id="bob", content="bob grows peppers")
        assert reads_model(store, new, "ann", "grows tomatoes") and reads_model(store, old, "bob", "grows peppers")
        assert "ann grows tomatoes" in semantic_of(store, "grows tomatoes", user_id="ann")
        # an all-user search reads the old model until the move is complete: bob's vectors
        everyone = semantic_of(store, "grows peppers", all_users=True)
        assert everyone["bob grows peppers"] == pytest.approx(cosine(old, "grows peppers", "bob grows peppers"), abs=1e-5)
        status = store.embedding_status()
        assert (status["users_moved"], status["users_to_move"], status["previous_model"]) == (1, 1, name(old))
        assert status["previous_ready"] == 4 and status["ready"] == 4  # bob's (old) and ann's (new)
        report = store.reembed()
        assert (report.users_moved, report.users_remaining, report.complete) == (1, 0, True)
        assert reads_model(store, new, "bob", "grows peppers")
    with MemoryStore.open(filled, embeddings=new, clock=clock) as store:  # the move done: the new model alone
        assert reads_model(store, new, "bob", "vinyl records") and reads_model(store, new, "ann", "grows tomatoes")
        status = store.embedding_status()
        assert (status["ready"], status["other_model"], status["pending"], status["missing"]) == (8, 0, 0, 0)
        assert store.backfill().embedded == 0


def test_a_failing_provider_stops_the_move_and_a_later_run_resumes_it(filled: str, old: FakeEmbeddings,
                                                                     new: FakeEmbeddings, clock: FakeClock) -> None:
    with moving(filled, old, new, clock) as store:
        new.fail = True
        report = store.reembed()
        assert (report.users_moved, report.failed, report.complete) == (0, 3, False)
        assert reads_model(store, old, "ann", "bees garden")  # searches go on with the old model
        new.fail = False
        calls = new.document_calls
        report = store.reembed()
        assert (report.users_moved, report.embedded, report.complete) == (2, 6, True)
        assert new.document_calls - calls == 2  # one batch per user: nothing embedded twice
        assert reads_model(store, new, "ann", "bees garden") and reads_model(store, new, "bob", "vinyl records")


def test_an_item_changed_after_its_new_vector_was_made_is_embedded_again(filled: str, old: FakeEmbeddings,
                                                                        new: FakeEmbeddings, clock: FakeClock) -> None:
    with moving(filled, old, new, clock) as store:
        db = store.backend
        rows = db.pending_next(model=name(new), user_id="ann", limit=10, after_id=0)
        vectors = [np.array(new.expected(text), dtype=np.float32) for _, _, text in rows]
        assert db.store_next_embeddings(model=name(new), results=[(*r, v) for r, v in zip(rows, vectors)],
                                        now=clock()) == 3
        first = rows[0][0]
        store.update(first, user_id="ann", content="ann keeps chickens now")
        # its waiting vector was of the old text: ann is not switched until it is made again
        assert db.cut_over(user_id="ann", model=name(new), now=clock()) is False
        assert reads_model(store, old, "ann", "keeps chickens")
        report = store.reembed(user_id="ann")
        assert (report.users_moved, report.embedded) == (1, 1)
        found = semantic_of(store, "keeps chickens", user_id="ann")
        assert found["ann keeps chickens now"] == pytest.approx(cosine(new, "keeps chickens", "ann keeps chickens now"),
                                                                abs=1e-5)


def test_a_search_as_its_user_moves_reads_the_vectors_again(filled: str, old: FakeEmbeddings, new: FakeEmbeddings,
                                                            clock: FakeClock, monkeypatch: pytest.MonkeyPatch) -> None:
    with moving(filled, old, new, clock) as store:
        db = store.backend
        rows = db.pending_next(model=name(new), user_id="ann", limit=10, after_id=0)
        db.store_next_embeddings(model=name(new), now=clock(),
                                 results=[(*r, np.array(new.expected(r[2]), dtype=np.float32)) for r in rows])
        read = db.serving_model

        def then_moved(user_id: str) -> str | None:
            seen = read(user_id=user_id)
            if seen is None:  # the move commits right after the search read which model to use
                assert db.cut_over(user_id=user_id, model=name(new), now=clock())
            return seen

        monkeypatch.setattr(db, "serving_model", then_moved)
        # the search embeds the query with the old model, finds no old vector left, and reads the new ones
        assert reads_model(store, new, "ann", "bees garden")


def test_backfill_during_a_move_embeds_each_users_rows_with_their_model(filled: str, old: FakeEmbeddings,
                                                                       new: FakeEmbeddings, clock: FakeClock) -> None:
    with moving(filled, old, new, clock) as store:
        store.reembed(max_users=1)  # ann moved, bob not
        old.fail = new.fail = True  # an outage: the writes keep their rows without a vector
        store.add(user_id="ann", content="ann likes chess")
        store.add(user_id="bob", content="bob likes chess")
        old.fail = new.fail = False
        report = store.backfill()
        assert (report.embedded, report.failed, report.remaining) == (2, 0, 0)
        assert reads_model(store, new, "ann", "likes chess") and reads_model(store, old, "bob", "likes chess")


def test_items_stored_without_a_vector_stay_without_one(filled: str, old: FakeEmbeddings, new: FakeEmbeddings,
                                                       clock: FakeClock) -> None:
    with moving(filled, old, new, clock) as store:
        store.put_keyed(user_id="ann", namespace=("prefs",), key="tea", content="green tea", embed=False)
        assert store.reembed().complete
        assert store.embedding_status()["skipped"] == 1
        assert "green tea" not in semantic_of(store, "green tea", user_id="ann")


def test_the_throttle_pauses_between_batches(filled: str, old: FakeEmbeddings, new: FakeEmbeddings, clock: FakeClock,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    import navi_memory.operations.embedding as embedding

    monkeypatch.setattr(embedding, "monotonic", lambda: 100.0)  # embedding takes no time
    with moving(filled, old, new, clock) as store:
        report = store.reembed(batch_size=2, items_per_second=10)
    # per user: a batch of 2 (0.2 s at 10 a second), then of 1 (0.1 s)
    assert report.paused_seconds == pytest.approx(0.6) and report.complete


def test_a_move_needs_both_models(filled: str, old: FakeEmbeddings, new: FakeEmbeddings, clock: FakeClock) -> None:
    with MemoryStore.open(filled, embeddings=new, clock=clock) as store:
        with pytest.raises(ValidationError, match="previous_embeddings"):
            store.reembed()
    with pytest.raises(ConfigurationError, match="nothing to move"):
        MemoryStore.open(filled, embeddings=old, previous_embeddings=FakeEmbeddings("model-old", 64), clock=clock)
    with moving(filled, old, new, clock) as store:
        with pytest.raises(ValidationError, match="items_per_second"):
            store.reembed(items_per_second=0)


async def test_the_async_store_moves_too(filled: str, old: FakeEmbeddings, new: FakeEmbeddings, clock: FakeClock,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    import navi_memory.operations.embedding as embedding
    from navi_memory import AsyncMemoryStore

    monkeypatch.setattr(embedding, "monotonic", lambda: 100.0)
    store = await AsyncMemoryStore.open(filled, embeddings=new, previous_embeddings=old, clock=clock)
    try:
        report = await store.reembed(items_per_second=1000)  # its pauses awaited, not slept
        assert report.complete and report.paused_seconds == pytest.approx(0.006)
        results = await store.search("bees garden", user_id="ann", min_score=0)
        assert results[0].scores["semantic"] == pytest.approx(cosine(new, "bees garden", results[0].content), abs=1e-5)
    finally:
        await store.close()
