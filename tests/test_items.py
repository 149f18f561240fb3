"""Items: add/get/update/pin/archive/delete, listing, themes, batches, precomputed vectors, round-trips."""

from __future__ import annotations

import json
import sqlite3

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from navi_memory import Item, MemoryStore, NotFoundError, ValidationError
from navi_memory.vectors import from_blob

from .helpers import count_rows

pytestmark = pytest.mark.on_citus  # and on the Citus cluster (tests/conftest.py)


U = "alice"


def stored_vector(db_path, item_id: int) -> np.ndarray:
    conn = sqlite3.connect(str(db_path))
    try:
        (blob,) = conn.execute("SELECT vector FROM embeddings WHERE item_id = ?", (item_id,)).fetchone()
    finally:
        conn.close()
    return from_blob(blob)


def test_add_returns_an_int_id_and_get_returns_the_item(store, clock):
    item_id = store.add(user_id=U, content="  I love lattes  ")
    assert isinstance(item_id, int) and not isinstance(item_id, bool)
    item = store.get(item_id, user_id=U)
    assert isinstance(item, Item)
    assert (item.id, item.user_id, item.content, item.type, item.theme, item.status, item.pinned) == (
        item_id, U, "I love lattes", "note", "general", "active", False)
    assert item.created_at == item.updated_at == clock.now


def test_new_item_is_embedded_with_the_active_model(store, db_path, fake_embeddings):
    item = store.get(store.add(user_id=U, content="I love lattes"), user_id=U)
    assert item.embedding.state == "ready"
    assert item.embedding.model == store.embedding_model == "FakeEmbeddings:fake-hash"
    assert item.embedding.dimensions == 64
    assert stored_vector(db_path, item.id).tolist() == pytest.approx(fake_embeddings.expected("I love lattes"))


def test_get_accepts_a_digit_string_id(store):
    item_id = store.add(user_id=U, content="x marks the spot")
    assert store.get(str(item_id), user_id=U).id == item_id


def test_update_content_re_embeds_and_search_follows_the_new_wording(store, db_path, fake_embeddings, clock):
    item_id = store.add(user_id=U, content="I enjoy hiking in the mountains")
    clock.advance(1)
    updated = store.update(item_id, user_id=U, content="Prefers swimming at the lake")
    assert updated.content == "Prefers swimming at the lake"
    assert updated.updated_at == clock.now and updated.created_at < clock.now
    assert updated.embedding.state == "ready"
    assert stored_vector(db_path, item_id).tolist() == pytest.approx(
        fake_embeddings.expected("Prefers swimming at the lake"))
    new = store.search("swimming lake", user_id=U)
    assert new[0].id == item_id and new[0].signals == {"fts": True, "semantic": True, "substring": False, "context": False}
    old = store.search("hiking mountains", user_id=U)
    assert all(not r.signals["fts"] for r in old)
    assert new[0].scores["semantic"] > max([r.scores.get("semantic", -1) for r in old] or [-1])


def test_update_with_same_content_does_not_call_the_provider(store, fake_embeddings):
    item_id = store.add(user_id=U, content="stable text")
    calls = fake_embeddings.document_calls
    store.update(item_id, user_id=U, content="stable text", tags=["t"])
    assert fake_embeddings.document_calls == calls
    assert store.get(item_id, user_id=U).embedding.state == "ready"


def test_update_title_re_embeds_title_and_content(store, db_path, fake_embeddings):
    item_id = store.add(user_id=U, content="body text")
    store.update(item_id, user_id=U, title="A Title")
    assert stored_vector(db_path, item_id).tolist() == pytest.approx(fake_embeddings.expected("A Title\nbody text"))


def test_update_rejects_unknown_fields(store):
    item_id = store.add(user_id=U, content="x")
    with pytest.raises(ValidationError, match="user_id|id"):
        store.update(item_id, user_id=U, id=5)


def test_pin_and_unpin(store):
    item_id = store.add(user_id=U, content="pin me")
    assert store.pin(item_id, user_id=U).pinned is True
    assert store.get(item_id, user_id=U).pinned is True
    assert store.pin(item_id, user_id=U, pinned=False).pinned is False


def test_archive_excludes_from_default_search_and_list(store):
    keep = store.add(user_id=U, content="coffee with oat milk")
    gone = store.add(user_id=U, content="coffee with cow milk")
    assert store.archive(gone, user_id=U).status == "archived"
    assert [r.id for r in store.search("coffee", user_id=U)] == [keep]
    assert [i.id for i in store.list_items(user_id=U)] == [keep]
    assert {r.id for r in store.search("coffee", user_id=U, status="any")} == {keep, gone}
    assert [r.id for r in store.search("coffee", user_id=U, status="archived")] == [gone]
    assert [i.id for i in store.list_items(user_id=U, status="archived")] == [gone]
    assert store.archive(gone, user_id=U, archived=False).status == "active"
    assert {r.id for r in store.search("coffee", user_id=U)} == {keep, gone}


