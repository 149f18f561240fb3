"""The browser's household, sessions and LLM cost pages, the 404 of a user with no memory and the
search page's relevance cutoff, on every backend, through Starlette's TestClient."""

from __future__ import annotations

import html

import pytest
from starlette.testclient import TestClient

from navi_memory import MemoryStore, Settings
from navi_memory.ui.app import create_app

from .ui_helpers import HOSTILE_SESSION, IMG, LOCAL, SCRIPT, fill, fill_activity


@pytest.fixture
def client(store, clock):
    fill(store, clock)
    fill_activity(store)
    return TestClient(create_app(store), base_url=LOCAL)


def test_household_page_lists_persons_with_role_aliases_and_pronouns(client):
    data = client.get("/api/users/alice/household").json()
    assert data["user"] == "alice" and data["mode"] == "multi"
    anna, ben = data["persons"]
    assert (anna["display_name"], anna["role"], anna["aliases"], anna["pronouns"]) == (
        f"Anna {SCRIPT}", "primary", [IMG, "Annie"], "she/her")
    assert (ben["role"], ben["aliases"], ben["birth_date"]) == ("partner", ["B"], "1990-04-01")
    page = client.get("/users/alice/household").text
    assert '<strong class="mode">multi</strong>' in page and "he/him" in page and '<span class="alias">Annie</span>' in page
    assert 'href="/users/alice/household" class="active"' in page
    frank = client.get("/api/users/frank/household").json()
    assert frank == {"user": "frank", "display_name": None, "locale": None, "mode": "single", "timezone": None,
                     "in_effect": "UTC", "persons": [], "memory_enabled": True}
    assert '<strong class="timezone">UTC</strong> (the store' in client.get("/users/frank/household").text
    assert "No persons recorded for this user." in client.get("/users/frank/household").text


def test_sessions_page_shows_counts_activity_and_extraction_state(client, clock):
    data = client.get("/api/users/frank/sessions").json()
    sessions = {s["session_id"]: s for s in data["sessions"]}
    assert set(sessions) == {"trip", "broken"} and data["page"]["shown"] == 2
    trip, broken = sessions["trip"], sessions["broken"]
    assert (trip["state"], trip["message_count"], trip["user_messages"], trip["error"]) == ("extracted", 2, 1, None)
    assert trip["extracted_at"] and trip["last_active"]
    assert broken["state"] == "error" and broken["extracted_at"] is None and f"provider down {SCRIPT}" in broken["error"]
    page = client.get("/users/frank/sessions").text
    assert 'href="/users/frank/session?id=trip"' in page and '<span class="state error">error</span>' in page
    assert f"provider down {html.escape(SCRIPT, quote=False)}" in page
    only = client.get("/api/users/frank/sessions", params={"state": "error"}).json()["sessions"]
    assert [s["session_id"] for s in only] == ["broken"]
    assert client.get("/api/users/frank/sessions", params={"state": "bogus"}).status_code == 400
    paged = client.get("/api/users/alice/sessions", params={"limit": 1}).json()
    assert paged["page"]["shown"] == 1 and paged["page"]["next_offset"] == 1


def test_session_page_shows_its_messages(client):
    data = client.get("/api/users/alice/session", params={"id": "morning chat"}).json()
    session = data["session"]
    assert session["state"] == "open" and session["extracted_at"] is None
    assert [(m["role"], m["content"]) for m in session["messages"]] == [
        ("user", f"I like green tea {SCRIPT}"), ("assistant", f"Noted! {IMG}")]
    page = client.get("/users/alice/session", params={"id": "morning chat"}).text
    assert '<li class="message user">' in page and "not yet" in page
    assert 'href="/users/alice/sessions" class="active"' in page
    hostile = client.get("/api/users/alice/session", params={"id": HOSTILE_SESSION})
    assert hostile.status_code == 200 and hostile.json()["session"]["session_id"] == HOSTILE_SESSION
    listing = client.get("/users/alice/sessions").text
    assert 'href="/users/alice/session?id=chat%20%22%3E%3Cimg%20src%3Dx%20onerror%3Dalert%281%29%3E"' in listing
    assert client.get("/users/alice/session").status_code == 400
    missing = client.get("/api/users/alice/session", params={"id": "trip"})  # frank's session, not alice's
    assert missing.status_code == 404 and "Oslo" not in missing.text


def test_usage_page_shows_calls_and_tokens_per_purpose(client):
    data = client.get("/api/users/frank/usage").json()
    assert data["totals"]["llm_calls"] == 3 and data["totals"]["failed_calls"] == 1
    assert (data["totals"]["input_tokens"], data["totals"]["output_tokens"]) == (2400, 600)
    assert data["purposes"]["extract"] == {"calls": 2, "input_tokens": 1200, "output_tokens": 300, "failed": 1,
                                           "sessions": 2}
    assert data["purposes"]["summary"]["calls"] == 1
    assert [s["session_id"] for s in data["sessions"]] == ["trip", "broken"]
    page = client.get("/users/frank/usage").text
    assert '<td class="n calls">3</td>' in page and "2,400" in page and 'href="/users/frank/session?id=trip"' in page
    assert client.get("/api/users/frank/usage", params={"limit": 1}).json()["sessions"][0]["session_id"] == "trip"
    alice = client.get("/users/alice/usage").text
    assert "No LLM calls recorded for this user." in alice


