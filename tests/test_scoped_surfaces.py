"""Scopes hold on every surface (issue 32.7): an agent A1's tools (``MemoryTools`` for plain SDK
loops, the LangChain toolkit, the LlamaIndex tool spec, the MCP server) and the REST API's
requests by id with ``?agent_id=`` cannot get, archive, update or delete agent B's item or forget
B's fact (an unknown id, as another user's), and still handle A1's own."""

from __future__ import annotations

import json

import pytest
from mcp import Client
from starlette.testclient import TestClient

from navi_memory.integrations.langchain import NaviMemoryToolkit
from navi_memory.integrations.llamaindex import NaviMemoryToolSpec
from navi_memory.integrations.mcp import MemoryServer
from navi_memory.integrations.tools import MemoryTools
from navi_memory.ui.api import create_api_app

from .ui_helpers import LOCAL, TOKEN

U = "alice"


@pytest.fixture
def agents(store):
    """A1's item, B's item and fact, and a shared item (no agent) of one user."""
    ids = {"A1": store.add(user_id=U, content="A1: the Lisbon flight leaves Friday", agent_id="A1"),
           "B": store.add(user_id=U, content="B: the Lisbon essay is due Monday", agent_id="B"),
           "shared": store.add(user_id=U, content="shared: Lisbon is the favourite city")}
    store.upsert_fact(user_id=U, category="preferences", key="seat", value="aisle", agent_id="B")
    return store, ids


def _untouched(store, ids) -> None:
    assert store.get(ids["B"], user_id=U).status == "active"
    assert store.get(ids["shared"], user_id=U).status == "active"
    assert store.get_fact("seat", user_id=U, agent_id="B").value == "aisle"


def _check_tools(call, store, ids) -> None:
    """``call(name, arguments)`` runs one tool as agent A1 and returns its JSON answer."""
    for name in ("B", "shared"):  # what A1's search does not find, A1's get and archive do not reach
        for tool in ("memory_get", "memory_archive"):
            assert call(tool, {"item_id": ids[name]}) == {"error": f"no item {ids[name]} for this user"}
    assert "error" in call("memory_forget", {"key": "seat"})
    _untouched(store, ids)
    assert call("memory_get", {"item_id": ids["A1"]})["content"] == "A1: the Lisbon flight leaves Friday"
    assert call("memory_archive", {"item_id": ids["A1"]})["status"] == "archived"
    call("memory_save_fact", {"category": "preferences", "key": "seat", "value": "window"})  # A1's own fact
    assert call("memory_forget", {"key": "seat"}) == {"deleted": 1, "key": "seat"}
    _untouched(store, ids)


def test_memory_tools_keep_get_archive_and_forget_to_the_agent(agents):
    store, ids = agents
    bound = MemoryTools(store, U, agent_id="A1")
    _check_tools(lambda name, args: json.loads(bound.run(name, **args)), store, ids)
    per_call = MemoryTools(store)  # the scope given with each call, as an SDK loop does
    out = json.loads(per_call.dispatch("memory_get", {"item_id": ids["B"]}, user_id=U, agent_id="A1",
                                       errors="return"))
    assert out == {"error": f"no item {ids['B']} for this user"}
    assert json.loads(per_call.dispatch("memory_get", {"item_id": ids["B"]}, user_id=U))["id"] == ids["B"]


def test_the_themes_an_agent_lists_are_those_of_its_own_items(store):
    """The theme names and counts of another agent's items are that agent's memory: an agent-scoped
    ``memory_list_themes`` (and the tool guidance's theme hints) listed every theme of the user."""
    store.add(user_id=U, content="B: the hearing is on Tuesday", agent_id="B", theme="divorce-lawyer")
    store.add(user_id=U, content="A1: the Lisbon flight leaves Friday", agent_id="A1", theme="travel")
    store.add(user_id=U, content="A1: the hotel is booked", agent_id="A1", run_id="r1", theme="travel")
    store.add(user_id=U, content="shared: a note of no agent", theme="travel")
    store.set_theme("budget", user_id=U, description="money matters")  # a theme with no item
    listed = json.loads(MemoryTools(store, U, agent_id="A1").run("memory_list_themes"))["themes"]
    assert [(t["theme"], t["active_count"]) for t in listed] == [("travel", 2)]
    assert [(t.slug, t.active_count) for t in store.list_themes(user_id=U, agent_id="A1", run_id="r1")] == [("travel", 1)]
    assert [t.slug for t in store.list_themes(user_id=U, agent_id="nobody")] == []
    every = {t.slug: t.active_count for t in store.list_themes(user_id=U)}  # unscoped: the user's all
    assert (every["travel"], every["divorce-lawyer"], every["budget"]) == (3, 1, 0)
    from navi_memory.integrations._caller import StoreCaller
    from navi_memory.integrations._context import MemoryContextBuilder

    builder = MemoryContextBuilder(StoreCaller(store), mode="tools")
    hints = builder.build(None, user_id=U, scope={"agent_id": "A1"}).stable
    assert "travel" in hints and "divorce" not in hints
    assert "divorce" in builder.build(None, user_id=U).stable


