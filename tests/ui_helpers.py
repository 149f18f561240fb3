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
    # update_summary=False: the summary history below is the fixture's own
    store.upsert_fact(user_id="alice", category="profile", key="city", value="Lisbon", update_summary=False)
    if clock is not None:
        clock.advance(days=1)
    store.upsert_fact(user_id="alice", category="profile", key="city", value="Porto", update_summary=False)
    store.upsert_fact(user_id="alice", category="preferences", key="drink", value=IMG, source_context=SCRIPT,
                      update_summary=False)
    store.set_summary("Alice likes tea.", user_id="alice")
    store.set_summary(f"Alice likes tea and lives in Porto. {SCRIPT}", user_id="alice")
    ids["bob"] = store.add(user_id="bob", content="Bob's private diary entry about tea", theme="diary")
    return ids


HOSTILE_SESSION = f"chat {IMG}"


def fill_activity(store: Any) -> None:
    """Beyond ``fill``: alice's household and open sessions (hostile text in names, aliases, notes,
    session ids and messages; no extraction, so her items stay as ``fill`` made them); frank, who has
    only conversations: one extracted by a scripted model (LLM calls with tokens), one whose
    extraction failed with hostile text in the error."""
    from .chat_fakes import ScriptedChat

    store.set_household_mode("multi", user_id="alice")
    store.add_person(f"Anna {SCRIPT}", user_id="alice", role="primary", aliases=[IMG, "Annie"], pronouns="she/her",
                     notes=SCRIPT)
    store.add_person("Ben", user_id="alice", role="partner", aliases=["B"], pronouns="he/him", birth_date="1990-04-01")
    store.add_messages("morning chat", [{"role": "user", "content": f"I like green tea {SCRIPT}"},
                                        {"role": "assistant", "content": f"Noted! {IMG}"}], user_id="alice", triggers=False)
    store.add_messages(HOSTILE_SESSION, [{"role": "user", "content": "hello"}], user_id="alice", triggers=False)
    store.add_messages("trip", [{"role": "user", "content": "I'm Frank and I live in Oslo."},
                                {"role": "assistant", "content": "Hi Frank!"}], user_id="frank", triggers=False)
    store.set_chat_model(ScriptedChat(script=[
        {"facts": [{"category": "profile", "key": "location", "value": "Oslo", "source": "user_explicit"}], "notes": []},
        "Frank lives in Oslo."], usage=(1200, 300)))
    store.extract_session("trip", user_id="frank")
    store.add_messages("broken", [{"role": "user", "content": "I started learning the cello this week."},
                                  {"role": "assistant", "content": "Wonderful."}], user_id="frank", triggers=False)
    store.set_chat_model(ScriptedChat(script=[ConnectionError(f"provider down {SCRIPT}")] * 3))
    store.extract_session("broken", user_id="frank")
    store.set_chat_model(None)