def test_delete_removes_item_and_embedding(store, db_path):
    item_id = store.add(user_id=U, content="delete me")
    assert count_rows(db_path, "embeddings", "item_id = ?", (item_id,)) == 1
    assert store.delete(item_id, user_id=U) is None
    with pytest.raises(NotFoundError):
        store.get(item_id, user_id=U)
    with pytest.raises(NotFoundError):
        store.delete(item_id, user_id=U)
    assert count_rows(db_path, "embeddings", "item_id = ?", (item_id,)) == 0
    assert store.search("delete", user_id=U) == []


def test_list_items_newest_first_with_paging(store, clock):
    ids = []
    for n in range(5):
        ids.append(store.add(user_id=U, content=f"note {n}"))
        clock.advance(hours=1)
    assert [i.id for i in store.list_items(user_id=U)] == ids[::-1]
    assert [i.id for i in store.list_items(user_id=U, limit=2, offset=1)] == [ids[3], ids[2]]


def test_list_items_filters_by_theme_types_and_status(store):
    a = store.add(user_id=U, content="a", theme="cooking", type="preference")
    b = store.add(user_id=U, content="b", theme="cooking", type="instruction")
    c = store.add(user_id=U, content="c", theme="travel", type="preference")
    d = store.add(user_id=U, content="d", theme="cooking", type="preference", status="archived")
    assert {i.id for i in store.list_items(user_id=U, theme="cooking")} == {a, b}
    assert {i.id for i in store.list_items(user_id=U, types=["preference"])} == {a, c}
    assert {i.id for i in store.list_items(user_id=U, types="instruction")} == {b}
    assert {i.id for i in store.list_items(user_id=U, theme="Cooking", types=["preference"], status="any")} == {a, d}


def test_theme_defaults_to_general(store):
    assert store.get(store.add(user_id=U, content="x"), user_id=U).theme == "general"
    assert store.get(store.add(user_id=U, content="y", theme=""), user_id=U).theme == "general"


@pytest.mark.parametrize("raw, slug", [("Cooking & Recipes!", "cooking-recipes"), ("  Travel  ", "travel"),
                                       ("work_projects", "work-projects"), ("2024 Plans", "2024-plans")])
def test_theme_names_are_normalised_to_slugs(store, raw, slug):
    assert store.get(store.add(user_id=U, content="x", theme=raw), user_id=U).theme == slug


def test_theme_without_letters_is_rejected(store):
    with pytest.raises(ValidationError):
        store.add(user_id=U, content="x", theme="!!!")


@pytest.mark.parametrize("raw, slugs", [("Été 2024", ("ete-2024", "été-2024")), ("日本語", ("日本語",))])
def test_theme_slugs_keep_non_ascii_letters(store, raw, slugs):
    assert store.get(store.add(user_id=U, content="x", theme=raw), user_id=U).theme in slugs


def test_a_theme_has_one_display_name_whichever_write_made_it(store):
    """add and update create themes under the same rule on both backends."""
    store.add(user_id=U, content="desk lamp", theme="home-office")
    moved = store.add(user_id=U, content="standing desk")
    store.update(moved, user_id=U, theme="garden-shed")
    names = {t.slug: t.display_name for t in store.list_themes(user_id=U)}
    assert names["home-office"] == "Home Office" and names["garden-shed"] == "Garden Shed"


def test_list_themes_counts_active_items_largest_first(store):
    store.add(user_id=U, content="a", theme="Cooking")
    store.add(user_id=U, content="b", theme="cooking")
    store.add(user_id=U, content="c", theme="travel")
    archived = store.add(user_id=U, content="d", theme="travel")
    store.archive(archived, user_id=U)
    themes = store.list_themes(user_id=U)
    assert [(t.slug, t.active_count) for t in themes] == [("cooking", 2), ("travel", 1)]
    assert themes[0].display_name == "Cooking"
    assert store.list_themes(user_id="nobody") == []


