"""Statement time on every write surface (issue 32, item 3): the CLI ``fact set --observed-at``,
the ``memory_save_fact`` tool (every framework's, and the MCP server's, which share its schema)
take when a value was said. An older statement enters the history and leaves the current value;
a date that is no ISO 8601 time is refused and writes nothing. Both backends."""

from __future__ import annotations

import json
from datetime import datetime, timezone

import pytest
from mcp import Client

from navi_memory.integrations._tools import MemoryTools
from navi_memory.cli import main
from navi_memory.integrations.mcp import MemoryServer

U = "tomas"
UTC = timezone.utc
LIVED = "2020-10-01T09:00:00+00:00"  # "I live in Berlin", said long before today's "Munich"
BAD = ["yesterday", "2026-13-01", "10000-01-01", ""]


def berlin_in_history(store) -> None:
    location = store.get_fact("location", user_id=U)
    assert location.value == "Munich"
    assert [(h.value, h.valid_from) for h in location.history] == [("Berlin", datetime(2020, 10, 1, 9, tzinfo=UTC))]


def test_cli_fact_set_observed_at_puts_an_older_value_into_the_history(store, db_url, capsys):
    store.upsert_fact(user_id=U, category="profile", key="location", value="Munich")
    code = main(["--db", db_url, "--embeddings", "hashing", "fact", "set", "--user", U, "--category", "profile",
                 "location", "Berlin", "--observed-at", LIVED])
    assert code == 0 and capsys.readouterr().out.strip() == "history: profile/location"
    berlin_in_history(store)


@pytest.mark.parametrize("when", BAD)
def test_cli_fact_set_refuses_a_bad_observed_at_and_writes_nothing(store, db_url, dump, capsys, when):
    store.upsert_fact(user_id=U, category="profile", key="location", value="Munich")
    before = dump()
    code = main(["--db", db_url, "--embeddings", "hashing", "fact", "set", "--user", U, "--category", "profile",
                 "location", "Berlin", f"--observed-at={when}"])
    err = capsys.readouterr().err
    assert code == 2 and "observed_at" in err and "Traceback" not in err, err
    assert dump() == before


@pytest.mark.parametrize("flavour", ["sync", "async"])
async def test_the_save_fact_tool_takes_when_it_was_said(store, flavour):
    tools = MemoryTools(store, U)
    store.upsert_fact(user_id=U, category="profile", key="location", value="Munich")
    args = {"category": "profile", "key": "location", "value": "Berlin", "observed_at": LIVED}
    out = tools.run("memory_save_fact", **args) if flavour == "sync" else await tools.arun("memory_save_fact", **args)
    reply = json.loads(out)
    assert (reply["action"], reply["value"]) == ("history", "Munich") and "history" in reply["note"]
    berlin_in_history(store)


@pytest.mark.parametrize("when", BAD)
def test_the_save_fact_tool_refuses_a_bad_observed_at_and_writes_nothing(store, dump, when):
    store.upsert_fact(user_id=U, category="profile", key="location", value="Munich")
    before = dump()
    reply = json.loads(MemoryTools(store, U).run("memory_save_fact", category="profile", key="location",
                                                  value="Berlin", observed_at=when))
    assert set(reply) == {"error"} and "observed_at" in reply["error"]
    assert dump() == before


async def test_the_mcp_save_fact_tool_takes_when_it_was_said(store, dump):
    store.upsert_fact(user_id=U, category="profile", key="location", value="Munich")
    async with Client(MemoryServer(store, user_id=U).server) as client:
        [tool] = [t for t in (await client.list_tools()).tools if t.name == "memory_save_fact"]
        assert "observed_at" in tool.input_schema["properties"]
        before = dump()
        bad = await client.call_tool("memory_save_fact", {"category": "profile", "key": "location",
                                                          "value": "Berlin", "observed_at": "yesterday"})
        assert bad.is_error and "observed_at" in json.loads(bad.content[0].text)["error"]
        assert dump() == before
        good = await client.call_tool("memory_save_fact", {"category": "profile", "key": "location",
                                                           "value": "Berlin", "observed_at": LIVED})
        assert not good.is_error and good.structured_content["action"] == "history"
    berlin_in_history(store)


def test_the_rest_facts_body_takes_when_it_was_said(store, dump):
    from starlette.testclient import TestClient

    from navi_memory.ui.api import create_api_app

    from .ui_helpers import LOCAL, TOKEN

    api = TestClient(create_api_app(store, token=TOKEN), base_url=LOCAL, headers={"Authorization": f"Bearer {TOKEN}"})
    store.upsert_fact(user_id=U, category="profile", key="location", value="Munich")
    before = dump()
    body = {"category": "profile", "key": "location", "value": "Berlin"}
    bad = api.post(f"/api/users/{U}/facts", json={**body, "observed_at": "yesterday"})
    assert bad.status_code == 422 and "observed_at" in bad.text
    assert dump() == before
    good = api.post(f"/api/users/{U}/facts", json={**body, "observed_at": LIVED})
    assert good.status_code == 200 and good.json()["action"] == "history"
    berlin_in_history(store)
