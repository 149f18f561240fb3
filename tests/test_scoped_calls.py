"""Scopes hold on every call by id (issue 32.7): with ``agent_id`` / ``run_id`` set, ``get``,
``update``, ``pin``, ``archive``, ``delete``, ``get_fact`` and ``delete_fact`` reach only what a
search with the same scopes finds; anything else is ``NotFoundError``, as another user's id, and
is left unchanged. Without scopes a call reaches every item of the user, as before."""

from __future__ import annotations

import pytest

from navi_memory import AsyncMemoryStore, NotFoundError, ValidationError

from .fakes import FakeEmbeddings

U = "alice"


@pytest.fixture
def items(store):
    ids = {"A1": store.add(user_id=U, content="A1 note: the Lisbon flight leaves Friday", agent_id="A1", run_id="r1"),
           "B": store.add(user_id=U, content="B note: the Lisbon essay is due Monday", agent_id="B", run_id="r2"),
           "shared": store.add(user_id=U, content="shared note: Lisbon is the favourite city")}
    return store, ids


def _calls(store, item_id, **scope):
    """Every call by id, each with the scopes given."""
    return [lambda: store.get(item_id, user_id=U, **scope),
            lambda: store.update(item_id, user_id=U, content="overwritten", **scope),
            lambda: store.pin(item_id, user_id=U, **scope),
            lambda: store.archive(item_id, user_id=U, **scope),
            lambda: store.delete(item_id, user_id=U, **scope)]


@pytest.mark.parametrize("scope", [{"agent_id": "A1"}, {"run_id": "r1"}, {"agent_id": "A1", "run_id": "r1"}])
def test_a_scoped_call_never_reaches_another_agents_or_a_shared_item(items, scope):
    store, ids = items
    before = {name: store.get(i, user_id=U) for name, i in ids.items() if name != "A1"}
    for name in ("B", "shared"):  # search with this scope does not find them either
        assert ids[name] not in {r.id for r in store.search("Lisbon", user_id=U, **scope)}
        for call in _calls(store, ids[name], **scope):
            with pytest.raises(NotFoundError, match=f"no item {ids[name]} for this user"):  # as another user's
                call()
    assert {name: store.get(i, user_id=U) for name, i in ids.items() if name != "A1"} == before


def test_a_scoped_call_handles_its_own_item(items):
    store, ids = items
    mine = ids["A1"]
    assert store.get(mine, user_id=U, agent_id="A1", run_id="r1").content.startswith("A1 note")
    assert store.update(mine, user_id=U, agent_id="A1", title="trip").title == "trip"
    assert store.pin(mine, user_id=U, run_id="r1").pinned
    assert store.archive(mine, user_id=U, agent_id="A1").status == "archived"
    assert store.archive(mine, user_id=U, agent_id="A1", archived=False).status == "active"
    item = store.update(mine, user_id=U, agent_id="A1", content="A1 note: the flight leaves Saturday")
    assert (item.agent_id, item.run_id) == ("A1", "r1")  # the call's scope never moves the item
    store.delete(mine, user_id=U, agent_id="A1", run_id="r1")
    with pytest.raises(NotFoundError):
        store.get(mine, user_id=U)


def test_without_scopes_every_item_of_the_user_is_reached(items):
    store, ids = items
    assert {store.get(i, user_id=U).agent_id for i in ids.values()} == {"A1", "B", None}
    assert store.archive(ids["B"], user_id=U).status == "archived"
    store.delete(ids["shared"], user_id=U)
    with pytest.raises(NotFoundError):
        store.get(ids["A1"], user_id="bob", agent_id="A1")  # the user still comes first


def test_an_item_of_the_right_agent_in_another_run_is_out_of_scope(items):
    store, ids = items
    with pytest.raises(NotFoundError):
        store.get(ids["A1"], user_id=U, agent_id="A1", run_id="r2")
    with pytest.raises(NotFoundError):
        store.delete(ids["A1"], user_id=U, run_id="r2")
    assert store.get(ids["A1"], user_id=U).status == "active"


def test_a_scoped_update_never_changes_another_agents_fact(store):
    store.upsert_fact(user_id=U, category="preferences", key="seat", value="aisle", agent_id="B")
    fact_item = store.search("seat", user_id=U, agent_id="B")[0].id
    with pytest.raises(NotFoundError):
        store.update(fact_item, user_id=U, agent_id="A1", content="seat: window")
    assert store.get_fact("seat", user_id=U).value == "aisle" and not store.get_fact("seat", user_id=U).history
    assert store.update(fact_item, user_id=U, agent_id="B", content="seat: window").content == "seat: window"
    assert store.get_fact("seat", user_id=U, agent_id="B").value == "window"


def test_facts_keep_to_the_scope_of_the_call(store):
    store.upsert_fact(user_id=U, category="preferences", key="seat", value="aisle", agent_id="B", run_id="r2")
    store.upsert_fact(user_id=U, category="preferences", key="seat", value="window")  # shared
    with pytest.raises(NotFoundError):
        store.get_fact("seat", user_id=U, agent_id="A1")
    with pytest.raises(NotFoundError):
        store.get_fact("seat", user_id=U, run_id="r1")
    assert store.get_fact("seat", user_id=U, run_id="r2").value == "aisle"
    with pytest.raises(NotFoundError):
        store.delete_fact("seat", user_id=U, agent_id="A1")
    with pytest.raises(NotFoundError):
        store.delete_fact("seat", user_id=U, run_id="r1")
    assert sorted(f.value for f in store.get_all_facts(user_id=U)) == ["aisle", "window"]
    assert store.delete_fact("seat", user_id=U, agent_id="B", run_id="r2") == 1
    assert [f.value for f in store.get_all_facts(user_id=U)] == ["window"]


@pytest.mark.parametrize("bad", ["", " A1", "a\nb", "x" * 257])
def test_bad_scopes_of_a_call_by_id_are_refused(items, bad):
    store, ids = items
    for call in _calls(store, ids["A1"], agent_id=bad):
        with pytest.raises(ValidationError, match="agent_id"):
            call()
    with pytest.raises(ValidationError, match="run_id"):
        store.delete_fact("seat", user_id=U, run_id=bad)
    assert store.get(ids["A1"], user_id=U).content.startswith("A1 note")


async def test_the_async_store_keeps_to_the_scope_too(db_url, clock):
    store = await AsyncMemoryStore.open(db_url, embeddings=FakeEmbeddings(), clock=clock)
    try:
        other = await store.add(user_id=U, content="B note about Lisbon", agent_id="B")
        mine = await store.add(user_id=U, content="A1 note about Lisbon", agent_id="A1")
        for call in (store.get(other, user_id=U, agent_id="A1"), store.archive(other, user_id=U, agent_id="A1"),
                     store.delete(other, user_id=U, agent_id="A1")):
            with pytest.raises(NotFoundError):
                await call
        assert (await store.get(other, user_id=U)).status == "active"
        assert (await store.archive(mine, user_id=U, agent_id="A1")).status == "archived"
        await store.delete(mine, user_id=U, agent_id="A1")
    finally:
        await store.close()
