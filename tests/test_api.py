"""The REST API with writes (``navi-memory serve``) on every backend: facts, items/chunks, scoping, errors."""

from __future__ import annotations

import pytest
from starlette.routing import Route
from starlette.testclient import TestClient

from navi_memory import ConfigurationError
from navi_memory.ui.api import create_api_app

from .ui_helpers import IMG, LOCAL, SCRIPT, TOKEN, fill


@pytest.fixture
def api(store):
    return TestClient(create_api_app(store, token=TOKEN), base_url=LOCAL,
                      headers={"Authorization": f"Bearer {TOKEN}"})


def test_the_api_never_starts_without_a_token(store):
    for token in (None, ""):
        with pytest.raises(ConfigurationError, match="REST API always needs one"):
            create_api_app(store, token=token)
    with pytest.raises(ConfigurationError, match="at least 16"):
        create_api_app(store, token="short")


def test_every_route_needs_the_bearer_token(store):
    app = create_api_app(store, token=TOKEN)
    anonymous = TestClient(app, base_url=LOCAL)
    paths = {r.path.replace("{user:path}", "alice").replace("{item_id:int}", "1"): r.methods
             for r in app.routes if isinstance(r, Route)}
    assert len(paths) >= 8
    for path, methods in paths.items():
        for method in methods - {"HEAD"}:
            assert anonymous.request(method, path, json={}).status_code == 401, (method, path)
    wrong = TestClient(app, base_url=LOCAL, headers={"Authorization": f"Bearer {TOKEN[:-1]}"})
    assert wrong.get("/api/users").status_code == 401
    # the browser UI's cookie is not accepted here: only the header
    cookie = TestClient(app, base_url=LOCAL, cookies={"navi_memory_token": TOKEN})
    assert cookie.get("/api/users").status_code == 401
    assert cookie.get(f"/api/users?token={TOKEN}", follow_redirects=False).status_code == 401


def test_item_lifecycle_create_get_update_reembeds_delete(api, store, fake_embeddings):
    created = api.post("/api/users/alice/items", json={"content": "I keep bees", "theme": "hobbies",
                                                       "tags": ["outdoor"], "title": "Bees"})
    assert created.status_code == 201
    item = created.json()["item"]
    assert created.headers["location"] == f"/api/users/alice/items/{item['id']}"
    assert item["embedding"]["state"] == "ready" and item["tags"] == ["outdoor"]
    assert api.get(created.headers["location"]).json()["item"]["content"] == "I keep bees"

    fake_embeddings.embedded_texts.clear()
    updated = api.patch(f"/api/users/alice/items/{item['id']}", json={"content": "I keep goats now"})
    assert updated.status_code == 200 and updated.json()["item"]["content"] == "I keep goats now"
    assert fake_embeddings.embedded_texts == ["Bees\nI keep goats now"]  # re-embedded with the new text
    assert updated.json()["item"]["embedding"]["state"] == "ready"
    hits = api.get("/api/users/alice/items", params={"q": "goats"}).json()["results"]
    assert hits[0]["id"] == item["id"] and hits[0]["signals"]["semantic"] is True

    fake_embeddings.embedded_texts.clear()
    pinned = api.patch(f"/api/users/alice/items/{item['id']}", json={"pinned": True, "status": "archived"})
    assert pinned.json()["item"]["pinned"] is True and fake_embeddings.embedded_texts == []

    assert api.delete(f"/api/users/alice/items/{item['id']}").status_code == 204
    assert api.get(f"/api/users/alice/items/{item['id']}").status_code == 404
    assert api.delete(f"/api/users/alice/items/{item['id']}").status_code == 404


def test_chunks_is_the_same_collection_as_items(api):
    made = api.post("/api/users/alice/chunks", json={"content": "Chunk of a long document"}).json()["item"]
    assert api.get(f"/api/users/alice/items/{made['id']}").json()["item"]["content"] == "Chunk of a long document"
    listed = api.get("/api/users/alice/chunks").json()
    assert [i["id"] for i in listed["items"]] == [made["id"]] and listed["page"]["total"] == 1
    assert api.get("/api/users/alice/chunks", params={"q": "document"}).json()["results"][0]["id"] == made["id"]


