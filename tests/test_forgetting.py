"""The summary follows the facts, and deleting a memory forgets the conversation text it came from
(the forgetting guarantee, docs/concepts.md), on both backends: every surface a prompt or the UI
reads is walked after a delete."""

from __future__ import annotations

import json

import pytest
from langchain_core.messages import HumanMessage, SystemMessage
from mcp import Client
from starlette.testclient import TestClient

from navi_memory import prompt
from navi_memory.integrations.langchain import NaviMemoryRunnable, NaviMemoryToolkit
from navi_memory.integrations.mcp import SUMMARY_URI, MemoryServer
from navi_memory.operations.follow import REDACTED
from navi_memory.ui.api import create_api_app

from .chat_fakes import ScriptedChat
from .test_pipeline_extraction import talk
from .ui_helpers import LOCAL, TOKEN

pytestmark = pytest.mark.on_citus  # and on the Citus cluster (tests/conftest.py)

U = "tomas"
GONE = "3 December"


def told(store, user=U):
    store.extract_session("s1", user_id=user)


def dentist(store):
    return next(f for f in store.get_all_facts(user_id=U) if GONE in f.value)


def conversation(store):
    talk(store, "s1", "Hi! My name is Tomas and I live in Berlin.", "Nice to meet you, Tomas.",
         "Remember that my dentist appointment is on 3 December at 10am.", "Noted.",
         "Can you recommend a book about birds?", "Try 'The Genius of Birds'.", user=U)
    told(store)


def every_text(store) -> str:
    """What the store can still show of the user, in one string (items, messages, summaries)."""
    items = store.list_items(user_id=U, status="any", limit=1000)
    session = store.get_session("s1", user_id=U)
    return "\n".join([*(f"{i.content}\n{i.context or ''}" for i in items),
                      *(m.content for m in session.messages),
                      *(s.content for s in store.summary_history(user_id=U, limit=1000))])


def test_fact_changes_rewrite_the_summary_at_once_without_a_chat_model(store):
    conversation(store)
    assert GONE in store.get_summary(user_id=U) and "Berlin" in store.get_summary(user_id=U)
    store.delete_fact(dentist(store).key, user_id=U)
    store.upsert_fact(user_id=U, category="profile", key="location", value="Munich")
    summary = store.get_summary(user_id=U)
    assert GONE not in summary and "Berlin" not in summary and "Munich" in summary
    saved = store.upsert_fact(user_id=U, category="preferences", key="drink", value="green tea")
    assert "green tea" in store.get_summary(user_id=U)
    # a fact's searchable item: archived, the fact leaves the summary; restored, it comes back
    store.archive(saved.fact.item_id, user_id=U)
    assert "green tea" not in store.get_summary(user_id=U)
    store.archive(saved.fact.item_id, user_id=U, archived=False)
    assert "green tea" in store.get_summary(user_id=U)
    # deleted, it takes its fact along
    store.delete(saved.fact.item_id, user_id=U)
    assert "drink" not in {f.key for f in store.get_all_facts(user_id=U)}
    assert "green tea" not in store.get_summary(user_id=U)
    for fact in store.get_all_facts(user_id=U):
        store.delete_fact(fact.key, user_id=U)
    assert store.get_summary(user_id=U) is None  # no facts left: no summary


def test_a_fact_saved_by_a_tool_reaches_the_summary(store):
    tools = {t.name: t for t in NaviMemoryToolkit(store=store, user_id=U).get_tools()}
    tools["memory_save_fact"].invoke({"category": "profile", "key": "home_city", "value": "Oslo"})
    assert "Oslo" in store.get_summary(user_id=U)
    tools["memory_forget"].invoke({"key": "home_city"})
    assert store.get_summary(user_id=U) is None


