"""Scopes per call in every adapter (issue 15.1/15.2): ``agent_id`` and ``run_id`` are found like the
user (argument, runtime context, ``acting_for``, configurable, bound; a conflict refused). Writes
carry them; reads keep to them only when they are set. The model never sees or fills them. Per-call
search filters (metadata ``filters``, ``namespace_prefix``) reach the store's search."""

from __future__ import annotations

import json
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any, Optional

import pytest
from langchain.agents import create_agent
from langchain_core.messages import HumanMessage
from llama_index.core.agent.workflow import FunctionAgent
from llama_index.core.base.llms.types import ChatMessage, MessageRole, ToolCallBlock
from llama_index.core.llms.mock import MockFunctionCallingLLM
from llama_index.core.memory import Memory

from navi_memory import ValidationError
from navi_memory.integrations import acting_for
from navi_memory.integrations._identity import IdentityResolver
from navi_memory.integrations.langchain import (NaviChatMessageHistory, NaviMemoryMiddleware, NaviMemoryRetriever,
                                                NaviMemoryRunnable, NaviMemoryToolkit)
from navi_memory.integrations.llamaindex import NaviMemoryBlock, NaviMemoryRetriever as LlamaRetriever
from navi_memory.integrations.llamaindex import NaviMemoryToolSpec
from navi_memory.integrations.tools import MemoryTools

from .test_identity import EchoAgent

U = "alice"


@dataclass
class Ctx:
    user_id: str
    agent_id: Optional[str] = None
    run_id: Optional[str] = None


@pytest.fixture
def scoped(store):
    store.add(user_id=U, content="planner: the Lisbon trip starts on Friday", agent_id="planner", run_id="r1",
              metadata={"topic": "travel", "year": 2025})
    store.add(user_id=U, content="writer: the Lisbon essay is due Monday", agent_id="writer", run_id="r2",
              metadata={"topic": "work", "year": 2024})
    store.add(user_id=U, content="shared: Lisbon is the favourite city", metadata={"topic": "travel", "year": 2023})
    return store


def _agents(results: Any) -> set:
    return {str(getattr(r, "page_content", None) or r.node.get_content()).split(":")[0] for r in results}


# -- the rules ---------------------------------------------------------------------------------------

def test_scopes_follow_the_users_order_and_conflicts_are_refused():
    free = IdentityResolver("X")
    assert free.resolve(user_id=U).scope() == {}
    assert free.resolve(user_id=U, agent_id="a", run_id="r").scope() == {"agent_id": "a", "run_id": "r"}
    assert free.resolve(runtime=SimpleNamespace(context=Ctx(U, "a", "r"))).scope() == {"agent_id": "a", "run_id": "r"}
    assert free.resolve(config={"configurable": {"user_id": U, "agent_id": "a"}}).agent_id == "a"
    with acting_for(U, agent_id="a", run_id="r"):
        assert free.resolve().scope() == {"agent_id": "a", "run_id": "r"}
    bound = IdentityResolver("X", U, agent_id="a")
    assert bound.resolve(agent_id="a", config={"configurable": {"agent_id": "a"}}).agent_id == "a"
    with pytest.raises(ValidationError, match="conflicting agent_ids.*the agent_id argument and the agent_id bound"):
        bound.resolve(agent_id="b")
    with pytest.raises(ValidationError, match="conflicting run_ids"):
        free.resolve(user_id=U, run_id="r1", config={"configurable": {"run_id": "r2"}})
    with pytest.raises(ValidationError, match="agent_id"):
        free.resolve(user_id=U, agent_id=" padded ")  # exact ids, like user ids


# -- LangChain ---------------------------------------------------------------------------------------

def test_retriever_scopes_and_per_call_filters_reach_search(scoped):
    retriever = NaviMemoryRetriever(store=scoped, user_id=U, k=5)
    assert _agents(retriever.invoke("Lisbon")) == {"planner", "writer", "shared"}  # no scope: everything
    assert _agents(retriever.invoke("Lisbon", agent_id="planner")) == {"planner"}
    assert _agents(retriever.invoke("Lisbon", config={"configurable": {"run_id": "r2"}})) == {"writer"}
    assert _agents(retriever.invoke("Lisbon", filters={"topic": "travel"})) == {"planner", "shared"}
    assert _agents(retriever.invoke("Lisbon", filters={"year": {"$gte": 2024}})) == {"planner", "writer"}
    with pytest.raises(ValidationError, match="operator"):
        retriever.invoke("Lisbon", filters={"year": {"$near": 1}})
    bound = NaviMemoryRetriever(store=scoped, user_id=U, agent_id="writer", filters={"topic": "work"})
    assert _agents(bound.invoke("Lisbon")) == {"writer"}
    with pytest.raises(ValidationError, match="conflicting agent_ids"):
        bound.invoke("Lisbon", agent_id="planner")


