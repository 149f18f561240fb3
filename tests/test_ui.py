"""The read-only browser UI and its /api JSON mirrors, on every backend, through Starlette's TestClient."""

from __future__ import annotations

import html
import json
import re

import pytest
from starlette.routing import Route
from starlette.testclient import TestClient

from navi_memory.ui.app import create_app

from .ui_helpers import HOSTILE_SESSION, IMG, LOCAL, SCRIPT, fill, fill_activity


@pytest.fixture
def filled(store, clock):
    return fill(store, clock)


@pytest.fixture
def client(store, filled):
    return TestClient(create_app(store), base_url=LOCAL)


def rows(page: str) -> int:
    return len(re.findall(r"<tr class=\"(?:active|archived)\">", page))


def test_every_route_is_get_only(store):
    app = create_app(store)
    routes = [r for r in app.routes if isinstance(r, Route)]
    assert len(routes) >= 12
    assert all(r.methods <= {"GET", "HEAD"} for r in routes), [(r.path, r.methods) for r in routes]


@pytest.mark.parametrize("method", ["post", "put", "patch", "delete"])
def test_writes_are_refused_and_change_nothing(client, filled, store, method):
    before = store.list_items(user_id="alice", status="any", limit=100)
    for path in ("/users/alice/items", f"/users/alice/items/{filled['tea']}", f"/api/users/alice/items/{filled['tea']}",
                 "/api/users/alice/facts"):
        response = client.request(method.upper(), path, json={"content": "changed"})
        assert response.status_code == 405
    assert store.list_items(user_id="alice", status="any", limit=100) == before