def test_memory_tools_keep_to_the_run(store):
    mine = store.add(user_id=U, content="run r1 note", run_id="r1")
    other = store.add(user_id=U, content="run r2 note", run_id="r2")
    tools = MemoryTools(store, U, run_id="r1")
    assert "error" in json.loads(tools.run("memory_archive", item_id=other))
    assert json.loads(tools.run("memory_get", item_id=mine))["content"] == "run r1 note"
    assert store.get(other, user_id=U).status == "active"


async def test_async_tools_keep_to_the_agent(agents):
    store, ids = agents
    tools = MemoryTools(store, U, agent_id="A1")
    assert "error" in json.loads(await tools.arun("memory_archive", item_id=ids["B"]))
    assert json.loads(await tools.arun("memory_get", item_id=ids["A1"]))["id"] == ids["A1"]
    _untouched(store, ids)


def test_langchain_tools_keep_to_the_runs_agent(agents):
    store, ids = agents
    tools = {t.name: t for t in NaviMemoryToolkit(store=store).get_tools()}
    config = {"configurable": {"user_id": U, "agent_id": "A1"}}
    _check_tools(lambda name, args: json.loads(tools[name].invoke(args, config=config)), store, ids)


def test_llamaindex_tools_keep_to_the_bound_agent(agents):
    store, ids = agents
    tools = {t.metadata.name: t for t in NaviMemoryToolSpec(store, U, agent_id="A1").to_tool_list()}
    _check_tools(lambda name, args: json.loads(str(tools[name].call(**args))), store, ids)


async def test_an_mcp_server_for_an_agent_keeps_to_it(agents):
    store, ids = agents
    async with Client(MemoryServer(store, user_id=U, agent_id="A1").server) as client:
        async def call(name, args):
            return json.loads((await client.call_tool(name, args)).content[0].text)

        for name in ("B", "shared"):
            assert await call("memory_get", {"item_id": ids[name]}) == {"error": f"no item {ids[name]} for this user"}
            assert "error" in await call("memory_archive", {"item_id": ids[name]})
        assert "error" in await call("memory_forget", {"key": "seat"})
        _untouched(store, ids)
        assert (await call("memory_archive", {"item_id": ids["A1"]}))["status"] == "archived"
        added = await call("memory_add_note", {"content": "A1: pack sunscreen"})
        assert store.get(added["id"], user_id=U).agent_id == "A1"
    async with Client(MemoryServer(store, user_id=U).server) as client:  # no scope: the user's every item
        assert json.loads((await client.call_tool("memory_get", {"item_id": ids["B"]})).content[0].text)["id"] == \
            ids["B"]


def test_rest_requests_by_id_keep_to_the_agent_in_the_query(agents):
    store, ids = agents
    api = TestClient(create_api_app(store, token=TOKEN), base_url=LOCAL, headers={"Authorization": f"Bearer {TOKEN}"})
    as_a1 = {"agent_id": "A1"}
    for name in ("B", "shared"):
        path = f"/api/users/{U}/items/{ids[name]}"
        assert api.get(path, params=as_a1).status_code == 404
        assert api.patch(path, params=as_a1, json={"status": "archived"}).status_code == 404
        assert api.delete(path, params=as_a1).status_code == 404
        assert api.delete(path.replace("/items/", "/chunks/"), params=as_a1).status_code == 404
    assert api.delete(f"/api/users/{U}/facts", params={"key": "seat", **as_a1}).status_code == 404
    _untouched(store, ids)
    mine = f"/api/users/{U}/items/{ids['A1']}"
    assert api.get(mine, params=as_a1).json()["item"]["agent_id"] == "A1"
    assert api.get(f"/api/users/{U}/items/{ids['B']}").json()["item"]["agent_id"] == "B"  # no scope: any
    moved = api.patch(mine, params=as_a1, json={"agent_id": "B"})  # a PATCH never moves an item to another agent
    assert moved.status_code == 422 and "agent_id cannot be changed" in moved.json()["error"]
    assert api.patch(mine, params=as_a1, json={"title": "trip"}).json()["item"]["title"] == "trip"
    facts = api.get(f"/api/users/{U}/facts", params={"agent_id": "B"}).json()["facts"]
    assert [(f["key"], f["agent_id"]) for f in facts] == [("seat", "B")]
    assert api.get(f"/api/users/{U}/facts", params=as_a1).json()["facts"] == []
    assert api.delete(mine, params=as_a1).status_code == 204
    assert api.delete(f"/api/users/{U}/facts", params={"key": "seat", "agent_id": "B"}).json() == {"deleted": 1}
