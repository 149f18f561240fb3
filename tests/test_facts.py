"""Facts: upsert actions, history, confidence rules, expiry, deletion, listing and search."""

from __future__ import annotations

import pytest

from navi_memory import Fact, FactChange, NotFoundError, ValidationError

pytestmark = pytest.mark.on_citus  # and on the Citus cluster (tests/conftest.py)


U = "alice"


def upsert(store, key="favorite_drink", value="flat white", category="preferences", **kw) -> FactChange:
    return store.upsert_fact(user_id=U, category=category, key=key, value=value, **kw)


def test_upsert_added_then_unchanged_then_updated(store, clock):
    added = upsert(store)
    assert isinstance(added, FactChange) and isinstance(added.fact, Fact)
    assert (added.action, added.previous_value) == ("added", None)
    assert (added.fact.key, added.fact.value, added.fact.category, added.fact.user_id) == (
        "favorite_drink", "flat white", "preferences", U)
    clock.advance(1)
    same = upsert(store)
    assert (same.action, same.previous_value, same.fact.id) == ("unchanged", None, added.fact.id)
    assert same.fact.last_verified_at == clock.now and same.fact.updated_at == added.fact.updated_at
    clock.advance(1)
    changed = upsert(store, value="oat latte")
    assert (changed.action, changed.previous_value, changed.fact.value) == ("updated", "flat white", "oat latte")
    assert changed.fact.id == added.fact.id and changed.fact.updated_at == clock.now
    assert changed["action"] == "updated"


def test_history_keeps_old_values_with_validity_interval(store, clock):
    t0 = clock.now
    upsert(store, value="tea")
    t1 = clock.advance(2)
    upsert(store, value="coffee", source="user_explicit")
    t2 = clock.advance(3)
    upsert(store, value="water")
    fact = store.get_fact("favorite_drink", user_id=U)
    assert fact.value == "water"
    assert [(h.value, h.valid_from, h.valid_to) for h in fact.history] == [("tea", t0, t1), ("coffee", t1, t2)]
    assert [(h.source, h.confidence) for h in fact.history] == [("conversation", 70), ("user_explicit", 90)]
    listed = store.get_all_facts(user_id=U, include_history=True)
    assert [h.value for h in listed[0].history] == ["tea", "coffee"]
    assert store.get_all_facts(user_id=U)[0].history == []


@pytest.mark.parametrize("source, confidence", [("tool_call", 95), ("auto_discovery", 95),
                                                ("user_explicit", 90), ("conversation", 70)])
def test_confidence_follows_source(store, source, confidence):
    assert upsert(store, source=source).fact.confidence == confidence


def test_explicit_confidence_wins(store):
    assert upsert(store, source="tool_call", confidence=40).fact.confidence == 40
    assert upsert(store, key="other", confidence=100).fact.confidence == 100


def test_source_details_round_trip(store):
    fact = upsert(store, source_context="said so in chat", source_session_id="s1", source_message_id="m7",
                  person="bob").fact
    assert (fact.source_context, fact.source_session_id, fact.source_message_id, fact.person) == (
        "said so in chat", "s1", "m7", "bob")


def test_expired_fact_leaves_get_all_facts_and_search(store, clock):
    upsert(store, key="mood", value="sleepy and tired", category="other", expires_days=1)
    upsert(store, key="city", value="Lisbon", category="profile")
    assert {f.key for f in store.get_all_facts(user_id=U)} == {"mood", "city"}
    assert any(r.kind == "fact" and r.fact["key"] == "mood" for r in store.search("sleepy", user_id=U))
    clock.advance(2)
    assert {f.key for f in store.get_all_facts(user_id=U)} == {"city"}
    assert {f.key for f in store.get_all_facts(user_id=U, include_expired=True)} == {"mood", "city"}
    assert all(r.fact is None or r.fact["key"] != "mood" for r in store.search("sleepy tired", user_id=U))
    assert store.get_fact("mood", user_id=U).value == "sleepy and tired"  # direct lookup still works


def test_reconfirmed_expiring_fact_still_expires_in_search(store, clock):
    upsert(store, key="mood", value="sleepy and tired", category="other", expires_days=1)
    assert upsert(store, key="mood", value="sleepy and tired", category="other").action == "unchanged"
    clock.advance(2)
    assert store.get_all_facts(user_id=U) == []
    assert [r.id for r in store.search("sleepy tired", user_id=U)] == []


def test_reconfirmed_fact_search_item_matches_the_fact(store):
    upsert(store, key="city", value="Lisbon", category="profile", source="tool_call", person="bob")
    assert upsert(store, key="city", value="Lisbon", category="profile").action == "unchanged"
    fact = store.get_fact("city", user_id=U)
    assert (fact.confidence, fact.source, fact.person) == (95, "tool_call", "bob")
    hit = store.search("Lisbon", user_id=U)[0]
    assert (hit.fact["confidence"], hit.fact["source"], hit.person) == (95, "tool_call", "bob")
    assert [r.id for r in store.search("Lisbon", user_id=U, person="bob")] == [hit.id]


def test_delete_fact_by_key_in_every_category(store):
    upsert(store, key="name", value="Al", category="profile")
    upsert(store, key="name", value="project Al", category="projects")
    assert store.delete_fact("name", user_id=U) == 2
    assert store.get_all_facts(user_id=U) == []
    assert store.search("Al", user_id=U) == []


def test_delete_fact_limited_to_one_category(store):
    upsert(store, key="name", value="Al", category="profile")
    upsert(store, key="name", value="Nebula", category="projects")
    assert store.delete_fact("name", user_id=U, category="projects") == 1
    assert [(f.category, f.value) for f in store.get_all_facts(user_id=U)] == [("profile", "Al")]
    assert all(r.fact["value"] != "Nebula" for r in store.search("Nebula name", user_id=U))