@pytest.mark.parametrize("path", ["items", "facts", "summary", "search?q=tea", "household", "sessions",
                                  "session?id=x", "usage", "items/1"])
def test_an_unknown_user_is_a_404_that_says_so(client, path):
    page = client.get(f"/users/nobody/{path}")
    assert page.status_code == 404 and "no memory stored for user nobody" in page.text
    assert "<nav>" not in page.text  # no navigation that would suggest a user with empty pages
    reply = client.get(f"/api/users/nobody/{path}")
    assert reply.status_code == 404 and reply.json() == {"error": "no memory stored for user nobody",
                                                          "type": "NotFoundError"}
    hostile = client.get(f"/users/{SCRIPT.replace('/', '%2F')}/{path}")
    assert hostile.status_code == 404 and "<script" not in hostile.text


def test_any_kind_of_memory_makes_a_user_known(store, client):
    store.upsert_fact(user_id="only-facts", category="profile", key="name", value="Ola")
    store.add_person("Pia", user_id="only-persons")
    store.set_summary("Quiet.", user_id="only-summary")
    store.add(user_id="only-archived", content="old")
    store.archive(store.list_items(user_id="only-archived")[0].id, user_id="only-archived")
    for user in ("only-facts", "only-persons", "only-summary", "only-archived", "frank"):
        assert client.get(f"/users/{user}/items").status_code == 200, user
    assert "No items match these filters." in client.get("/users/only-persons/items").text


def test_search_hides_results_below_the_relevance_floor_by_default(client, store):
    floor = store.settings.min_similarity
    assert floor > 0
    data = client.get("/api/users/alice/search", params={"q": "green tea"}).json()
    relevance = data["relevance"]
    assert relevance["floor"] == floor and relevance["show_all"] is False
    assert relevance["hidden"] == relevance["weaker"] > 0
    shown = [r["id"] for r in data["results"]]
    assert shown == [r.id for r in store.search("green tea", user_id="alice", min_similarity=floor)]
    assert not set(shown) & set(relevance["below_floor"])
    page = client.get("/users/alice/search", params={"q": "green tea"}).text
    assert f"{relevance['hidden']} weaker result(s) below the relevance floor {floor} hidden." in page
    assert 'href="/users/alice/search?q=green+tea&amp;all=1">Show all</a>' in page
    assert "below floor</div>" not in page


def test_search_shows_all_results_with_the_weaker_ones_marked(client, store):
    data = client.get("/api/users/alice/search", params={"q": "green tea", "all": "1"}).json()
    relevance = data["relevance"]
    assert relevance["show_all"] is True and relevance["hidden"] == 0 and relevance["weaker"] > 0
    ids = [r["id"] for r in data["results"]]
    assert ids == [r.id for r in store.search("green tea", user_id="alice", min_score=0)]
    assert set(relevance["below_floor"]) < set(ids)
    page = client.get("/users/alice/search", params={"q": "green tea", "all": "1"}).text
    assert page.count("below floor</div>") == relevance["weaker"] and page.count(' weak">') == relevance["weaker"]
    assert "Hide them" in page and 'name="all" value="1" checked' in page


def test_search_without_a_floor_or_for_the_newest_items_hides_nothing(client, db_url, fake_embeddings):
    everything = client.get("/api/users/alice/search", params={"q": "*"}).json()
    assert everything["relevance"]["hidden"] == 0 and len(everything["results"]) == 6
    unrelated = client.get("/api/users/alice/search", params={"q": "diary"}).json()
    assert unrelated["results"] == [] and unrelated["relevance"]["hidden"] == 6
    with MemoryStore.open(db_url, embeddings=fake_embeddings, settings=Settings(url=db_url, min_similarity=0.0)) as off:
        relaxed = TestClient(create_app(off), base_url=LOCAL).get("/api/users/alice/search", params={"q": "diary"}).json()
    assert len(relaxed["results"]) == 6 and relaxed["relevance"] == {"floor": 0.0, "show_all": False, "weaker": 0,
                                                                     "hidden": 0, "below_floor": []}


def test_usage_page_shows_calls_and_tokens_per_model(client):
    """Each call is booked with its chat model, a failed one (no reply to name it) too."""
    data = client.get("/api/users/frank/usage").json()
    assert sum(m["calls"] for m in data["models"].values()) == 3
    assert "unknown" not in data["models"]
    (name, model), = data["models"].items()  # one scripted model answered, then one failed: same name
    assert (model["calls"], model["failed"], model["input_tokens"], model["output_tokens"]) == (3, 1, 2400, 600)
    page = client.get("/users/frank/usage").text
    assert "<h2>By model</h2>" in page and f'<td class="key">{html.escape(name)}</td>' in page
    assert "No LLM calls recorded for this user." in client.get("/users/alice/usage").text
