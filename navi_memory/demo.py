"""``navi-memory demo``: a shipped sample conversation goes through the pipeline as a real one
would; the demo then shows the facts, the summary, searches and the memory block an assistant
receives, and what to try next."""

from __future__ import annotations

import json
from importlib import resources
from typing import Any, TextIO

from . import prompt
from .store import MemoryStore

TOOL_SOURCE = "tool_call"


def load_sample() -> dict[str, Any]:
    sample: dict[str, Any] = json.loads(
        resources.files("navi_memory").joinpath("data/sample_conversation.json").read_text("utf-8"))
    return sample


def ingest_sample(store: MemoryStore, sample: dict[str, Any]) -> dict[str, Any]:
    """The sample as a live conversation: its messages into a session (each turn a searchable
    chunk), the session extracted (chat model if configured, else the rules), the facts the
    assistant's save-fact tool recorded during the chat, and a summary. Idempotent per user."""
    user, session = sample["user_id"], sample["session_id"]
    store.forget(user_id=user)
    messages = [{"role": m["role"], "content": m["content"]} for m in sample["messages"]]
    store.add_messages(session, messages, user_id=user, triggers=False)
    report = store.extract_session(session, user_id=user)
    for fact in sample["facts"]:
        store.upsert_fact(user_id=user, source_session_id=session, **{**fact, "source": TOOL_SOURCE})
    written = report.used_llm and report.summary_updated and store.get_summary(user_id=user)
    if not written:  # no chat model to write one: the sample's example narrative stands in
        store.set_summary(sample["summary"], user_id=user)
    return {"messages": len(messages), "used_llm": report.used_llm, "summary_written": bool(written)}


def _line(text: str, width: int = 96) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[:width - 1] + "…"


def run_demo(store: MemoryStore, out: TextIO, db: str | None = None) -> None:
    """``db``: the database as the user would pass it to ``--db`` (for the commands to try next)."""
    sample = load_sample()
    user = sample["user_id"]
    done = ingest_sample(store, sample)
    say = out.write
    say(f"\n1. A conversation: {done['messages']} messages with Maya, stored as session {sample['session_id']!r}\n"
        "   (each turn is now a searchable chunk, like any conversation your assistant records).\n")

    facts = store.get_all_facts(user_id=user)
    extracted = [f for f in facts if f.source != TOOL_SOURCE]
    how = "the chat model" if done["used_llm"] else "the built-in rules (no chat model configured)"
    say(f"\n2. Facts. Extracted from the conversation by {how}:\n")
    for f in extracted or ():
        say(f"   {f.category}/{f.key}: {f.value}\n")
    if not extracted:
        say("   (none)\n")
    say("   Saved by the assistant's memory_save_fact tool during the chat:\n")
    for f in facts:
        if f.source == TOOL_SOURCE:
            say(f"   {f.category}/{f.key}: {f.value}\n")

    origin = "written by the chat model" if done["summary_written"] else \
        "an example narrative: with a chat model configured the summariser writes it from the facts"
    say(f"\n3. The summary ({origin}):\n")
    for paragraph in (store.get_summary(user_id=user) or "").split("\n\n"):
        say(f"   {_line(paragraph, 400)}\n")

    mode = f"hybrid: keywords + meaning ({store.embedding_model})" if store.embedding_model else \
        "keywords only: no embedding model installed (see below)"
    say(f"\n4. Searches as the user would ask ({mode}); the best 3 of each:\n")
    for query in sample["queries"]:
        say(f"\n   {query!r}\n")
        for r in store.search(query, user_id=user, limit=3):
            say(f"   {round(r.score, 3) + 0.0:6.3f}  {r.kind:<4} {_line(r.snippet, 84)}\n")

    query = sample["queries"][0]
    say(f"\n5. What the assistant's prompt gets for the message {query!r}\n"
        "   (the summary after its system prompt, the relevant memories before the message):\n\n")
    summary = prompt.summary_block(store.get_summary(user_id=user))
    relevant = prompt.relevant_memory_block(store.search(query, user_id=user, limit=8,
                                                         min_similarity=store.settings.min_similarity))
    for block in (summary, relevant):
        if block:
            say(block + "\n\n")

    db = f"--db {db} " if db else ""
    say("6. Try next:\n"
        f"   navi-memory {db}search --user {user} \"what is my dog called?\"\n"
        f"   navi-memory {db}facts --user {user} --history\n"
        f"   navi-memory {db}ui                       # browse this memory in a browser\n"
        "   docs/integrations.md: give a LangChain or LlamaIndex agent this memory in one line.\n")
    if not store.embedding_model:
        say("\n   Searches above matched keywords only. For search by meaning install the local model:\n"
            "   pip install torch==2.13.0 && pip install \"navi-memory[local]\"   (or set OLLAMA_HOST)\n")