def test_list_filters_and_paging(api, store, clock):
    ids = fill(store, clock)
    data = api.get("/api/users/alice/items", params={"theme": "drinks", "limit": 1}).json()
    assert data["page"]["total"] == 2 and len(data["items"]) == 1 and data["page"]["next_offset"] == 1
    archived = api.get("/api/users/alice/items", params={"status": "archived"}).json()
    assert [i["id"] for i in archived["items"]] == [ids["old"]]
    summary = api.get("/api/users/alice/summary").json()
    assert summary["current"]["version"] == 2
    assert api.get("/api/users/alice/search", params={"q": "green tea"}).json()["results"][0]["id"] == ids["tea"]
    assert {u["id"] for u in api.get("/api/users").json()["users"]} == {"alice", "bob"}


def test_lists_and_search_filter_by_person_agent_run_and_recency(api, store, clock):
    store.put_household(user_id="carol", mode="multi", members=[{"display_name": "Ann", "aliases": ["mom"]},
                                                                  {"display_name": "Bob"}])
    store.add(user_id="carol", content="Ann grows tomatoes", person="Ann", agent_id="gardener", run_id="r1")
    store.add(user_id="carol", content="Bob grows peppers", person="Bob", agent_id="gardener", run_id="r2")
    clock.advance(days=40)
    store.add(user_id="carol", content="Ann bakes bread", person="Ann", agent_id="cook")

    def listed(**params):
        return sorted(i["content"] for i in api.get("/api/users/carol/items", params=params).json()["items"])

    def found(**params):
        return sorted(r["content"] for r in api.get("/api/users/carol/search", params={"all": 1, **params}).json()["results"])

    assert listed(person="mom") == listed(person="Ann") == ["Ann bakes bread", "Ann grows tomatoes"]
    assert api.get("/api/users/carol/items", params={"person": "mom"}).json()["page"]["total"] == 2
    assert listed(agent_id="gardener") == ["Ann grows tomatoes", "Bob grows peppers"]
    assert listed(agent_id="gardener", run_id="r2") == ["Bob grows peppers"]
    assert found(q="grows", person="Bob") == ["Bob grows peppers"]
    assert found(q="Ann", agent_id="cook") == ["Ann bakes bread"]
    assert found(q="Ann", recency_days=7) == ["Ann bakes bread"]
    store.archive(store.list_items(user_id="carol", agent_id="cook")[0].id, user_id="carol")
    assert listed(status="any", person="Ann") == ["Ann bakes bread", "Ann grows tomatoes"]
    assert api.get("/api/users/carol/search", params={"q": "x", "recency_days": "0"}).status_code == 422


def test_users_cannot_touch_each_others_items(api, store):
    bobs = store.add(user_id="bob", content="Bob's secret")
    for method, body in (("GET", None), ("PATCH", {"content": "hacked"}), ("DELETE", None)):
        response = api.request(method, f"/api/users/alice/items/{bobs}", json=body)
        assert response.status_code == 404 and response.json()["type"] == "NotFoundError", method
    assert store.get(bobs, user_id="bob").content == "Bob's secret"
    assert bobs not in [r["id"] for r in api.get("/api/users/alice/items", params={"q": "secret"}).json()["results"]]
    moved = api.post("/api/users/alice/items", json={"content": "x", "user_id": "bob"})
    assert moved.status_code == 422 and "path says which user" in moved.json()["error"]
    assert api.patch(f"/api/users/alice/items/{bobs}", json={"item_id": 1}).status_code == 422


