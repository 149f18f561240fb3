"""LlamaIndex adapters: retriever nodes, the memory block, the tool spec and a FunctionAgent run."""

from __future__ import annotations

import json

import pytest
from llama_index.core.agent.workflow import FunctionAgent
from llama_index.core.base.llms.types import ChatMessage, MessageRole, ToolCallBlock
from llama_index.core.llms.mock import MockFunctionCallingLLM
from llama_index.core.memory import Memory
from llama_index.core.schema import MetadataMode, NodeWithScore

from navi_memory import AsyncMemoryStore, StorageError
from navi_memory import prompt
from navi_memory.integrations import acting_for
from navi_memory.integrations.llamaindex import NaviMemoryBlock, NaviMemoryRetriever, NaviMemoryToolSpec

from .chat_fakes import ScriptedChat
from .fakes import FakeEmbeddings


@pytest.fixture
def remembered(store):
    store.set_summary("Eugene lives in Berlin and likes oat milk lattes.", user_id="u1")
    store.add(user_id="u1", content="Eugene takes the 8:15 train to work", theme="commute")
    store.add(user_id="u1", content="The dog is called Rex", theme="pets")
    store.add(user_id="u2", content="u2 takes the bus", theme="commute")
    return store


def user(text: str) -> ChatMessage:
    return ChatMessage(role=MessageRole.USER, content=text)


def assistant(text: str) -> ChatMessage:
    return ChatMessage(role=MessageRole.ASSISTANT, content=text)


def test_retriever_returns_nodes_with_scores(remembered):
    nodes = NaviMemoryRetriever(remembered, user_id="u1", k=2, min_score=0).retrieve("train to work")  # a plumbing test
    assert len(nodes) == 2 and all(isinstance(n, NodeWithScore) for n in nodes)
    top = nodes[0]
    assert top.node.get_content() == "Eugene takes the 8:15 train to work"
    assert top.node.node_id == str(top.node.metadata["id"]) and top.score == top.node.metadata["score"]
    assert top.node.metadata["theme"] == "commute" and top.node.metadata["signals"]["fts"]
    llm_text = top.node.get_content(metadata_mode=MetadataMode.LLM)
    assert "theme: commute" in llm_text and "signals" not in llm_text
    only = NaviMemoryRetriever(remembered, user_id="u1", theme="pets").retrieve("*")
    assert [n.node.metadata["theme"] for n in only] == ["pets"]


async def test_retriever_async(remembered, db_url, clock):
    assert len(await NaviMemoryRetriever(remembered, user_id="u1", k=1).aretrieve("train")) == 1
    astore = await AsyncMemoryStore.open(db_url, embeddings=FakeEmbeddings(), clock=clock)
    try:
        nodes = await NaviMemoryRetriever(astore, user_id="u1").aretrieve("bus train")
        assert nodes and "u2" not in " ".join(n.node.get_content() for n in nodes)
    finally:
        await astore.close()


def test_tool_spec(remembered):
    tools = {t.metadata.name: t for t in NaviMemoryToolSpec(remembered, user_id="u1").to_tool_list()}
    assert set(tools) == {"memory_search", "memory_add_note", "memory_save_fact", "memory_get", "memory_archive",
                          "memory_forget", "memory_list_themes"}
    for tool in tools.values():
        assert "user_id" not in tool.metadata.get_parameters_dict()["properties"]
    found = json.loads(tools["memory_search"].call(query="train").content)["results"]
    assert found[0]["content_snippet"] == "Eugene takes the 8:15 train to work"
    got = json.loads(tools["memory_get"].call(item_id=found[0]["id"]).content)
    assert got["theme"] == "commute"
    unbound = {t.metadata.name: t for t in NaviMemoryToolSpec(remembered).to_tool_list()}
    with pytest.raises(ValueError, match="no user for this call to NaviMemoryToolSpec"):
        unbound["memory_list_themes"].call()
    with acting_for("u1"):
        assert json.loads(unbound["memory_list_themes"].call().content)["themes"]
    with acting_for("u2"), pytest.raises(ValueError, match="conflicting users"):
        tools["memory_list_themes"].call()


async def test_tool_spec_async(remembered):
    tools = {t.metadata.name: t for t in NaviMemoryToolSpec(remembered, user_id="u1").to_tool_list()}
    out = await tools["memory_save_fact"].acall(category="profile", key="name", value="Eugene")
    assert json.loads(out.content)["action"] == "added"
    assert remembered.get_fact("name", user_id="u1").source == "user_explicit"


async def test_block_renders_memory_once_per_user_message(remembered, monkeypatch):
    searches = []
    search = remembered.search
    monkeypatch.setattr(remembered, "search", lambda *a, **k: searches.append(a) or search(*a, **k))
    block = NaviMemoryBlock(store=remembered, user_id="u1", session_id="s1")
    history = [user("hello"), assistant("Hi!"), user("When does my train leave?")]
    text = await block.aget(history)
    assert text.startswith(prompt.SUMMARY_HEADING) and "oat milk" in text
    assert prompt.RELEVANT_HEADING in text and "8:15 train" in text and "bus" not in text
    assert await block.aget(history) == text and len(searches) == 1  # same user message: no new search
    assert [m.content for m in remembered.get_session("s1", user_id="u1").messages] == [
        "hello", "Hi!", "When does my train leave?"]
    await block.aget(history + [assistant("At 8:15."), user("thanks")])
    assert len(searches) == 2
    assert [m.content for m in remembered.get_session("s1", user_id="u1").messages][-2:] == ["At 8:15.", "thanks"]


