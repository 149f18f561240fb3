"""Shared data and clients for the web UI and REST API tests."""

from __future__ import annotations

from typing import Any

SCRIPT = "<script>alert(1)</script>"
IMG = '"><img src=x onerror=alert(1)>'
TOKEN = "t0ken-for-tests-0123456789"
LOCAL = "http://127.0.0.1"


def fill(store: Any, clock: Any = None) -> dict[str, Any]:
    """Two users; alice has themes, an archived item, facts with history, summaries and hostile text."""
    ids = {}
    ids["tea"] = store.add(user_id="alice", content="Alice drinks green tea every morning", theme="drinks")
    ids["coffee"] = store.add(user_id="alice", content="Used to like espresso", theme="drinks", type="preference")
    ids["old"] = store.add(user_id="alice", content="Lived in Lisbon (archived note)", theme="places")
    store.archive(ids["old"], user_id="alice")
    ids["script"] = store.add(user_id="alice", content=f"{SCRIPT} tea notes", theme="hostile", title=IMG)
    ids["img"] = store.add(user_id="alice", content=f"{IMG} more tea", theme="hostile")
    if clock is not None:
        clock.advance(days=1)
    store.upsert_fact(user_id="alice", category="profile", key="city", value="Lisbon")
    if clock is not None:
        clock.advance(days=1)
    store.upsert_fact(user_id="alice", category="profile", key="city", value="Porto")
    store.upsert_fact(user_id="alice", category="preferences", key="drink", value=IMG, source_context=SCRIPT)
    store.set_summary("Alice likes tea.", user_id="alice")
    store.set_summary(f"Alice likes tea and lives in Porto. {SCRIPT}", user_id="alice")
    ids["bob"] = store.add(user_id="bob", content="Bob's private diary entry about tea", theme="diary")
    return ids
