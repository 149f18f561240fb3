"""Embedding and chat models of LangChain providers chosen in the environment (``provider:model``),
against a local server speaking OpenAI's API (as llama.cpp, vLLM or LM Studio do), on every backend:
the real langchain-openai client, real sockets; keys sent, never shown."""

from __future__ import annotations

import json
import logging

import pytest

from navi_memory import ConfigurationError, MemoryStore, Settings
from navi_memory.embeddings import resolve_embedder
from navi_memory.pipeline.llm import resolve_chat_model

from .openai_server import FakeOpenAI

KEY = "sk-test-0123456789-secret"


@pytest.fixture
def server():
    s = FakeOpenAI()
    yield s
    s.close()


def env(server: FakeOpenAI, db_url: str, **extra: str) -> dict[str, str]:
    return {"NAVI_MEMORY_URL": db_url, "NAVI_MEMORY_EMBEDDINGS": "openai:text-embedding-3-small",
            "NAVI_MEMORY_EMBEDDING_URL": server.url, "NAVI_MEMORY_EMBEDDING_API_KEY": KEY,
            "NAVI_MEMORY_CHAT_MODEL": "openai:Qwen2.5-7B-Instruct", "NAVI_MEMORY_CHAT_URL": server.url,
            "NAVI_MEMORY_CHAT_API_KEY": KEY, **extra}


def test_embeddings_and_extraction_through_an_openai_style_server(server, db_url, caplog):
    caplog.set_level(logging.DEBUG)
    settings = Settings.from_env(env(server, db_url))
    assert KEY not in repr(settings) and server.url in repr(settings)
    server.replies = [json.dumps({"facts": [{"category": "profile", "key": "city", "value": "Porto",
                                             "source": "user_explicit"}], "notes": []}), "Lives in Porto."]
    with MemoryStore.open(db_url, settings=settings) as store:
        assert store.embedding_model == "openai:text-embedding-3-small"
        item = store.add(user_id="u1", content="I keep bees on the roof")
        assert store.get(item, user_id="u1").embedding.state == "ready"
        top = store.search("bees on the roof", user_id="u1")[0]
        assert top.id == item and top.signals["semantic"] is True
        store.add_messages("s1", [{"role": "user", "content": "I moved to Porto."},
                                  {"role": "assistant", "content": "Nice!"}], user_id="u1", triggers=False)
        report = store.extract_session("s1", user_id="u1")
        assert report.state == "extracted" and report.used_llm and report.llm_calls == 2
        assert store.get_fact("city", user_id="u1").value == "Porto"
        assert set(store.usage_stats(user_id="u1")["models"]) == {"openai:Qwen2.5-7B-Instruct"}
    paths = [r["path"] for r in server.requests]
    assert "/v1/embeddings" in paths and paths.count("/v1/chat/completions") == 2
    assert {r["authorization"] for r in server.requests} == {f"Bearer {KEY}"}
    embed = next(r for r in server.requests if r["path"] == "/v1/embeddings")["body"]
    assert embed["model"] == "text-embedding-3-small" and isinstance(embed["input"][0], str)  # text, not tokens
    chat = next(r for r in server.requests if r["path"] == "/v1/chat/completions")["body"]
    assert chat["model"] == "Qwen2.5-7B-Instruct" and chat["temperature"] == 0
    assert KEY not in caplog.text


def test_provider_and_model_may_be_given_apart(server, db_url):
    settings = Settings.from_env(env(server, db_url, NAVI_MEMORY_EMBEDDINGS="OpenAI",
                                     NAVI_MEMORY_EMBEDDING_MODEL="BAAI/bge-small-en-v1.5"))
    embedder = resolve_embedder(None, settings)
    assert embedder.model_name == "openai:BAAI/bge-small-en-v1.5"  # the model's case kept
    assert len(embedder.embed_query("hello")) == 32


def test_ollama_names_stay_ollama_and_bad_names_are_clear(server, db_url):
    settings = Settings.from_env(env(server, db_url))
    for name in ("llama3.2:3b", "ollama:llama3.2", "qwen2.5"):
        assert resolve_chat_model(name, settings).name.startswith("ChatOllama:")
    assert resolve_chat_model("anthropic:claude-haiku-4-5", settings).name == "anthropic:claude-haiku-4-5"
    with pytest.raises(ConfigurationError, match="unknown embeddings provider 'nope:x'"):
        resolve_embedder("nope:x", settings)
    with pytest.raises(ConfigurationError, match="give the openai model"):
        resolve_embedder("openai", Settings(url=db_url))