def test_fact_upsert_list_and_delete(api, store):
    added = api.post("/api/users/alice/facts", json={"category": "profile", "key": "city", "value": "Lisbon"})
    assert added.status_code == 201 and added.json()["action"] == "added"
    assert added.json()["fact"]["source"] == "user_explicit" and added.json()["fact"]["confidence"] == 90
    same = api.post("/api/users/alice/facts", json={"category": "profile", "key": "city", "value": "Lisbon"})
    assert same.status_code == 200 and same.json()["action"] == "unchanged"
    moved = api.put("/api/users/alice/facts", json={"category": "profile", "key": "city", "value": "Porto",
                                                     "source": "conversation", "confidence": 60,
                                                     "source_context": "we moved to Porto", "expires_days": 30})
    assert moved.json()["action"] == "updated" and moved.json()["previous_value"] == "Lisbon"
    facts = api.get("/api/users/alice/facts").json()["facts"]
    assert len(facts) == 1 and facts[0]["value"] == "Porto" and facts[0]["expires_at"]
    assert [h["value"] for h in facts[0]["history"]] == ["Lisbon"]
    assert api.get("/api/users/bob/facts").json()["facts"] == []
    assert api.delete("/api/users/bob/facts", params={"key": "city"}).status_code == 404
    assert api.delete("/api/users/alice/facts", params={"key": "city", "category": "projects"}).status_code == 404
    assert api.delete("/api/users/alice/facts", params={"key": "city"}).json() == {"deleted": 1}
    assert store.get_all_facts(user_id="alice") == []


@pytest.mark.parametrize("method, path, body, status, message", [
    ("POST", "/api/users/alice/items", {"content": ""}, 422, "content is empty"),
    ("POST", "/api/users/alice/items", {"title": "no content"}, 422, "content must be a string"),
    ("POST", "/api/users/alice/items", {"content": "x", "type": "bogus"}, 422, "invalid type"),
    ("POST", "/api/users/alice/items", {"content": "x", "colour": "red"}, 422, "unknown item field(s): colour"),
    ("POST", "/api/users/alice/items", {"content": "x", "self": 1}, 422, "cannot be set in the body"),
    ("POST", "/api/users/alice/items", ["not", "an", "object"], 422, "must be a JSON object"),
    ("POST", "/api/users/alice/facts", {"category": "profile", "key": "k"}, 422, "value must be a string"),
    ("POST", "/api/users/alice/facts", {"category": "nope", "key": "k", "value": "v"}, 422, "invalid category"),
    ("POST", "/api/users/alice/facts", {"category": "profile", "key": "k", "value": "v", "x": 1}, 422,
     "unknown fact field(s): x"),
    ("POST", "/api/users/alice/facts", {"category": "profile", "key": "k", "value": "v", "confidence": 101}, 422,
     "confidence"),
    ("DELETE", "/api/users/alice/facts", None, 422, "?key="),
    ("PATCH", "/api/users/alice/items/1", {}, 422, "nothing to update"),
    ("PATCH", "/api/users/alice/items/1", {"colour": "red"}, 422, "cannot update field(s): colour"),
    ("GET", "/api/users/alice/items?limit=0", None, 422, "limit must be between 1 and 200"),
])
def test_rejected_input_is_422_with_the_store_message(api, store, method, path, body, status, message):
    store.add(user_id="alice", content="first item")
    response = api.request(method, path, json=body)
    assert response.status_code == status, response.text
    assert message in response.json()["error"]


def test_malformed_json_is_400(api):
    response = api.post("/api/users/alice/items", content=b"{not json", headers={"content-type": "application/json"})
    assert response.status_code == 400 and "not JSON" in response.json()["error"]


def test_unknown_method_and_route(api):
    assert api.put("/api/users/alice/items/1", json={}).status_code == 405
    assert api.get("/api/elsewhere").status_code == 404


def test_hostile_content_comes_back_escaped_but_intact(api):
    made = api.post("/api/users/alice/items", json={"content": SCRIPT, "title": IMG})
    assert "<" not in made.text and ">" not in made.text
    assert made.json()["item"]["content"] == SCRIPT and made.json()["item"]["title"] == IMG


