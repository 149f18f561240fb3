"""One adapter instance serves every user: the user of each call comes from the call (issue 15.1).

A compiled ``create_agent``, an LCEL chain and a LlamaIndex agent each serve two users at once
(threads and asyncio tasks); each user's prompts hold only their memory and their tools write only
to their memory. The resolution rules themselves are tested without a framework run."""

from __future__ import annotations

import asyncio
import json
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any, TypedDict

import pytest
from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.runnables import RunnableLambda
from langgraph.graph import END, START, StateGraph
from llama_index.core.agent.workflow import FunctionAgent
from llama_index.core.base.llms.types import ChatMessage, MessageRole, ToolCallBlock
from llama_index.core.llms.mock import MockFunctionCallingLLM
from llama_index.core.memory import Memory
from pydantic import BaseModel

from navi_memory import ValidationError
from navi_memory.integrations import acting_for
from navi_memory.integrations._identity import IdentityResolver
from navi_memory.integrations.langchain import (NaviChatMessageHistory, NaviMemoryMiddleware, NaviMemoryRetriever,
                                                NaviMemoryRunnable, NaviMemoryToolkit)
from navi_memory.integrations.llamaindex import NaviMemoryBlock, NaviMemoryRetriever as LlamaRetriever
from navi_memory.integrations.llamaindex import NaviMemoryToolSpec

HOME = {"alice": "Oslo", "bob": "Lima"}
COLOUR = {"alice": "green", "bob": "blue"}
RUNS = 4  # per user, interleaved


@pytest.fixture
def two_users(store):
    for uid, city in HOME.items():
        store.set_summary(f"{uid.title()} lives in {city}.", user_id=uid)
        store.add(user_id=uid, content=f"{uid.title()}'s train to work leaves from {city} central at 8:15",
                  theme="commute")
    return store


@dataclass
class Ctx:
    user_id: str


class CtxTyped(TypedDict):
    user_id: str


class CtxModel(BaseModel):
    user_id: str


# -- the rules ---------------------------------------------------------------------------------------

def test_resolution_order_and_sources():
    free = IdentityResolver("X")
    assert free.user(user_id="a") == "a"
    for context in (Ctx("a"), CtxTyped(user_id="a"), CtxModel(user_id="a")):
        assert free.user(runtime=SimpleNamespace(context=context)) == "a"
    for key in ("user_id", "langgraph_user_id", "langgraph_auth_user_id"):
        assert free.user(config={"configurable": {key: "a"}}) == "a"
    assert IdentityResolver("X", "a").user() == "a"
    # several sources naming the same user agree
    bound = IdentityResolver("X", "a")
    assert bound.user(user_id="a", runtime=SimpleNamespace(context=Ctx("a")),
                      config={"configurable": {"user_id": "a"}}) == "a"


def test_no_user_names_the_ways_and_a_conflict_is_refused():
    with pytest.raises(ValidationError) as info:
        IdentityResolver("NaviMemoryRetriever").user(config={"configurable": {"thread_id": "t"}})
    message = str(info.value)
    assert "user_id=" in message and "context=" in message and "configurable" in message and "bind" in message
    with pytest.raises(ValidationError, match="conflicting users.*runtime.context.user_id and the user_id bound"):
        IdentityResolver("X", "alice").user(runtime=SimpleNamespace(context=Ctx("bob")))
    with pytest.raises(ValidationError, match="conflicting users"):
        IdentityResolver("X").user(user_id="alice", config={"configurable": {"langgraph_auth_user_id": "bob"}})
    with pytest.raises(ValidationError, match="whitespace"):  # exact or refused, wherever it comes from
        IdentityResolver("X").user(config={"configurable": {"user_id": "alice "}})


def test_session_order():
    resolver = IdentityResolver("X", "a", session_id="bound")
    assert resolver.resolve().session_id == "bound"
    assert resolver.resolve(config={"configurable": {"thread_id": "t"}}).session_id == "bound"
    assert IdentityResolver("X", "a").resolve(config={"configurable": {"thread_id": "t"}}).session_id == "t"
    assert resolver.resolve(config={"configurable": {"session_id": "s", "thread_id": "t"}}).session_id == "s"
    assert resolver.resolve(session_id="call").session_id == "call"