def test_add_many_stores_all_in_one_provider_call(store, fake_embeddings):
    calls = fake_embeddings.document_calls
    ids = store.add_many([{"user_id": U, "content": f"batch {n}", "theme": "batch"} for n in range(5)])
    assert len(ids) == 5 and ids == sorted(ids) and len(set(ids)) == 5
    assert fake_embeddings.document_calls == calls + 1
    assert [store.get(i, user_id=U).content for i in ids] == [f"batch {n}" for n in range(5)]
    assert all(store.get(i, user_id=U).embedding.state == "ready" for i in ids)
    assert store.add_many([]) == []


def test_add_many_with_one_bad_item_stores_nothing(store):
    with pytest.raises(ValidationError):
        store.add_many([{"user_id": U, "content": "fine"}, {"user_id": U, "content": ""}])
    with pytest.raises(ValidationError):
        store.add_many([{"user_id": U, "content": "fine"}, "not a mapping"])
    assert store.list_items(user_id=U) == []


def test_precomputed_embedding_is_stored_without_calling_the_provider(store, db_path, fake_embeddings):
    calls = fake_embeddings.document_calls
    vector = fake_embeddings.expected("custom vector")
    item_id = store.add(user_id=U, content="something else entirely", embedding=vector)
    assert fake_embeddings.document_calls == calls
    assert store.get(item_id, user_id=U).embedding.state == "ready"
    assert stored_vector(db_path, item_id).tolist() == pytest.approx(vector)
    hits = store.search("unrelated words", user_id=U, query_embedding=vector)
    assert hits[0].id == item_id and hits[0].scores["semantic"] == pytest.approx(1.0)


def test_precomputed_embedding_requires_a_model(lexical_store):
    with pytest.raises(ValidationError, match="model"):
        lexical_store.add(user_id=U, content="x", embedding=[0.1, 0.2])
    assert lexical_store.list_items(user_id=U) == []


def test_precomputed_embedding_with_named_model_and_no_provider(db_url, clock):
    with MemoryStore.open(db_url, embeddings=False, embedding_model="my-model", clock=clock) as s:
        item_id = s.add(user_id=U, content="x", embedding=[0.1, 0.2, 0.3])
        assert s.get(item_id, user_id=U).embedding.model == "my-model"
        assert s.search("anything", user_id=U, query_embedding=[0.1, 0.2, 0.3])[0].id == item_id


def test_wrong_size_precomputed_embedding_does_not_break_semantic_search(store):
    try:  # rejecting the vector (ValidationError) is fine; storing it must not poison the index
        store.add(user_id=U, content="precomputed thing", embedding=[1.0, 0.0, 0.0])
    except ValidationError:
        pass
    latte = store.add(user_id=U, content="I love lattes")
    hits = store.search("lattes coffee", user_id=U)
    assert any(r.id == latte and r.signals["semantic"] for r in hits)


def test_fields_round_trip(store, clock):
    item_id = store.add(
        user_id=U, content="Met Bob at the café", type="fact", title="Meeting", tags=["work", "bob", "work"],
        metadata={"nested": {"a": [1, 2]}, "emoji": "☕"}, source="chat", source_ref={"msg": 42},
        person="bob", confidence=80, observed_at="2024-12-01T08:30:00Z", pinned=True)
    item = store.get(item_id, user_id=U)
    assert item.type == "fact" and item.title == "Meeting" and item.pinned is True
    assert item.tags == ["work", "bob"]
    assert item.metadata == {"nested": {"a": [1, 2]}, "emoji": "☕"}
    assert (item.source, item.source_ref, item.person, item.confidence) == ("chat", {"msg": 42}, "bob", 80)
    assert item.observed_at.isoformat() == "2024-12-01T08:30:00+00:00"
    assert item["content"] == item.content and "tags" in item
    json.dumps(item.to_dict())
    updated = store.update(item_id, user_id=U, tags=["x"], metadata={"k": "v"}, theme="Social Life")
    assert (updated.tags, updated.metadata, updated.theme) == (["x"], {"k": "v"}, "social-life")


def test_expires_days_sets_expiry_from_the_clock(store, clock):
    item = store.get(store.add(user_id=U, content="temp", expires_days=2), user_id=U)
    assert (item.expires_at - clock.now).days == 2
    clock.advance(3)
    assert store.list_items(user_id=U) == []
    assert [i.id for i in store.list_items(user_id=U, include_expired=True)] == [item.id]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(content=st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
                       min_size=1, max_size=300).filter(lambda t: t.strip()))
def test_any_valid_content_round_trips_and_stays_searchable(store, content):
    item_id = store.add(user_id=U, content=content)
    assert store.get(item_id, user_id=U).content == content.strip()
    assert any(r.id == item_id for r in store.search("*", user_id=U, limit=1))
    store.delete(item_id, user_id=U)
