"""One bad row never blanks the memory: a date at the edge of the calendar (0001-01-01T00:00Z for a user in
Los Angeles, 9999-12-31T23:30Z in Tokyo) is shown, clamped to the calendar, wherever a date is rendered,
and one record that cannot be rendered at all is left out of its block (logged), never the block."""

from __future__ import annotations

import json
import logging
from datetime import datetime, timezone

import pytest
from langchain.agents import create_agent
from langchain_core.messages import HumanMessage, SystemMessage
from starlette.testclient import TestClient

from navi_memory import prompt
from navi_memory.core.timeutil import day_text, in_zone, minute_text, zone
from navi_memory.integrations._tools import MemoryTools
from navi_memory.integrations.langchain import NaviMemoryMiddleware, NaviMemoryRunnable
from navi_memory.models import Message, SearchResult
from navi_memory.pipeline.transcript import dated
from navi_memory.promotion import prompt_facts_block
from navi_memory.retrieval.dates import read_query

from .chat_fakes import ScriptedChat

U = "u1"
LA, TOKYO = "America/Los_Angeles", "Asia/Tokyo"
FIRST = datetime(1, 1, 1, tzinfo=timezone.utc)
LAST = datetime(9999, 12, 31, 23, 30, tzinfo=timezone.utc)
EDGES = [pytest.param(LA, "0001-01-01T00:00Z", "0001-01-01", id="year-1-los-angeles"),
         pytest.param(TOKYO, "9999-12-31T23:30Z", "9999-12-31", id="year-9999-tokyo")]


def result(n: int, when: datetime, content: str = "train ride") -> SearchResult:
    return SearchResult(id=n, content=f"{content} {n}", snippet=content, theme="travel", type="note",
                        created_at=when, score=0.9, signals={}, scores={})


# -- unit: the clamp and the renderers --------------------------------------------------------

def test_in_zone_clamps_to_the_calendar_instead_of_overflowing():
    assert FIRST.astimezone(timezone.utc) == FIRST  # (the stored value itself is fine)
    with pytest.raises(OverflowError):
        FIRST.astimezone(zone(LA))
    assert day_text(in_zone(FIRST, zone(LA))) == "0001-01-01"
    assert minute_text(in_zone(LAST, zone(TOKYO))) == "9999-12-31 23:59"
    ordinary = datetime(2026, 1, 1, 5, tzinfo=timezone.utc)
    assert in_zone(ordinary, zone(LA)) == ordinary and day_text(in_zone(ordinary, zone(LA))) == "2025-12-31"
    assert in_zone(datetime(2026, 1, 1), None).tzinfo is timezone.utc  # naive is UTC
    assert minute_text(datetime(12, 3, 4, 5, 6)) == "0012-03-04 05:06"  # four-digit years (not "12-03-04")


@pytest.mark.parametrize("zone_name", [LA, TOKYO, "Pacific/Kiritimati", "Pacific/Pago_Pago"])
def test_relevant_memory_block_shows_edge_dates_in_any_zone(zone_name):
    block = prompt.relevant_memory_block([result(1, FIRST), result(2, LAST)], tz=zone(zone_name))
    assert "[travel/note, 0001-01-" in block and "[travel/note, 9999-12-" in block
    assert block.count("- [") == 2


def test_one_record_that_cannot_be_rendered_is_left_out_and_logged(caplog):
    broken = result(2, FIRST)
    broken.created_at = None  # type: ignore[assignment]  # no date at all: no code path makes one
    with caplog.at_level(logging.WARNING, logger="navi_memory.prompt"):
        block = prompt.relevant_memory_block([result(1, FIRST), broken, result(3, LAST)], tz=zone(LA))
    assert "train ride 1" in block and "train ride 3" in block and "train ride 2" not in block
    assert [r.getMessage().split(":")[0] for r in caplog.records] == ["memory 2 left out of the prompt"]
    assert "cannot render it (AttributeError" in caplog.records[0].getMessage()
    assert prompt.relevant_memory_block([broken]) is None  # nothing left: no block (not an empty one)


def test_a_fact_or_household_member_that_cannot_be_rendered_is_left_out(caplog):
    class Broken:
        id = 7

        def __getattr__(self, name: str):
            raise RuntimeError("unreadable row")

    with caplog.at_level(logging.WARNING, logger="navi_memory.prompt"):
        facts = prompt_facts_block([{"key": "city", "value": "Oslo", "person": None}, Broken()])
        household = prompt.household_block({"timezone": LA, "persons": [Broken()]})
    assert facts is not None and "- city: Oslo" in facts and facts.count("\n- ") == 1
    assert household is not None and "Time zone: America/Los_Angeles" in household
    assert [r.getMessage().split(":")[0] for r in caplog.records] == [
        "fact 7 left out of the prompt", "household member 7 left out of the prompt"]