def test_users_page_lists_users_with_counts(client):
    page = client.get("/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert 'href="/users/alice/items"' in page.text and 'href="/users/bob/items"' in page.text
    users = {u["id"]: u for u in client.get("/api/users").json()["users"]}
    assert users["alice"]["items"] == 7 and users["alice"]["facts"] == 2 and users["bob"]["items"] == 1


def test_user_picker_redirects_to_the_items_page(client):
    response = client.get("/pick", params={"user": "a/../b c"}, follow_redirects=False)
    assert response.status_code == 303
    assert response.headers["location"] == "/users/a%2F..%2Fb%20c/items"


def test_items_page_shows_themes_embedding_state_and_hides_archived_by_default(client, filled):
    page = client.get("/users/alice/items").text
    assert "Alice drinks green tea every morning" in page
    assert "Lived in Lisbon" not in page
    assert 'class="state ready"' in page and "FakeEmbeddings:fake-hash" in page
    data = client.get("/api/users/alice/items").json()
    assert data["page"]["total"] == 6 and data["filters"]["archived"] is False
    assert {t["slug"]: t["active_count"] for t in data["themes"]} == {"drinks": 2, "hostile": 2, "places": 0,
                                                                       "profile": 1, "preferences": 1}
    tea = next(i for i in data["items"] if i["id"] == filled["tea"])
    assert tea["embedding"]["state"] == "ready" and tea["embedding"]["model"] == "FakeEmbeddings:fake-hash"


def test_include_archived_toggle_and_status_filter(client, filled):
    with_archived = client.get("/api/users/alice/items", params={"archived": "1"}).json()
    assert with_archived["page"]["total"] == 7
    assert "Lived in Lisbon" in client.get("/users/alice/items", params={"archived": "1"}).text
    only = client.get("/api/users/alice/items", params={"status": "archived"}).json()
    assert [i["id"] for i in only["items"]] == [filled["old"]]


def test_theme_and_type_filters(client, filled):
    drinks = client.get("/api/users/alice/items", params={"theme": "drinks"}).json()
    assert sorted(i["id"] for i in drinks["items"]) == sorted([filled["tea"], filled["coffee"]])
    prefs = client.get("/api/users/alice/items", params={"theme": "drinks", "type": "preference"}).json()
    assert [i["id"] for i in prefs["items"]] == [filled["coffee"]]
    page = client.get("/users/alice/items", params={"theme": "drinks", "type": "preference"}).text
    assert rows(page) == 1 and '<option selected>preference</option>' in page


def test_items_are_paged_with_a_total(store, client):
    store.add_many([{"user_id": "carol", "content": f"note number {n}"} for n in range(23)])
    first = client.get("/api/users/carol/items", params={"limit": 10}).json()
    assert first["page"] == {"limit": 10, "offset": 0, "shown": 10, "total": 23, "first": 1, "last": 10,
                             "previous_offset": None, "next_offset": 10}
    last = client.get("/api/users/carol/items", params={"limit": 10, "offset": 20}).json()
    assert last["page"]["shown"] == 3 and last["page"]["next_offset"] is None and last["page"]["previous_offset"] == 10
    seen = [i["id"] for o in (0, 10, 20) for i in client.get("/api/users/carol/items",
                                                               params={"limit": 10, "offset": o}).json()["items"]]
    assert len(set(seen)) == 23
    page = client.get("/users/carol/items", params={"limit": 10, "offset": 10, "theme": "general"}).text
    assert "items 11–20 of 23" in page
    assert 'href="/users/carol/items?limit=10&amp;theme=general&amp;offset=20"' in page


def test_count_items_matches_list_items(store, filled):
    for kwargs in ({}, {"status": "any"}, {"theme": "drinks"}, {"types": ["preference"]}, {"status": "archived"}):
        listed = store.list_items(user_id="alice", limit=1000, **kwargs)
        assert store.count_items(user_id="alice", **kwargs) == len(listed), kwargs
    assert store.count_items(all_users=True, status="any") == 8


def test_item_page_and_unknown_or_foreign_ids(client, filled):
    page = client.get(f"/users/alice/items/{filled['coffee']}")
    assert page.status_code == 200 and "Used to like espresso" in page.text
    assert client.get(f"/api/users/alice/items/{filled['coffee']}").json()["item"]["type"] == "preference"
    assert client.get(f"/users/alice/items/{filled['bob']}").status_code == 404
    missing = client.get("/api/users/alice/items/999999")
    assert missing.status_code == 404 and missing.json()["type"] == "NotFoundError"


def test_facts_page_shows_source_confidence_and_history(client):
    page = client.get("/users/alice/facts").text
    assert "Porto" in page and '<span class="old">Lisbon</span>' in page and "user_explicit" not in page
    data = client.get("/api/users/alice/facts").json()
    city = next(f for f in data["facts"] if f["key"] == "city")
    assert city["value"] == "Porto" and city["source"] == "conversation" and city["confidence"] == 70
    assert [h["value"] for h in city["history"]] == ["Lisbon"]
    only = client.get("/api/users/alice/facts", params={"category": "preferences"}).json()
    assert [f["key"] for f in only["facts"]] == ["drink"]
    assert client.get("/api/users/alice/facts", params={"q": "port"}).json()["facts"][0]["key"] == "city"


def test_facts_are_paged_and_expired_ones_are_optional(store, clock, client):
    for n in range(5):
        store.upsert_fact(user_id="dan", category="other", key=f"k{n}", value=f"v{n}")
    store.upsert_fact(user_id="dan", category="other", key="short", value="gone soon", expires_days=1)
    clock.advance(days=2)
    first = client.get("/api/users/dan/facts", params={"limit": 2, "sort": "key"}).json()
    assert [f["key"] for f in first["facts"]] == ["k0", "k1"] and first["page"]["next_offset"] == 2
    last = client.get("/api/users/dan/facts", params={"limit": 2, "offset": 4, "sort": "key"}).json()
    assert [f["key"] for f in last["facts"]] == ["k4"] and last["page"]["next_offset"] is None
    expired = client.get("/api/users/dan/facts", params={"expired": "1", "sort": "key", "order": "desc"}).json()
    assert expired["facts"][0]["key"] == "short" and expired["facts"][0]["expires_at"]


def test_summary_page_shows_current_and_earlier_versions(client):
    data = client.get("/api/users/alice/summary").json()
    assert data["current"]["version"] == 2 and [s["version"] for s in data["earlier"]] == [1]
    page = client.get("/users/alice/summary").text
    assert "Version 2" in page and "Version 1" in page and "Alice likes tea." in page
    assert client.get("/api/users/bob/summary").json() == {"user": "bob", "current": None, "earlier": []}


def test_search_shows_signals_and_score_breakdown(client, filled):
    data = client.get("/api/users/alice/search", params={"q": "green tea"}).json()
    top = data["results"][0]
    assert top["id"] == filled["tea"] and top["signals"]["fts"] is True
    assert {"fused", "fts_part"} <= set(top["scores"])
    page = client.get("/users/alice/search", params={"q": "green tea"}).text
    assert '<span class="signal on">fts</span>' in page and "fused" in page
    assert f"{top['score']:.3f}" in page


def test_search_respects_the_archived_toggle_and_stays_within_the_user(client, filled):
    plain = client.get("/api/users/alice/search", params={"q": "Lisbon archived note"}).json()["results"]
    assert filled["old"] not in [r["id"] for r in plain]
    archived = client.get("/api/users/alice/search", params={"q": "Lisbon archived note", "archived": "1"}).json()
    assert archived["results"][0]["id"] == filled["old"]
    diary = client.get("/api/users/alice/search", params={"q": "diary"}).json()["results"]
    assert filled["bob"] not in [r["id"] for r in diary]


def test_empty_search_shows_only_the_form(client):
    page = client.get("/users/alice/search")
    assert page.status_code == 200 and "result(s)" not in page.text
    assert client.get("/api/users/alice/search").json()["results"] == []


@pytest.mark.parametrize("path, params, message", [
    ("/api/users/alice/items", {"limit": "0"}, "limit must be between 1 and 200"),
    ("/api/users/alice/items", {"offset": "x"}, "offset must be an integer"),
    ("/api/users/alice/items", {"type": "bogus"}, "invalid type"),
    ("/api/users/alice/facts", {"category": "bogus"}, "invalid category"),
    ("/api/users/alice/search", {"q": "tea", "limit": "51"}, "limit must be between 1 and 50"),
])
def test_bad_parameters_are_400_with_the_message(client, path, params, message):
    response = client.get(path, params=params)
    assert response.status_code == 400 and message in response.json()["error"]
    page = client.get(path.replace("/api", ""), params=params)
    assert page.status_code == 400 and message in html.unescape(page.text)


def test_unknown_route_is_404(client):
    assert client.get("/nowhere").status_code == 404
    assert client.get("/api/nowhere").json()["error"]


def test_user_ids_with_slashes_and_markup_round_trip(store, client):
    user = f"team/{SCRIPT}"
    store.add(user_id=user, content="slashes in user ids")
    page = client.get("/")
    assert "/users/team%2F%3Cscript%3Ealert%281%29%3C%2Fscript%3E/items" in page.text
    data = client.get("/api/users/team%2F%3Cscript%3Ealert%281%29%3C%2Fscript%3E/items").json()
    assert data["user"] == user and data["items"][0]["content"] == "slashes in user ids"


ACTIVITY_PAGES = ("/users/alice/household", "/users/alice/sessions", "/users/alice/session?id=morning+chat",
                  "/users/frank/sessions", "/users/frank/session?id=broken", "/users/alice/usage",
                  "/users/alice/search?q=green+tea&all=1")


def test_stored_markup_is_escaped_in_every_page(client, filled, store):
    fill_activity(store)  # persons, sessions, messages and an extraction error with markup
    pages = [client.get(p).text for p in (
        "/", "/users/alice/items", f"/users/alice/items/{filled['script']}", f"/users/alice/items/{filled['img']}",
        "/users/alice/facts", "/users/alice/summary", "/users/alice/search?q=tea", *ACTIVITY_PAGES)]
    for page, hostile in zip(pages[-len(ACTIVITY_PAGES):], ACTIVITY_PAGES):
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page or "&lt;img src=x" in page, hostile
    joined = "".join(pages)
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in joined and "&#34;&gt;&lt;img src=x onerror=alert(1)&gt;" in joined
    for page in pages:
        assert "<script" not in page.lower() and "<img" not in page.lower()
        assert "onerror=alert" not in re.sub(r"&[#\w]+;[^<]*", "", page)  # only ever inside escaped text


def test_stored_markup_is_escaped_in_json(client, filled, store):
    fill_activity(store)
    for path in ("/api/users/alice/items", f"/api/users/alice/items/{filled['script']}", "/api/users/alice/facts",
                 "/api/users/alice/summary", "/api/users/alice/search?q=tea",
                 *(f"/api{p}" for p in ACTIVITY_PAGES)):
        response = client.get(path)
        assert response.headers["content-type"] == "application/json"
        assert "<" not in response.text and ">" not in response.text
        assert "\\u003cscript\\u003e" in response.text or "\\u003cimg" in response.text
    item = client.get(f"/api/users/alice/items/{filled['script']}").json()["item"]
    assert item["content"] == f"{SCRIPT} tea notes" and item["title"] == IMG  # same JSON, decoded intact
    assert json.loads(client.get("/api/users/alice/summary").text)["current"]["content"].endswith(SCRIPT)


def test_embedding_states_pending_and_error_are_shown(store, fake_embeddings):
    store.embed_on_write = False
    pending = store.add(user_id="erin", content="waiting for a vector")
    store.embed_on_write = True
    fake_embeddings.fail = True
    failed = store.add(user_id="erin", content="the provider was down")
    fake_embeddings.fail = False
    store.embedder.reset_backoff()
    client = TestClient(create_app(store), base_url=LOCAL)
    states = {i["id"]: i["embedding"] for i in client.get("/api/users/erin/items").json()["items"]}
    assert states[pending]["state"] == "pending"
    assert states[failed]["state"] == "error" and "simulated outage" in states[failed]["error"]
    page = client.get("/users/erin/items").text
    assert 'class="state pending"' in page and 'class="state error" title="' in page
    assert "simulated outage" in client.get(f"/users/erin/items/{failed}").text


def test_an_empty_page_has_no_pager(client):
    page = client.get("/users/bob/items", params={"theme": "nothing-here"}).text
    assert "No items match these filters." in page and 'class="pager"' not in page


def test_users_are_paged(store, client):
    store.add_many([{"user_id": f"user-{n:02d}", "content": "hello"} for n in range(5)])
    assert [u["id"] for u in store.list_users(limit=2, offset=1)] == ["bob", "user-00"]
    assert len(store.list_users()) == 7
    first = client.get("/api/users", params={"limit": 3}).json()
    assert [u["id"] for u in first["users"]] == ["alice", "bob", "user-00"] and first["page"]["next_offset"] == 3
    last = client.get("/api/users", params={"limit": 3, "offset": 6}).json()
    assert [u["id"] for u in last["users"]] == ["user-04"] and last["page"]["next_offset"] is None
    assert 'href="/?limit=3&amp;offset=3"' in client.get("/", params={"limit": 3}).text


def test_every_route_answers(store, filled):
    fill_activity(store)
    app = create_app(store)
    client = TestClient(app, base_url=LOCAL)
    paths = [r.path.replace("{user:path}", "alice").replace("{item_id:int}", str(filled["tea"]))
             for r in app.routes if isinstance(r, Route)]
    for path in paths:
        response = client.get(path, params={"q": "tea", "user": "alice", "id": HOSTILE_SESSION})
        assert response.status_code == 200, (path, response.text[:200])
        assert ("json" in response.headers["content-type"]) == path.startswith("/api/")