async def test_acting_for_is_per_task_and_per_thread():
    resolver = IdentityResolver("X")

    async def who(uid: str) -> str:
        with acting_for(uid):
            await asyncio.sleep(0.01)
            return resolver.user()

    assert await asyncio.gather(*(who(u) for u in ["alice", "bob"] * 5)) == ["alice", "bob"] * 5

    def in_thread(uid: str) -> str:
        with acting_for(uid):
            return resolver.user()

    with ThreadPoolExecutor(4) as pool:
        assert list(pool.map(in_thread, ["alice", "bob"] * 5)) == ["alice", "bob"] * 5
    with pytest.raises(ValidationError, match="no user"):
        resolver.user()


# -- LangChain: retriever, LCEL, chat history ---------------------------------------------------------

def test_retriever_serves_each_user_and_refuses_a_conflict(two_users):
    retriever = NaviMemoryRetriever(store=two_users, k=1)
    for uid, city in HOME.items():
        docs = retriever.invoke("train to work", config={"configurable": {"user_id": uid}})
        assert [city in d.page_content for d in docs] == [True]
        assert city in retriever.invoke("train to work", user_id=uid)[0].page_content
    batch = retriever.batch(["train", "train"], config=[{"configurable": {"user_id": u}} for u in HOME])
    assert [HOME["alice"] in batch[0][0].page_content, HOME["bob"] in batch[1][0].page_content] == [True, True]
    with pytest.raises(ValidationError, match="no user"):
        retriever.invoke("train")
    # the example: a bound retriever no longer answers for another user silently
    bound = NaviMemoryRetriever(store=two_users, user_id="alice")
    with pytest.raises(ValidationError, match="conflicting users"):
        bound.invoke("train", config={"configurable": {"user_id": "bob"}})
    assert "Oslo" in bound.invoke("train")[0].page_content


async def test_retriever_inside_a_graph_takes_the_runtime_context(two_users):
    retriever = NaviMemoryRetriever(store=two_users, k=1)

    class State(TypedDict):
        question: str
        found: str

    def node(state: State) -> dict[str, Any]:
        return {"found": retriever.invoke(state["question"])[0].page_content}

    async def anode(state: State) -> dict[str, Any]:
        return {"found": (await retriever.ainvoke(state["question"]))[0].page_content}

    for step in (node, anode):
        graph = StateGraph(State, context_schema=Ctx).add_node("look", step)
        app = graph.add_edge(START, "look").add_edge("look", END).compile()
        outs = await asyncio.gather(*(app.ainvoke({"question": "train"}, context=Ctx(u)) for u in ["alice", "bob"] * 3))
        assert ["Oslo" in o["found"] for o in outs] == [True, False] * 3


def test_lcel_chain_serves_each_user(two_users):
    chain = (ChatPromptTemplate.from_messages([("system", "Be brief."), ("human", "{q}")])
             | NaviMemoryRunnable(store=two_users, min_similarity=0)
             | RunnableLambda(lambda messages: "\n".join(str(m.content) for m in messages)))
    configs = [{"configurable": {"user_id": u}} for u in ["alice", "bob"] * RUNS]
    outs = chain.batch([{"q": "When is my train?"}] * len(configs), config=configs, max_concurrency=2)
    for uid, out in zip(["alice", "bob"] * RUNS, outs):
        other = "bob" if uid == "alice" else "alice"
        assert HOME[uid] in out and HOME[other] not in out


async def test_lcel_chain_async_serves_each_user(two_users):
    chain = NaviMemoryRunnable(store=two_users, min_similarity=0) | RunnableLambda(
        lambda messages: "\n".join(str(m.content) for m in messages))
    outs = await asyncio.gather(*(chain.ainvoke("When is my train?", config={"configurable": {"user_id": u}})
                                  for u in ["alice", "bob"] * RUNS))
    assert [("Oslo" in o, "Lima" in o) for o in outs] == [(True, False), (False, True)] * RUNS