async def test_after_a_delete_no_surface_shows_the_deleted_text(store):
    conversation(store)
    fact = dentist(store)
    assert GONE in every_text(store)
    store.delete_fact(fact.key, user_id=U)
    store.upsert_fact(user_id=U, category="profile", key="location", value="Munich")

    assert GONE not in every_text(store)  # chunks, their context copies, messages, every summary version
    session = store.get_session("s1", user_id=U)
    assert [m.content for m in session.messages].count(REDACTED) == 1 and len(session.messages) == 6
    assert "Genius of Birds" in every_text(store)  # the rest of the conversation stays
    assert all(GONE not in r.content for r in store.search("dentist appointment", user_id=U))
    summary = store.get_summary(user_id=U)
    assert "Munich" in summary and "Berlin" not in summary
    # the LangChain runnable (the middleware's memory block), the tools, MCP, REST and the UI page
    out = NaviMemoryRunnable(store=store, user_id=U).invoke(
        [SystemMessage("You are helpful."), HumanMessage("when is my dentist appointment?")])
    blocks = "\n".join(str(m.content) for m in out)
    assert prompt.SUMMARY_HEADING in blocks and "Munich" in blocks and GONE not in blocks
    tools = {t.name: t for t in NaviMemoryToolkit(store=store, user_id=U).get_tools()}
    assert GONE not in tools["memory_search"].invoke({"query": "dentist appointment"})
    async with Client(MemoryServer(store, user_id=U).server) as client:
        text = (await client.read_resource(SUMMARY_URI)).contents[0].text
        assert "Munich" in text and GONE not in text
    api = TestClient(create_api_app(store, token=TOKEN), base_url=LOCAL,
                     headers={"Authorization": f"Bearer {TOKEN}"})
    for path in ("summary", "memory.md", "items?status=any&limit=100", "search?q=dentist+appointment&all=1",
                 "facts"):
        page = api.get(f"/api/users/{U}/{path}")
        assert page.status_code == 200 and GONE not in page.text, path
    assert "Munich" in json.dumps(api.get(f"/api/users/{U}/summary").json())
    assert GONE not in store.memory_markdown(user_id=U)


def test_deleting_a_stored_turn_redacts_its_messages(store):
    conversation(store)
    turn = next(i for i in store.list_items(user_id=U, theme="conversation") if "Genius of Birds" in i.content)
    store.delete(turn.id, user_id=U)
    assert "Genius of Birds" not in every_text(store) and "book about birds" not in every_text(store)
    session = store.get_session("s1", user_id=U)
    assert [m.content for m in session.messages][-2:] == [REDACTED, REDACTED]
    assert "Tomas" in every_text(store)


def test_with_a_chat_model_the_deleted_value_leaves_at_once_and_the_model_rewrites_later(store):
    conversation(store)
    store.set_summary("Tomas lives in Berlin. His dentist appointment is on 3 December at 10am.", user_id=U)
    model = ScriptedChat(script=["Tomas lives in Berlin.", "Tomas lives in Munich."], usage=(10, 5))
    store.set_chat_model(model)
    store.delete_fact(dentist(store).key, user_id=U)
    assert GONE not in store.get_summary(user_id=U)  # the composed text, before the model answers
    store.wait_for_background()
    assert store.get_summary(user_id=U) == "Tomas lives in Berlin."
    store.upsert_fact(user_id=U, category="profile", key="location", value="Munich")
    assert "Berlin" not in store.get_summary(user_id=U)
    store.wait_for_background()
    assert store.get_summary(user_id=U) == "Tomas lives in Munich."
    assert all(GONE not in s.content for s in store.summary_history(user_id=U, limit=100))


def test_an_import_of_facts_without_a_summary_writes_one(store):
    store.upsert_fact(user_id=U, category="profile", key="name", value="Tomas")
    records: list[dict] = []
    store.export(records.append, user_id=U)
    store.forget(user_id=U)
    store.import_records([r for r in records if r.get("type") != "summary"])
    assert "Tomas" in store.get_summary(user_id=U)


def test_an_import_keeps_a_summary_text_that_came_back(store):
    """Deleted and saved again at one instant, the summary says what it said before: a copy made by
    export and import has every version, so its current summary is the same."""
    store.upsert_fact(user_id=U, category="profile", key="name", value="Tomas")
    store.delete_fact("name", user_id=U)
    store.upsert_fact(user_id=U, category="profile", key="name", value="Tomas")
    records: list[dict] = []
    store.export(records.append, user_id=U)
    store.import_records(records, user_map={U: "copy"})
    store.import_records(records, user_map={U: "copy"})  # again: nothing new
    assert [s.content for s in store.summary_history(user_id="copy")] == [
        s.content for s in store.summary_history(user_id=U)]
    assert store.get_summary(user_id="copy") == store.get_summary(user_id=U) == "About the user: name: Tomas."


def test_a_summary_the_model_wrote_while_a_fact_was_deleted_is_not_stored(store):
    store.upsert_fact(user_id=U, category="profile", key="name", value="Tomas")
    store.upsert_fact(user_id=U, category="other", key="dentist", value="on 3 December at 10am")

    def delete_meanwhile(messages):
        store.delete_fact("dentist", user_id=U)  # while the model writes from the facts it was given
        return "Tomas sees the dentist on 3 December at 10am."

    store.set_chat_model(ScriptedChat(script=[delete_meanwhile, "Tomas.", "Tomas."], usage=(10, 5)))
    # the delete queued a rewrite in the background: whichever of the two stores "Tomas." first,
    # the other finds it current and stores nothing
    store.refresh_summary(user_id=U)
    store.wait_for_background()
    assert store.get_summary(user_id=U) == "Tomas."
    assert all(GONE not in s.content for s in store.summary_history(user_id=U, limit=100))