def test_household_get_and_put(api, store, dump):
    empty = api.get("/api/users/alice/household").json()
    assert empty == {"user": "alice", "display_name": None, "locale": None, "mode": "single", "timezone": None,
                     "persons": [], "in_effect": "UTC", "memory_enabled": True}
    made = api.put("/api/users/alice/household", json={"mode": "multi", "members": [
        {"display_name": "Sarah", "aliases": ["mom"], "role": "spouse"}, {"display_name": "Leo", "role": "child"}]})
    assert made.status_code == 200, made.text
    assert made.json()["mode"] == "multi"
    assert [p["display_name"] for p in made.json()["persons"]] == ["Sarah", "Leo"]
    # Same name (any case) updates; unlisted persons stay.
    again = api.put("/api/users/alice/household", json={"members": [{"display_name": "sarah", "pronouns": "she/her"}]})
    sarah = [p for p in again.json()["persons"] if p["display_name"] == "Sarah"][0]
    assert sarah["pronouns"] == "she/her" and sarah["aliases"] == ["mom"] and len(again.json()["persons"]) == 2
    assert store.resolve_person_ref("mom", user_id="alice").display_name == "Sarah"
    assert api.get("/api/users/bob/household").json()["persons"] == []
    before = dump()
    for body, message in [({"mode": "single"}, "single-mode household holds one person"),
                          ({"members": [{"display_name": "Ana", "aliases": ["Leo"]}]}, "name of another person"),
                          ({"members": [{"display_name": "Ana"}, {"role": "guest"}]}, "display_name"),
                          ({"members": "Ana"}, "members must be a list"),
                          ({"members": [], "colour": 1}, "unknown household field(s): colour"),
                          ({"members": [{"display_name": "Ana"}], "timezone": "Mars/Olympus"}, "unknown time zone"),
                          ({"members": [{"display_name": "Ana"}], "locale": "english!"}, "not a language tag")]:
        response = api.put("/api/users/alice/household", json=body)
        assert response.status_code == 422 and message in response.json()["error"], response.text
    assert dump() == before  # checked before anything is written
    zoned = api.put("/api/users/alice/household", json={"timezone": "Europe/Lisbon"}).json()
    assert zoned["timezone"] == zoned["in_effect"] == "Europe/Lisbon" and len(zoned["persons"]) == 2
    assert api.put("/api/users/alice/household", json={"members": []}).json()["timezone"] == "Europe/Lisbon"


def test_the_household_name_and_locale_and_theme_descriptions_through_the_api(api, store, dump):
    named = api.put("/api/users/alice/household", json={"display_name": "The Millers", "locale": "en_us"})
    assert named.status_code == 200, named.text
    assert (named.json()["display_name"], named.json()["locale"]) == ("The Millers", "en-US")
    assert api.get("/api/users/alice/household").json()["display_name"] == "The Millers"
    cleared = api.put("/api/users/alice/household", json={"locale": ""}).json()
    assert (cleared["display_name"], cleared["locale"]) == ("The Millers", None)
    made = api.put("/api/users/alice/themes/Travel", json={"description": "Trips and bookings, not commutes."})
    assert made.status_code == 200, made.text
    assert made.json()["theme"]["slug"] == "travel" and made.json()["theme"]["display_name"] == "Travel"
    listed = api.get("/api/users/alice/themes").json()["themes"]
    assert [(t["slug"], t["description"]) for t in listed] == [("travel", "Trips and bookings, not commutes.")]
    assert api.get("/api/users/bob/themes").json()["themes"] == []
    before = dump()
    for body, message in [({"colour": 1}, "unknown theme field(s): colour"), ({"display_name": ""}, "empty"),
                          ({"description": 5}, "must be a string")]:
        response = api.put("/api/users/alice/themes/travel", json=body)
        assert response.status_code == 422 and message in response.json()["error"], response.text
    assert dump() == before


def test_the_users_time_zone_get_and_put(api, store, dump):
    assert api.get("/api/users/alice/timezone").json() == {"user": "alice", "timezone": None, "in_effect": "UTC"}
    made = api.put("/api/users/alice/timezone", json={"timezone": "Europe/Lisbon"})
    assert made.status_code == 200 and made.json() == {"user": "alice", "timezone": "Europe/Lisbon",
                                                      "in_effect": "Europe/Lisbon"}
    assert store.user_timezone(user_id="alice") == "Europe/Lisbon" and store.user_timezone(user_id="bob") is None
    before = dump()
    for body, message in [({"timezone": "Mars/Olympus"}, "unknown time zone"), ({}, "give {"),
                          ({"timezone": "UTC", "colour": 1}, "give {"), ({"timezone": 5}, "timezone")]:
        response = api.put("/api/users/alice/timezone", json=body)
        assert response.status_code == 422 and message in response.json()["error"], response.text
    assert dump() == before
    cleared = api.put("/api/users/alice/timezone", json={"timezone": None})
    assert cleared.json()["timezone"] is None and store.user_timezone(user_id="alice") is None