def test_chat_history_takes_the_user_of_the_call(two_users):
    history = NaviChatMessageHistory(two_users, "chat")
    with pytest.raises(ValidationError, match="no user"):
        history.add_messages([HumanMessage("hello")])
    for uid in HOME:
        with acting_for(uid):
            history.add_messages([HumanMessage(f"I am {uid}")])
        assert [m.content for m in two_users.get_session("chat", user_id=uid).messages] == [f"I am {uid}"]
        with acting_for(uid):
            assert [m.content for m in history.messages] == [f"I am {uid}"]


# -- LangChain v1: one compiled create_agent ---------------------------------------------------------

class EchoAgent(GenericFakeChatModel):
    """A stateless scripted agent model (safe to share between concurrent runs): to "I am <user>,
    my colour is <c>" it calls memory_save_fact; after the tool answer it replies with every system
    message it was given, so a test sees what memory reached the prompt."""

    messages: Any = iter(())

    def bind_tools(self, tools: Any, **kwargs: Any) -> "EchoAgent":
        return self

    def _reply(self, messages: list[BaseMessage]) -> AIMessage:
        if not isinstance(messages[-1], ToolMessage):
            colour = str(messages[-1].content).rsplit(" ", 1)[-1]
            return AIMessage("", tool_calls=[{"name": "memory_save_fact", "id": "c1", "args": {
                "category": "preferences", "key": "favourite_colour", "value": colour}}])
        return AIMessage("\n".join(str(m.content) for m in messages if m.type == "system"))

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None,
                  **kwargs: Any) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=self._reply(messages))])


def _check_runs(store, users: list[str], results: list[dict[str, Any]]) -> None:
    for uid, result in zip(users, results):
        other = "bob" if uid == "alice" else "alice"
        answer = result["messages"][-1].content
        # the user's own memories (a fact saved since rewrote the summary), none of the other user's
        assert f"from {HOME[uid]} central" in answer and HOME[other] not in answer
        assert json.loads(result["messages"][2].content)["value"] == COLOUR[uid]
    for uid in set(users):
        assert store.get_fact("favourite_colour", user_id=uid).value == COLOUR[uid]
        recorded = [m.content for m in store.get_session(f"thread-{uid}", user_id=uid).messages]
        assert recorded.count(f"I am {uid}, my colour is {COLOUR[uid]}") == users.count(uid)


def _question(uid: str) -> dict[str, Any]:
    return {"messages": [HumanMessage(f"I am {uid}, my colour is {COLOUR[uid]}")]}


def test_one_create_agent_serves_two_users_in_threads(two_users):
    agent = create_agent(EchoAgent(), tools=[], context_schema=Ctx,
                         middleware=[NaviMemoryMiddleware(store=two_users, min_similarity=0)])
    users = ["alice", "bob"] * RUNS

    def run(uid: str) -> dict[str, Any]:
        return agent.invoke(_question(uid), context=Ctx(uid), config={"configurable": {"thread_id": f"thread-{uid}"}})

    with ThreadPoolExecutor(2) as pool:
        _check_runs(two_users, users, list(pool.map(run, users)))


async def test_one_create_agent_serves_two_users_async(two_users):
    agent = create_agent(EchoAgent(), tools=[], middleware=[NaviMemoryMiddleware(store=two_users, min_similarity=0)])
    users = ["alice", "bob"] * RUNS
    results = await asyncio.gather(*(agent.ainvoke(_question(u), config={"configurable": {
        "user_id": u, "thread_id": f"thread-{u}"}}) for u in users))
    _check_runs(two_users, users, list(results))


def test_create_agent_refuses_a_missing_or_conflicting_user(two_users):
    open_agent = create_agent(EchoAgent(), tools=[], middleware=[NaviMemoryMiddleware(store=two_users)])
    with pytest.raises(ValidationError, match="no user for this call to NaviMemoryMiddleware"):
        open_agent.invoke(_question("alice"))
    bound = create_agent(EchoAgent(), tools=[], context_schema=CtxModel,
                         middleware=[NaviMemoryMiddleware(store=two_users, user_id="alice")])
    with pytest.raises(ValidationError, match="conflicting users"):
        bound.invoke(_question("bob"), context=CtxModel(user_id="bob"))
    assert two_users.count_items(user_id="bob") == 1  # nothing written for either
    assert two_users.get_all_facts(user_id="alice") == two_users.get_all_facts(user_id="bob") == []