async def test_retriever_async_per_call_filters(scoped):
    retriever = NaviMemoryRetriever(store=scoped)
    docs = await retriever.ainvoke("Lisbon", user_id=U, filters={"topic": "work"}, agent_id="writer")
    assert _agents(docs) == {"writer"}


def test_retriever_namespace_prefix_per_call(store):
    store.put_keyed(user_id=U, namespace=("notes", "trips"), key="k1", content="Lisbon keyed note")
    store.add(user_id=U, content="Lisbon plain note")
    retriever = NaviMemoryRetriever(store=store, user_id=U)
    docs = retriever.invoke("Lisbon", namespace_prefix=("notes",))
    assert [d.page_content for d in docs] == ["Lisbon keyed note"]


def test_toolkit_tags_writes_and_keeps_reads_to_the_runs_agent(scoped):
    tools = {t.name: t for t in NaviMemoryToolkit(store=scoped).get_tools()}
    for tool in tools.values():  # the model never sees a scope
        assert not {"user_id", "agent_id", "run_id"} & set(tool.tool_call_schema.model_json_schema()["properties"])
    config = {"configurable": {"user_id": U, "agent_id": "planner", "run_id": "r9"}}
    out = json.loads(tools["memory_add_note"].invoke({"content": "planner: pack sunscreen", "agent_id": "writer"},
                                                     config=config))
    item = scoped.get(out["id"], user_id=U)
    assert (item.agent_id, item.run_id) == ("planner", "r9")
    json.loads(tools["memory_save_fact"].invoke({"category": "preferences", "key": "seat", "value": "aisle"},
                                                config=config))
    assert [(f.agent_id, f.run_id) for f in scoped.get_all_facts(user_id=U)] == [("planner", "r9")]
    found = json.loads(tools["memory_search"].invoke({"query": "Lisbon sunscreen"},
                                                     config={"configurable": {"user_id": U, "agent_id": "planner"}}))
    seat = json.loads(tools["memory_search"].invoke({"query": "aisle seat"},
                                                    config={"configurable": {"user_id": U, "agent_id": "planner"}}))
    snippets = {r["content_snippet"].split(":")[0] for r in found["results"] + seat["results"]}
    assert snippets == {"planner", "seat"}  # the planner's note and fact, not the writer's or the shared ones
    out = json.loads(tools["memory_forget"].invoke({"key": "seat"}, config={"configurable": {
        "user_id": U, "agent_id": "writer"}}))
    assert "error" in out and scoped.get_fact("seat", user_id=U).value == "aisle"  # another agent's fact stays


def test_create_agent_runs_in_the_context_agent_scope(scoped):
    agent = create_agent(EchoAgent(), tools=[], context_schema=Ctx,
                         middleware=[NaviMemoryMiddleware(store=scoped, min_similarity=0)])
    result = agent.invoke({"messages": [HumanMessage("Lisbon: my colour is red")]},
                          context=Ctx(U, agent_id="planner", run_id="r1"),
                          config={"configurable": {"thread_id": "t-planner"}})
    prompt_text = result["messages"][-1].content
    assert "planner: the Lisbon trip" in prompt_text and "writer:" not in prompt_text and "shared:" not in prompt_text
    fact = scoped.get_fact("favourite_colour", user_id=U)
    assert (fact.value, fact.agent_id, fact.run_id) == ("red", "planner", "r1")
    scoped.extract_session("t-planner", user_id=U)
    turns = scoped.list_items(user_id=U, run_id="r1", types=["note"])
    assert len(turns) > 1 and {(i.agent_id, i.run_id) for i in turns} == {("planner", "r1")}