def test_transcript_days_and_date_queries_at_the_calendars_edge():
    messages = [Message(role="user", content="hi", created_at=FIRST), Message(role="user", content="x",
                                                                            created_at=LAST)]
    assert dated(messages, zone(LA)) == "from Monday, 1 January 1 to Friday, 31 December 9999 (America/Los_Angeles)"
    when = read_query("what did I do in December?", datetime(2026, 3, 1, tzinfo=zone(TOKYO)))
    assert when.every_year and not when.covers(FIRST) and when.covers(LAST)  # (10000-01-01 in Tokyo: told after)
    assert when.covers(datetime(9999, 12, 20, tzinfo=timezone.utc))


# -- through the real adapters, on both backends --------------------------------------------

def remember(store, zone_name: str, when: str) -> int:
    store.set_user_timezone(zone_name, user_id=U)
    store.upsert_fact(user_id=U, category="preferences", key="transport", value="trains")
    store.set_summary("Eugene likes trains.", user_id=U)  # after the fact: a fact change rewrites it
    ordinary = store.add(user_id=U, content="train ride to Bergen")
    store.add(user_id=U, content="train ride across the calendar's edge", observed_at=when)
    return ordinary


def texts(messages) -> str:
    return "\n".join(str(m.content) for m in messages if isinstance(m, SystemMessage))


@pytest.mark.parametrize("zone_name, when, day", EDGES)
async def test_runnable_keeps_the_summary_and_shows_the_edge_item(store, zone_name, when, day, caplog):
    remember(store, zone_name, when)
    runnable = NaviMemoryRunnable(store=store, user_id=U)
    turn = [SystemMessage("You are helpful."), HumanMessage("which train ride?")]
    with caplog.at_level(logging.INFO, logger="navi_memory"):
        outs = [runnable.invoke(turn), await runnable.ainvoke(turn)]
    assert not [r for r in caplog.records if "unavailable" in r.getMessage()]
    for out in outs:
        memory = texts(out[1:-1])
        assert prompt.UNAVAILABLE_NOTE not in memory and "Eugene likes trains." in memory
        assert "transport: trains" in memory and f"Time zone: {zone_name}" in memory
        assert f"[general/note, {day}] train ride across the calendar's edge" in memory
        assert "train ride to Bergen" in memory


@pytest.mark.parametrize("zone_name, when, day", EDGES)
def test_create_agent_middleware_what_the_model_receives(store, zone_name, when, day):
    remember(store, zone_name, when)

    class AgentChat(ScriptedChat):
        def bind_tools(self, tools, **kwargs):
            return self

    model = AgentChat(script=["Noted."])
    agent = create_agent(model, tools=[], system_prompt="You are helpful.",
                         middleware=[NaviMemoryMiddleware(store=store, user_id=U, record=False)])
    agent.invoke({"messages": [HumanMessage("which train ride did I take?")]})
    sent = texts(model.calls[0])
    assert "Eugene likes trains." in sent and f"{day}] train ride across the calendar's edge" in sent


@pytest.mark.parametrize("zone_name, when, day", EDGES)
async def test_llamaindex_block_and_a_date_query(store, zone_name, when, day):
    from llama_index.core.llms import ChatMessage

    from navi_memory.integrations.llamaindex import NaviMemoryBlock

    remember(store, zone_name, when)
    block = NaviMemoryBlock(store=store, user_id=U, record=False)
    text = await block.aget([ChatMessage(role="user", content="which train ride in December?")])
    assert "Eugene likes trains." in text and f"{day}] train ride across the calendar's edge" in text
    assert store.search("train ride in December", user_id=U, timezone=zone_name)  # (a period query: no overflow)


@pytest.mark.parametrize("zone_name, when, day", EDGES)
def test_tools_show_the_stored_time(store, zone_name, when, day):
    remember(store, zone_name, when)
    tools = MemoryTools(store, U)
    found = json.loads(tools.run("memory_search", query="train ride across the calendar's edge"))["results"]
    item = json.loads(tools.run("memory_get", item_id=found[0]["id"]))
    assert item["observed_at"].startswith(day)  # UTC, as stored: nothing to convert


@pytest.mark.parametrize("zone_name, when, day", EDGES)
def test_ui_item_page_shows_the_edge_date(store, zone_name, when, day):
    from navi_memory.ui.app import create_app

    remember(store, zone_name, when)
    item = next(i for i in store.list_items(user_id=U) if "edge" in i.content)
    page = TestClient(create_app(store), base_url="http://127.0.0.1").get(f"/users/{U}/items/{item.id}")
    assert page.status_code == 200 and f"<dd>{day} " in page.text