def test_household_replace_and_remove_a_person(api, store, dump):
    api.put("/api/users/alice/household", json={"mode": "multi", "members": [
        {"display_name": "Sarah", "aliases": ["mom"]}, {"display_name": "Leo"}, {"display_name": "Tom"}]})
    store.add(user_id="alice", content="Tom likes chess", person="Tom")
    removed = api.delete("/api/users/alice/household/persons/Tom")
    assert removed.status_code == 200 and removed.json()["removed"]["display_name"] == "Tom"
    assert store.list_items(user_id="alice", person="Tom")[0].content == "Tom likes chess"  # items keep the name
    leo = store.get_person("Leo", user_id="alice")
    assert api.delete(f"/api/users/alice/household/persons/{leo.id}").json()["removed"]["display_name"] == "Leo"
    assert api.delete("/api/users/alice/household/persons/Nobody").status_code == 404
    assert api.delete("/api/users/bob/household/persons/mom").status_code == 404  # another user's household
    # replace: the household becomes exactly the members given; a newcomer may take a leaving one's alias
    api.put("/api/users/alice/household", json={"members": [{"display_name": "Leo"}]})
    before = dump()
    twice = api.put("/api/users/alice/household", json={"replace": True, "members": [{"display_name": "Ana"},
                                                                                      {"display_name": "ana"}]})
    assert twice.status_code == 422 and "twice" in twice.json()["error"]
    assert api.put("/api/users/alice/household", json={"replace": "yes", "members": []}).status_code == 422
    assert dump() == before
    done = api.put("/api/users/alice/household", json={"replace": True, "members": [
        {"display_name": "sarah", "notes": "back"}, {"display_name": "Ana", "aliases": ["Leo"]}]}).json()
    assert [(p["display_name"], p["aliases"], p["notes"]) for p in done["persons"]] == [
        ("Sarah", ["mom"], "back"), ("Ana", ["Leo"], None)]
    # back to one person: replace and switch to single in one call (the spec's "remove others first")
    single = api.put("/api/users/alice/household", json={"replace": True, "mode": "single",
                                                          "members": [{"display_name": "Sarah"}]}).json()
    assert single["mode"] == "single" and [p["display_name"] for p in single["persons"]] == ["Sarah"]


def test_forget_a_user_needs_confirmation_and_leaves_others(api, store, clock):
    fill(store, clock)
    store.upsert_fact(user_id="alice", category="profile", key="city", value="Lisbon")
    assert api.delete("/api/users/alice").status_code == 422
    assert api.delete("/api/users/alice", params={"confirm": "bob"}).status_code == 422
    assert store.count_items(user_id="alice") > 0
    gone = api.delete("/api/users/alice", params={"confirm": "alice"})
    assert gone.status_code == 200 and gone.json()["user"] == "alice" and sum(gone.json()["deleted"].values()) > 0
    assert store.count_items(user_id="alice") == 0 and store.get_all_facts(user_id="alice") == []
    assert store.count_items(user_id="bob") > 0
    assert {u["id"] for u in api.get("/api/users").json()["users"]} == {"bob"}
    # the catch-all user path matches DELETE only: another method or a typo under a user stays a 404
    assert api.get("/api/users/alice/typo").status_code == 404
    assert api.get("/api/users/bob").status_code == 404


def test_memory_markdown(api, store):
    store.upsert_fact(user_id="alice", category="profile", key="city", value="Lisbon <b>")
    answer = api.get("/api/users/alice/memory.md")
    assert answer.status_code == 200 and answer.headers["content-type"] == "text/markdown; charset=utf-8"
    assert answer.text == store.memory_markdown(user_id="alice") and "Lisbon &lt;b&gt;" in answer.text  # escaped
    assert answer.headers["x-content-type-options"] == "nosniff"