def test_lcel_runnable_and_chat_history_take_the_scope_of_the_call(scoped):
    runnable = NaviMemoryRunnable(store=scoped, min_similarity=0)
    messages = runnable.invoke("Lisbon?", config={"configurable": {"user_id": U, "agent_id": "writer"}})
    text = "\n".join(str(m.content) for m in messages)
    assert "writer: the Lisbon essay" in text and "planner:" not in text
    history = NaviChatMessageHistory(scoped, "chat", triggers=False)  # extracted below, not in the background
    with acting_for(U, agent_id="writer", run_id="r7"):
        history.add_messages([HumanMessage("Remember that the essay needs three sources.")])
    scoped.extract_session("chat", user_id=U)
    turns = scoped.list_items(user_id=U, run_id="r7", types=["note"])  # extracted facts stay shared
    assert turns and {i.agent_id for i in turns} == {"writer"}


# -- LlamaIndex and the framework-free tools -----------------------------------------------------------

async def test_llamaindex_retriever_block_and_tools_keep_to_the_scope(scoped):
    retriever = LlamaRetriever(scoped, U, k=5)
    assert _agents(retriever.retrieve("Lisbon")) == {"planner", "writer", "shared"}
    with acting_for(U, agent_id="planner"):
        assert _agents(retriever.retrieve("Lisbon")) == {"planner"}
        assert _agents(await retriever.aretrieve("Lisbon")) == {"planner"}
    assert _agents(retriever.retrieve_with("Lisbon", filters={"topic": "travel"})) == {"planner", "shared"}
    assert _agents(await retriever.aretrieve_with("Lisbon", filters={"year": {"$lt": 2025}})) == {"writer", "shared"}
    assert _agents(retriever.retrieve("Lisbon")) == {"planner", "writer", "shared"}  # the override was for one call
    assert _agents(LlamaRetriever(scoped, U, run_id="r2").retrieve("Lisbon")) == {"writer"}
    with pytest.raises(TypeError, match="unknown search argument"):
        LlamaRetriever(scoped, U, colour="red")

    def respond(messages, **kwargs):
        if not any(m.role == MessageRole.TOOL for m in messages):
            return ChatMessage(role=MessageRole.ASSISTANT, blocks=[ToolCallBlock(
                tool_call_id="c1", tool_name="memory_add_note", tool_kwargs={"content": "writer: cite Saramago"})])
        system = "\n".join(m.content or "" for m in messages if m.role == MessageRole.SYSTEM)
        return ChatMessage(role=MessageRole.ASSISTANT, content=system)

    block = NaviMemoryBlock(store=scoped, min_similarity=0)
    agent = FunctionAgent(tools=NaviMemoryToolSpec(scoped).to_tool_list(),
                          llm=MockFunctionCallingLLM(response_generator=respond), system_prompt="Be brief.")
    with acting_for(U, agent_id="writer", run_id="r2", session_id="li"):
        answer = str(await agent.run("Lisbon essay?", memory=Memory.from_defaults(session_id="li",
                                                                                   memory_blocks=[block])))
    assert "writer: the Lisbon essay" in answer and "planner:" not in answer
    note = scoped.search("Saramago", user_id=U, run_id="r2")[0]
    assert (note.content, note.agent_id) == ("writer: cite Saramago", "writer")


def test_dispatch_takes_scopes_from_the_application(scoped):
    tools = MemoryTools(scoped)
    assert "agent_id" not in json.dumps(tools.openai_schemas())
    out = json.loads(tools.dispatch("memory_add_note", {"content": "planner: book a hotel"}, user_id=U,
                                    agent_id="planner", run_id="r3"))
    assert (scoped.get(out["id"], user_id=U).agent_id, scoped.get(out["id"], user_id=U).run_id) == ("planner", "r3")
    found = json.loads(tools.dispatch("memory_search", {"query": "Lisbon hotel"}, user_id=U, run_id="r3"))
    assert [r["id"] for r in found["results"]] == [out["id"]]
    bound = MemoryTools(scoped, U, agent_id="writer")
    found = json.loads(bound.dispatch("memory_search", {"query": "Lisbon"}))
    assert {r["content_snippet"].split(":")[0] for r in found["results"]} == {"writer"}
    with pytest.raises(ValidationError, match="agent_id differs"):
        bound.dispatch("memory_search", {"query": "Lisbon"}, agent_id="planner")