async def test_block_greeting_tools_mode_and_switches(remembered, monkeypatch):
    greeting = await NaviMemoryBlock(store=remembered, user_id="u1").aget([user("Hi!")])
    assert greeting.startswith(prompt.SUMMARY_HEADING) and prompt.RELEVANT_HEADING not in greeting
    tools = await NaviMemoryBlock(store=remembered, user_id="u1", mode="tools").aget([user("my train?")])
    assert "memory_search" in tools and "- commute (1)" in tools and "8:15" not in tools
    monkeypatch.setenv("NAVI_MEMORY_INJECTION_DISABLED", "1")
    block = NaviMemoryBlock(store=remembered, user_id="u1", session_id="off")
    assert await block.aget([user("my train?")]) == ""
    assert "off" not in [s.session_id for s in remembered.list_sessions(user_id="u1")]


async def test_block_store_failure(remembered, monkeypatch):
    def down(*args, **kwargs):
        raise StorageError("connection refused")

    monkeypatch.setattr(remembered._backend, "get_summary", down)
    assert await NaviMemoryBlock(store=remembered, user_id="u1").aget([user("train?")]) == prompt.UNAVAILABLE_NOTE


async def test_function_agent_end_to_end(remembered):
    seen: list[list[ChatMessage]] = []

    def respond(messages, **kwargs):
        seen.append(list(messages))
        if not any(m.role == MessageRole.TOOL for m in messages):
            # the "remember that" extraction started by the block records location: Berlin; let it
            # land first so the tool's home_city meets it (two writers at once may both add one)
            remembered.wait_for_background()
            return ChatMessage(role=MessageRole.ASSISTANT, blocks=[ToolCallBlock(
                tool_call_id="call-1", tool_name="memory_save_fact",
                tool_kwargs={"category": "profile", "key": "home_city", "value": "Berlin"})])
        return assistant("Your train leaves at 8:15; I noted Berlin.")

    extractor = ScriptedChat(script=[
        {"facts": [{"category": "preferences", "key": "train_time", "value": "8:15", "source": "conversation",
                    "source_context": "my train"}], "notes": []},
        "Eugene lives in Berlin and takes the 8:15 train."])
    remembered.set_chat_model(extractor)
    block = NaviMemoryBlock(store=remembered, user_id="u1", session_id="s1")
    memory = Memory.from_defaults(session_id="s1", memory_blocks=[block])
    agent = FunctionAgent(tools=NaviMemoryToolSpec(remembered, user_id="u1").to_tool_list(),
                          llm=MockFunctionCallingLLM(response_generator=respond), system_prompt="You are helpful.")
    reply = await agent.run("Remember that I live in Berlin. When does my train leave?", memory=memory)
    assert str(reply) == "Your train leaves at 8:15; I noted Berlin."
    # the model received the summary and the relevant memories
    system = "\n".join(m.content for m in seen[0] if m.role == MessageRole.SYSTEM)
    assert seen[0][0].content == "You are helpful." and seen[0][-1].role == MessageRole.USER
    assert "oat milk lattes" in system and "8:15 train" in system and prompt.RELEVANT_HEADING in system
    # the tool call reached the store, merged into the equivalent fact the extraction recorded
    reply_json = json.loads(seen[-1][-1].content)
    assert reply_json["key"] == "location" and reply_json["value"] == "Berlin"
    assert [f.value for f in remembered.get_all_facts(user_id="u1") if f.key in ("home_city", "location")] == ["Berlin"]
    # the conversation was recorded and "remember that ..." triggered extraction
    await block.arecord_memory(memory)
    remembered.wait_for_background()
    session = remembered.get_session("s1", user_id="u1")
    assert [m.role for m in session.messages] == ["user", "assistant", "tool", "assistant"]
    assert session.messages[0].content.startswith("Remember that I live in Berlin")
    assert session.messages[1].tool_calls[0].name == "memory_save_fact"
    assert session.messages[-1].content == "Your train leaves at 8:15; I noted Berlin."
    assert session.state == "extracted" and extractor.calls
    assert remembered.get_fact("train_time", user_id="u1").value == "8:15"



def test_retriever_passes_the_users_time_zone(remembered):
    from navi_memory import ValidationError

    retriever = NaviMemoryRetriever(remembered, user_id="u1", timezone="America/Los_Angeles")
    assert retriever.retrieve("train to work yesterday") and retriever.retrieve_with("train", timezone="UTC")
    with pytest.raises(ValidationError, match="timezone"):
        retriever.retrieve_with("train", timezone="Mars/Olympus")