def test_deleting_a_shared_facts_item_forgets_it_while_agents_keep_the_same_key(store):
    """The shared fact (no agent) and an agent's fact of the same key are two facts: deleting the
    shared one's searchable item deletes that fact, and only it, from the facts, every summary
    version and the prompt; the agent's value stays. (Before, the item went and the shared value
    stayed in the facts and the summary.)"""
    shared = store.upsert_fact(user_id=U, category="preferences", key="seat", value="window seat near the wing")
    store.upsert_fact(user_id=U, category="preferences", key="seat", value="aisle seat", agent_id="travel")
    assert "window seat" in store.get_summary(user_id=U)
    store.delete(shared.fact.item_id, user_id=U)
    assert [(f.agent_id, f.value) for f in store.get_all_facts(user_id=U)] == [("travel", "aisle seat")]
    assert "aisle seat" in store.get_summary(user_id=U)
    assert all("window seat" not in s.content for s in store.summary_history(user_id=U, limit=100))
    assert all("window seat" not in r.content for r in store.search("seat", user_id=U, min_score=0))
    for agent in (None, "travel"):
        out = NaviMemoryRunnable(store=store, user_id=U, agent_id=agent).invoke(
            [SystemMessage("You are helpful."), HumanMessage("which seat do I like?")])
        blocks = "\n".join(str(m.content) for m in out)
        assert "aisle seat" in blocks and "window seat" not in blocks


def _summary_usage(stats):
    return {k: stats["purposes"].get("summary", {}).get(k) for k in ("calls", "input_tokens", "output_tokens", "failed")}


def test_a_summary_rewritten_in_the_background_is_booked_in_usage(store):
    """The chat model's calls of a background summary rewrite count in usage stats like the
    pipeline's (purpose ``summary``, no session), a failed one (an empty text) too."""
    store.upsert_fact(user_id=U, category="profile", key="name", value="Tomas")
    store.set_chat_model(ScriptedChat(script=["Tomas lives in Munich.", ""], usage=(10, 5)))
    store.upsert_fact(user_id=U, category="profile", key="location", value="Munich")
    store.wait_for_background()
    assert store.get_summary(user_id=U) == "Tomas lives in Munich."
    stats = store.usage_stats(user_id=U)
    assert _summary_usage(stats) == {"calls": 1, "input_tokens": 10, "output_tokens": 5, "failed": 0}
    assert list(stats["models"]) != ["unknown"] and stats["totals"]["llm_calls"] == 1
    store.upsert_fact(user_id=U, category="preferences", key="drink", value="green tea")
    store.wait_for_background()
    assert _summary_usage(store.usage_stats(user_id=U)) == {"calls": 2, "input_tokens": 10 + 10,
                                                             "output_tokens": 5 + 5, "failed": 1}
    assert store.usage_stats(user_id="someone else")["totals"]["llm_calls"] == 0


async def test_a_summary_rewritten_in_the_background_is_booked_in_usage_async(db_url, fake_embeddings, clock):
    from navi_memory import AsyncMemoryStore

    async with await AsyncMemoryStore.open(db_url, embeddings=fake_embeddings, clock=clock) as s:
        s.set_chat_model(ScriptedChat(script=["Tomas."], usage=(7, 3)))
        await s.upsert_fact(user_id=U, category="profile", key="name", value="Tomas")
        await s.wait_for_background()
        assert await s.get_summary(user_id=U) == "Tomas."
        assert _summary_usage(await s.usage_stats(user_id=U)) == {"calls": 1, "input_tokens": 7, "output_tokens": 3,
                                                                  "failed": 0}


def test_a_user_forgotten_between_a_notes_row_and_its_vector_is_a_clear_not_found(store):
    """``add_note`` writes the row, then embeds it in a second transaction: a ``forget`` landing between
    the two met a user row that was gone (SQLite: a TypeError, a 500 over REST)."""
    import threading

    from navi_memory.errors import NotFoundError

    store.add_note(user_id=U, content="the first note")
    embedder = store.embedder
    real = embedder.embed_documents

    def forget_first(texts):
        worker = threading.Thread(target=lambda: store.forget(user_id=U))
        worker.start()
        worker.join()
        return real(texts)

    embedder.embed_documents = forget_first
    try:
        with pytest.raises(NotFoundError, match="no item"):
            store.add_note(user_id=U, content="the second note")
    finally:
        embedder.embed_documents = real
    assert store.list_items(user_id=U) == [] and store.embedding_status()["items"] == 0
    store.add_note(user_id=U, content="a note after")  # the user starts anew
    assert [i.content for i in store.list_items(user_id=U)] == ["a note after"]
