"""Agents on a LangGraph store: ``create_agent(..., store=store)`` with tools reading ``runtime.store``
and ``get_store()``, and LangMem's memory tools. The chat model is scripted; the store is each
implementation of tests/langgraph_support.py (the same tests, unchanged, for every store).
"""

from __future__ import annotations

import asyncio
import json

from langchain.agents import create_agent
from langchain.tools import ToolRuntime
from langchain_core.messages import ToolMessage
from langchain_core.tools import tool
from langgraph.config import get_store

from .langgraph_support import Make, ToolChat, call, make  # noqa: F401 (fixture)


def tool_results(result: dict) -> list[str]:
    return [str(m.content) for m in result["messages"] if isinstance(m, ToolMessage)]


@tool
def save_note(text: str, runtime: ToolRuntime) -> str:
    """Save a note about the user."""
    user = runtime.config["configurable"]["user_id"]
    key = f"note-{len(runtime.store.search(('notes', user), limit=100))}"
    runtime.store.put(("notes", user), key, {"text": text})
    return f"saved {key}"


@tool
def find_notes(query: str) -> str:
    """Search the user's notes."""
    from langgraph.config import get_config

    user = get_config()["configurable"]["user_id"]
    return json.dumps([item.value["text"] for item in get_store().search(("notes", user), query=query)])


def test_agent_tools_use_the_store_through_runtime_and_get_store(make: Make) -> None:
    case = make(index=True, bound=False)
    model = ToolChat(script=[call("save_note", {"text": "I drink oat milk lattes"}), "Noted.",
                             call("find_notes", {"query": "oat milk"}), "You drink oat milk lattes.",
                             call("find_notes", {"query": "oat milk"}), "I know nothing about you."])
    agent = create_agent(model, tools=[save_note, find_notes], store=case.store)
    alice = {"configurable": {"user_id": "alice", "thread_id": "t1"}}
    saved = agent.invoke({"messages": [{"role": "user", "content": "I drink oat milk lattes"}]}, alice)
    assert tool_results(saved) == ["saved note-0"]
    found = agent.invoke({"messages": [{"role": "user", "content": "what do I drink?"}]},
                         {"configurable": {"user_id": "alice", "thread_id": "t2"}})
    assert json.loads(tool_results(found)[0]) == ["I drink oat milk lattes"]
    other = agent.invoke({"messages": [{"role": "user", "content": "what do I drink?"}]},
                         {"configurable": {"user_id": "bob", "thread_id": "t3"}})
    assert json.loads(tool_results(other)[0]) == []
    assert model.script == []


LANGMEM_INDEX = ["content"]  # LangMem keeps a memory as {"content": ...}


def langmem_tools() -> list:
    from langmem import create_manage_memory_tool, create_search_memory_tool

    namespace = ("memories", "{langgraph_user_id}")
    return [create_manage_memory_tool(namespace=namespace), create_search_memory_tool(namespace=namespace)]


def langmem_script() -> list:
    return [call("manage_memory", {"content": "Prefers window seats on trains"}), "I'll remember that.",
            call("search_memory", {"query": "train seat preference"}), "You prefer window seats.",
            call("search_memory", {"query": "train seat preference"}), "I don't know yet."]


def check_langmem_runs(results: list[dict]) -> None:
    created, alice, bob = (tool_results(r) for r in results)
    assert created[0].startswith("created memory ")
    memory_id = created[0].removeprefix("created memory ")
    found = json.loads(alice[0])
    assert [(m["key"], m["value"], m["namespace"]) for m in found] == [
        (memory_id, {"content": "Prefers window seats on trains"}, ["memories", "alice"])]
    assert json.loads(bob[0]) == []


def user(name: str, thread: str) -> dict:
    return {"configurable": {"langgraph_user_id": name, "thread_id": thread}}


def test_langmem_memory_tools_per_user(make: Make) -> None:
    case = make(index=LANGMEM_INDEX, bound=False)
    model = ToolChat(script=langmem_script())
    agent = create_agent(model, tools=langmem_tools(), store=case.store)
    ask = {"messages": [{"role": "user", "content": "Which seat do I like?"}]}
    results = [agent.invoke({"messages": [{"role": "user", "content": "I like window seats"}]}, user("alice", "1")),
               agent.invoke(ask, user("alice", "2")), agent.invoke(ask, user("bob", "3"))]
    check_langmem_runs(results)
    assert model.script == []


def test_langmem_memory_tools_async(make: Make) -> None:
    case = make(index=LANGMEM_INDEX, bound=False)
    model = ToolChat(script=langmem_script())
    agent = create_agent(model, tools=langmem_tools(), store=case.store)
    ask = {"messages": [{"role": "user", "content": "Which seat do I like?"}]}

    async def run() -> list[dict]:
        return [await agent.ainvoke({"messages": [{"role": "user", "content": "I like window seats"}]},
                                    user("alice", "1")),
                await agent.ainvoke(ask, user("alice", "2")), await agent.ainvoke(ask, user("bob", "3"))]

    check_langmem_runs(asyncio.run(run()))


def test_langmem_update_and_delete(make: Make) -> None:
    case = make(index=LANGMEM_INDEX, bound=False)
    model = ToolChat(script=[call("manage_memory", {"content": "Lives in Lyon"}), "ok"])
    agent = create_agent(model, tools=langmem_tools(), store=case.store)
    created = tool_results(agent.invoke({"messages": [{"role": "user", "content": "I live in Lyon"}]},
                                        user("alice", "1")))
    memory_id = created[0].removeprefix("created memory ")
    model.script = [call("manage_memory", {"content": "Lives in Paris", "action": "update", "id": memory_id}), "ok",
                    call("search_memory", {"query": "where does the user live"}), "Paris.",
                    call("manage_memory", {"action": "delete", "id": memory_id}), "ok",
                    call("search_memory", {"query": "where does the user live"}), "No idea."]
    runs = [agent.invoke({"messages": [{"role": "user", "content": text}]}, user("alice", str(n)))
            for n, text in enumerate(["I moved to Paris", "Where do I live?", "forget it", "Where do I live?"], 2)]
    assert tool_results(runs[0]) == [f"updated memory {memory_id}"]
    assert [m["value"]["content"] for m in json.loads(tool_results(runs[1])[0])] == ["Lives in Paris"]
    assert tool_results(runs[2]) == [f"Deleted memory {memory_id}"]
    assert json.loads(tool_results(runs[3])[0]) == []


def test_search_tool_filters_and_limits(make: Make) -> None:
    case = make(index=LANGMEM_INDEX, bound=False)
    model = ToolChat()
    agent = create_agent(model, tools=langmem_tools(), store=case.store)
    for n in range(3):
        model.script = [call("manage_memory", {"content": f"the user owns {n} bikes"}), "ok"]
        agent.invoke({"messages": [{"role": "user", "content": "note"}]}, user("alice", str(n)))
    model.script = [call("search_memory", {"query": "bikes", "limit": 2}), "ok",
                    call("search_memory", {"query": "bikes", "filter": {"content": "the user owns 1 bikes"}}), "ok"]
    limited = agent.invoke({"messages": [{"role": "user", "content": "bikes?"}]}, user("alice", "9"))
    filtered = agent.invoke({"messages": [{"role": "user", "content": "bikes?"}]}, user("alice", "10"))
    assert len(json.loads(tool_results(limited)[0])) == 2
    assert [m["value"]["content"] for m in json.loads(tool_results(filtered)[0])] == ["the user owns 1 bikes"]