def test_toolkit_tools_take_the_user_from_the_run(two_users):
    tools = {t.name: t for t in NaviMemoryToolkit(store=two_users).get_tools()}
    assert all("user_id" not in t.tool_call_schema.model_json_schema()["properties"] for t in tools.values())
    add = tools["memory_add_note"]
    for uid in HOME:
        out = json.loads(add.invoke({"content": f"note of {uid}"}, config={"configurable": {"user_id": uid}}))
        assert two_users.get(out["id"], user_id=uid).content == f"note of {uid}"
    # a model sneaking a user id in its arguments does not change whose memory is written
    out = json.loads(add.invoke({"content": "sneaky", "user_id": "bob"}, config={"configurable": {"user_id": "alice"}}))
    assert two_users.get(out["id"], user_id="alice").content == "sneaky"
    with pytest.raises(ValidationError, match="no user"):
        add.invoke({"content": "nobody"})


# -- LlamaIndex: one agent, a shared block and tool spec ----------------------------------------------

async def test_one_llamaindex_agent_serves_two_users(two_users):
    prompts: dict[str, list[str]] = {"alice": [], "bob": []}

    def respond(messages, **kwargs):
        user_text = next(m.content for m in reversed(messages) if m.role == MessageRole.USER)
        uid = "alice" if "alice" in user_text else "bob"
        prompts[uid].append("\n".join(m.content or "" for m in messages if m.role == MessageRole.SYSTEM))
        if not any(m.role == MessageRole.TOOL for m in messages):
            return ChatMessage(role=MessageRole.ASSISTANT, blocks=[ToolCallBlock(
                tool_call_id="c1", tool_name="memory_save_fact",
                tool_kwargs={"category": "preferences", "key": "favourite_colour", "value": COLOUR[uid]})])
        return ChatMessage(role=MessageRole.ASSISTANT, content="noted")

    block = NaviMemoryBlock(store=two_users, min_similarity=0)
    agent = FunctionAgent(tools=NaviMemoryToolSpec(two_users).to_tool_list(),
                          llm=MockFunctionCallingLLM(response_generator=respond), system_prompt="You are helpful.")

    async def run(uid: str) -> str:
        with acting_for(uid, session_id=f"li-{uid}"):
            memory = Memory.from_defaults(session_id=f"li-{uid}", memory_blocks=[block])
            return str(await agent.run(f"I am {uid}: when is my train?", memory=memory))

    assert await asyncio.gather(*(run(u) for u in ["alice", "bob"] * 2)) == ["noted"] * 4
    for uid, other in (("alice", "bob"), ("bob", "alice")):
        assert prompts[uid] and all(HOME[uid] in p and HOME[other] not in p for p in prompts[uid])
        assert two_users.get_fact("favourite_colour", user_id=uid).value == COLOUR[uid]
        assert two_users.get_session(f"li-{uid}", user_id=uid).messages[0].content.startswith(f"I am {uid}")
    retriever = LlamaRetriever(two_users, k=1)
    for uid in HOME:
        with acting_for(uid):
            assert HOME[uid] in (await retriever.aretrieve("train"))[0].node.get_content()
            assert HOME[uid] in retriever.retrieve("train")[0].node.get_content()


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_runnable_with_message_history_records_under_the_configured_user(two_users):
    from langchain_core.runnables.history import RunnableWithMessageHistory

    chain = RunnableWithMessageHistory(RunnableLambda(lambda messages: AIMessage(f"{len(messages)} messages")),
                                       lambda session_id: NaviChatMessageHistory(two_users, session_id))
    for uid in ["alice", "bob", "alice"]:
        chain.invoke(f"hi from {uid}", config={"configurable": {"session_id": "s", "user_id": uid}})
    assert [m.content for m in two_users.get_session("s", user_id="alice").messages] == [
        "hi from alice", "1 messages", "hi from alice", "3 messages"]
    assert [m.content for m in two_users.get_session("s", user_id="bob").messages] == ["hi from bob", "1 messages"]