def test_unknown_fact_key_is_not_found(store):
    upsert(store, key="name", value="Al", category="profile")
    with pytest.raises(NotFoundError):
        store.delete_fact("nope", user_id=U)
    with pytest.raises(NotFoundError):
        store.delete_fact("name", user_id=U, category="projects")
    with pytest.raises(NotFoundError):
        store.get_fact("nope", user_id=U)
    assert len(store.get_all_facts(user_id=U)) == 1


def test_get_all_facts_paging(store):
    for n in range(5):
        upsert(store, key=f"k{n}", value=f"v{n}", category="other")
    keys = [f.key for f in store.get_all_facts(user_id=U, sort_by="key", sort_order="asc")]
    assert keys == ["k0", "k1", "k2", "k3", "k4"]
    page = store.get_all_facts(user_id=U, sort_by="key", sort_order="asc", limit=2, offset=1)
    assert [f.key for f in page] == ["k1", "k2"]
    assert store.get_all_facts(user_id=U, sort_by="key", sort_order="asc", limit=2, offset=4)[0].key == "k4"
    assert store.get_all_facts(user_id=U, offset=5) == []


def test_get_all_facts_sorting(store, clock):
    upsert(store, key="b", value="1", category="technical", confidence=50)
    clock.advance(1)
    upsert(store, key="a", value="2", category="profile", confidence=90)
    clock.advance(1)
    upsert(store, key="c", value="3", category="projects", confidence=70)
    def keys(**kw):
        return [f.key for f in store.get_all_facts(user_id=U, **kw)]
    assert keys(sort_by="key", sort_order="desc") == ["c", "b", "a"]
    assert keys(sort_by="confidence", sort_order="desc") == ["a", "c", "b"]
    assert keys(sort_by="updated_at", sort_order="asc") == ["b", "a", "c"]
    assert keys(sort_by="created_at", sort_order="desc") == ["c", "a", "b"]
    assert keys(sort_by="category", sort_order="asc") == ["a", "c", "b"]
    assert keys() == ["b", "c", "a"]  # default: category, descending


def test_get_all_facts_search_and_category_filters(store):
    upsert(store, key="favorite_drink", value="flat white")
    upsert(store, key="home_city", value="Lisbon", category="profile")
    upsert(store, key="editor", value="vim 100%", category="technical")
    assert [f.key for f in store.get_all_facts(user_id=U, search="lisb")] == ["home_city"]
    assert [f.key for f in store.get_all_facts(user_id=U, search="DRINK")] == ["favorite_drink"]
    assert [f.key for f in store.get_all_facts(user_id=U, search="profile")] == ["home_city"]
    assert [f.key for f in store.get_all_facts(user_id=U, search="0%")] == ["editor"]
    assert store.get_all_facts(user_id=U, search="_%") == []  # wildcards are literal
    # case ignored beyond ASCII on both backends (SQLite's LIKE folds ASCII letters only)
    upsert(store, key="school", value="École Normale, Zürich", category="profile")
    assert [f.key for f in store.get_all_facts(user_id=U, search="école")] == ["school"]
    assert [f.key for f in store.get_all_facts(user_id=U, search="ZÜRICH")] == ["school"]
    assert [f.key for f in store.get_all_facts(user_id=U, category="technical")] == ["editor"]


def test_all_users_admin_read_and_user_id_required_otherwise(store):
    store.upsert_fact(user_id="alice", category="profile", key="name", value="Alice")
    store.upsert_fact(user_id="bob", category="profile", key="name", value="Bob")
    assert {f.user_id for f in store.get_all_facts(all_users=True)} == {"alice", "bob"}
    assert [f.value for f in store.get_all_facts(user_id="bob")] == ["Bob"]
    assert [f.value for f in store.get_all_facts(user_id="bob", all_users=True)] == ["Bob"]
    with pytest.raises(ValidationError, match="user_id"):
        store.get_all_facts()


def test_facts_are_found_by_search(store):
    change = upsert(store, key="favorite_drink", value="flat white")
    store.add(user_id=U, content="went hiking on sunday")
    hits = store.search("favorite drink", user_id=U)
    top = hits[0]
    assert top.kind == "fact" and top.type == "fact" and top.theme == "preferences"
    assert top.fact["key"] == "favorite_drink" and top.fact["value"] == "flat white"
    assert top.fact["category"] == "preferences" and top.fact["id"] == change.fact.id
    assert top.content == "favorite drink: flat white"
    assert store.get(top.id, user_id=U).fact_id == change.fact.id


def test_updated_fact_is_searchable_by_new_value_only(store):
    upsert(store, key="favorite_drink", value="espresso")
    upsert(store, key="favorite_drink", value="matcha")
    hits = store.search("matcha", user_id=U)
    assert hits[0].fact["value"] == "matcha" and hits[0].signals["fts"]
    assert not any(r.signals["fts"] for r in store.search("espresso", user_id=U))
    assert len(store.list_items(user_id=U)) == 1


def test_search_result_fact_value_is_exact_when_key_contains_colon(store):
    upsert(store, key="note: coffee", value="strong")
    hit = store.search("coffee strong", user_id=U)[0]
    assert hit.kind == "fact" and hit.fact["value"] == "strong"


def test_fact_search_item_recreated_if_deleted(store):
    change = upsert(store, key="favorite_drink", value="tea")
    store.delete(change.fact.item_id, user_id=U)
    again = upsert(store, key="favorite_drink", value="green tea")
    assert again.fact.item_id not in (None, change.fact.item_id)
    assert store.search("green tea", user_id=U)[0].fact["value"] == "green tea"
