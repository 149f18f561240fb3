"""``navi-memory demo``: ingest a shipped sample conversation, search it, show the memory block."""

from __future__ import annotations

import json
from importlib import resources
from typing import Any, TextIO

from . import prompt
from .store import MemoryStore


def load_sample() -> dict[str, Any]:
    return json.loads(resources.files("navi_memory").joinpath("data/sample_conversation.json").read_text("utf-8"))


def ingest_sample(store: MemoryStore, sample: dict[str, Any]) -> dict[str, int]:
    """Store the sample's user turns as items and its facts as facts; idempotent per user."""
    user = sample["user_id"]
    store.forget(user_id=user)
    turns = [
        {"user_id": user, "content": m["content"], "type": m.get("type", "note"), "theme": m.get("theme"),
         "source": "conversation", "source_ref": {"session_id": sample["session_id"], "turn": n}}
        for n, m in enumerate(sample["messages"]) if m["role"] == "user"
    ]
    store.add_many(turns)
    for fact in sample["facts"]:
        store.upsert_fact(user_id=user, source_session_id=sample["session_id"], **fact)
    store.set_summary(sample["summary"], user_id=user)
    return {"items": len(turns), "facts": len(sample["facts"])}


def run_demo(store: MemoryStore, out: TextIO) -> None:
    sample = load_sample()
    user = sample["user_id"]
    counts = ingest_sample(store, sample)
    mode = f"hybrid (embeddings: {store.embedding_model})" if store.embedding_model else "lexical only (no embedding provider)"
    out.write(f"Stored {counts['items']} conversation turns and {counts['facts']} facts for {user!r}.\n")
    out.write(f"Search mode: {mode}\n")
    for query in sample["queries"]:
        out.write(f"\nsearch {query!r}\n")
        for r in store.search(query, user_id=user, limit=3):
            flags = ",".join(name for name, on in r.signals.items() if on) or "-"
            out.write(f"  {round(r.score, 3) + 0.0:6.3f}  [{flags:<22}] {r.kind:<4} {' '.join(r.snippet.split())}\n")
    query = sample["queries"][0]
    out.write(f"\nMemory an assistant receives for the message {query!r}:\n\n")
    summary = prompt.summary_block(store.get_summary(user_id=user))
    relevant = prompt.relevant_memory_block(store.search(query, user_id=user, limit=8,
                                                         min_similarity=store.settings.min_similarity))
    for block in (summary, relevant):
        if block:
            out.write(block + "\n\n")
