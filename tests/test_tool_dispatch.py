"""Framework-free tools: ``MemoryTools.openai_schemas(strict=False)`` / ``anthropic_schemas()`` and ``dispatch``,
for a plain OpenAI or Anthropic SDK tool loop, on a real store with the fake embedder."""

from __future__ import annotations

import json

import jsonschema
import pytest

from navi_memory import AsyncMemoryStore, NaviMemoryError, ValidationError
from navi_memory.integrations._tools import MULTI_TOOLS
from navi_memory.integrations.tools import TOOLS, MemoryTools


def _keys(node):
    """Every key anywhere in a JSON value (to prove no schema mentions a user id)."""
    if isinstance(node, dict):
        for k, v in node.items():
            yield k
            yield from _keys(v)
    elif isinstance(node, list):
        for v in node:
            yield from _keys(v)


@pytest.mark.parametrize("household, names", [("single", TOOLS), ("multi", MULTI_TOOLS)])
def test_openai_and_anthropic_schemas_are_json_schema_without_a_user_id(store, household, names):
    """The plain form (``strict=False``); OpenAI's strict mode: tests/test_tool_schemas.py."""
    tools = MemoryTools(store, household=household)
    openai, anthropic = tools.openai_schemas(strict=False), tools.anthropic_schemas()
    assert [t["function"]["name"] for t in openai] == list(names) == [t["name"] for t in anthropic]
    for o, a in zip(openai, anthropic):
        fn = o["function"]
        assert o["type"] == "function" and fn["description"] == names[fn["name"]][1] == a["description"]
        assert fn["parameters"] == a["input_schema"]
        schema = fn["parameters"]
        jsonschema.Draft202012Validator.check_schema(schema)
        assert schema["type"] == "object" and "$ref" not in json.dumps(schema)
        assert "user_id" not in set(_keys(schema)) and "user" not in schema["properties"]
        # the same parameters the framework tools validate with
        assert set(schema["properties"]) == set(names[fn["name"]][0].model_fields)
    search = next(t["function"]["parameters"] for t in openai if t["function"]["name"] == "memory_search")
    assert "title" not in search and "title" not in search["properties"]["query"]  # pydantic's titles: noise
    assert search["required"] == ["query"] and search["properties"]["limit"]["maximum"] == 50
    note = next(t["input_schema"] for t in anthropic if t["name"] == "memory_add_note")
    assert "title" in note["properties"]  # a field named title survives the title clean-up


def test_dispatch_round_trips_and_keeps_two_users_apart(store):
    tools = MemoryTools(store)  # unbound: every call names its user
    added = json.loads(tools.dispatch("memory_add_note", '{"content": "Alice drinks oat milk lattes", '
                                                         '"theme": "food"}', user_id="alice"))
    assert added["status"] == "added"
    tools.dispatch("memory_add_note", {"content": "Bob drinks black coffee"}, user_id="bob")
    fact = json.loads(tools.dispatch("memory_save_fact", {"category": "profile", "key": "home_city",
                                                          "value": "Berlin"}, user_id="alice"))
    assert fact["action"] == "added"

    alice = json.loads(tools.dispatch("memory_search", {"query": "oat milk"}, user_id="alice"))["results"]
    bob = json.loads(tools.dispatch("memory_search", {"query": "oat milk"}, user_id="bob"))["results"]
    assert [r["id"] for r in alice][:1] == [added["id"]]
    assert all(r["id"] != added["id"] for r in bob)
    assert json.loads(tools.dispatch("memory_get", {"item_id": added["id"]}, user_id="alice"))["content"] == \
        "Alice drinks oat milk lattes"
    with pytest.raises(NaviMemoryError, match="no item"):  # Bob cannot read Alice's item by id
        tools.dispatch("memory_get", {"item_id": added["id"]}, user_id="bob")
    themes = json.loads(tools.dispatch("memory_list_themes", None, user_id="alice"))["themes"]
    assert {t["theme"] for t in themes} >= {"food"}
    assert json.loads(tools.dispatch("memory_archive", {"item_id": added["id"]}, user_id="alice"))["status"] == \
        "archived"
    assert json.loads(tools.dispatch("memory_forget", '{"key": "home_city"}', user_id="alice"))["deleted"] == 1
    assert store.get_all_facts(user_id="alice") == []


def test_dispatch_returns_the_text_the_framework_tools_return(store):
    tools = MemoryTools(store, "alice")
    store.add(user_id="alice", content="Alice keeps bees")
    args = {"query": "bees", "limit": 3}
    assert tools.dispatch("memory_search", args) == tools.run("memory_search", **args)
    assert tools.dispatch("memory_get", {"item_id": 999}, errors="return") == \
        tools.run("memory_get", item_id=999) == '{"error": "no item 999 for this user"}'
    assert tools.dispatch("memory_search", {}, errors="return") == tools.run("memory_search")


@pytest.mark.parametrize("name, arguments, message", [
    ("memory_nope", {}, r"unknown memory tool 'memory_nope'; the tools are: memory_search, "),
    ("memory_find_person", {"ref": "mom"}, "unknown memory tool"),  # single household: not offered
    ("memory_search", {}, "invalid arguments: query: Field required"),
    ("memory_search", {"query": "x", "limit": 500}, "invalid arguments: limit: .*less than or equal to 50"),
    ("memory_save_fact", {"category": "secrets", "key": "k", "value": "v"}, "invalid arguments: category: "),
    ("memory_save_fact", {"category": "other", "key": "k", "value": "v", "source": "auto_discovery"},
     "invalid arguments: source: "),
    ("memory_save_fact", {"category": "other", "key": "k", "value": "v", "confidence": 101},
     "invalid arguments: confidence: .*less than or equal to 100"),
    ("memory_save_fact", {"category": "other", "key": "k", "value": "v", "expires_days": 0},
     "invalid arguments: expires_days: .*greater than or equal to 1"),
    ("memory_get", '{"item_id": ', r"invalid arguments: not JSON \(JSONDecodeError at position 12\)"),
    ("memory_get", "[1, 2]", "invalid arguments: a JSON object is expected, not list"),
    # a reply nested past the JSON parser's depth raised RecursionError, and a dict with a key that is
    # not a string a TypeError, even with errors="return"
    ("memory_search", '{"query": ' + "[" * 100_000 + "]" * 100_000 + "}", "invalid arguments: JSON nested too deeply"),
    ("memory_search", {"query": "x", 1: "y"}, "invalid arguments: every argument name must be a string"),
])
def test_dispatch_errors_are_validation_errors_naming_the_problem(store, name, arguments, message):
    tools = MemoryTools(store)
    with pytest.raises(ValidationError, match=message):
        tools.dispatch(name, arguments, user_id="alice")
    returned = json.loads(tools.dispatch(name, arguments, user_id="alice", errors="return"))
    assert list(returned) == ["error"]


def test_dispatch_user_rules(store):
    with pytest.raises(ValidationError, match="no user: pass user_id="):
        MemoryTools(store).dispatch("memory_list_themes")
    with pytest.raises(ValidationError, match="differs from the user these tools are bound to"):
        MemoryTools(store, "alice").dispatch("memory_list_themes", user_id="bob")
    assert MemoryTools(store, "alice").dispatch("memory_list_themes", user_id="alice") == '{"themes": []}'
    with pytest.raises(ValidationError, match="user_id"):
        MemoryTools(store).dispatch("memory_list_themes", user_id=" alice")
    with pytest.raises(ValidationError, match="errors must be 'raise' or 'return'"):
        MemoryTools(store, "alice").dispatch("memory_list_themes", errors="ignore")


def test_dispatch_in_a_multi_person_household(store):
    store.add_person("Tom", user_id="u1")
    store.set_household_mode("multi", user_id="u1")
    store.add_person("Sarah", user_id="u1", aliases=["mom"], role="spouse")
    tools = MemoryTools(store, "u1")
    assert "person" in next(t["input_schema"] for t in tools.anthropic_schemas()
                            if t["name"] == "memory_add_note")["properties"]
    found = json.loads(tools.dispatch("memory_find_person", '{"ref": "mom"}'))
    assert found["person"]["display_name"] == "Sarah"


async def test_adispatch_on_an_async_store(db_url, fake_embeddings):
    astore = await AsyncMemoryStore.open(db_url, embeddings=fake_embeddings)
    try:
        tools = MemoryTools(None, async_store=astore)
        added = json.loads(await tools.adispatch("memory_add_note", {"content": "Carol plays cello"},
                                                 user_id="carol"))
        hits = json.loads(await tools.adispatch("memory_search", '{"query": "cello"}', user_id="carol"))
        assert [r["id"] for r in hits["results"]] == [added["id"]]
        assert json.loads(await tools.adispatch("memory_search", {"query": "cello"}, user_id="dave")) == \
            {"results": [], "hidden": 0}
        with pytest.raises(ValidationError, match="unknown memory tool"):
            await tools.adispatch("memory_nope", {}, user_id="carol")
    finally:
        await astore.close()


def test_save_fact_takes_how_the_model_knows_it(store, clock):
    tools = MemoryTools(store, "alice")
    tools.dispatch("memory_save_fact", {"category": "projects", "key": "trip", "value": "Porto in May",
                                        "source": "conversation", "confidence": 60, "expires_days": 30,
                                        "source_context": "mentioned the trip"})
    fact = store.get_fact("trip", user_id="alice")
    assert (fact.source, fact.confidence, fact.source_context) == ("conversation", 60, "mentioned the trip")
    assert (fact.expires_at - clock.now).days == 30
    tools.dispatch("memory_save_fact", {"category": "profile", "key": "name", "value": "Alice"})
    named = store.get_fact("name", user_id="alice")
    assert (named.source, named.confidence, named.expires_at) == ("user_explicit", 90, None)



def test_adapters_call_the_store_through_recorded_calls_only(store):
    from navi_memory.integrations._caller import StoreCaller, store_call

    store.add(user_id="u1", content="green tea in the morning")
    call = store_call.search("green tea", user_id="u1", limit=3)
    assert (call.method, call.args, call.kwargs) == ("search", ("green tea",), {"user_id": "u1", "limit": 3})
    assert "green" not in repr(call)  # a user's text stays out of logs and errors
    assert [r.content for r in StoreCaller(store).call(call)] == ["green tea in the morning"]
    with pytest.raises(TypeError, match="store_call"):
        StoreCaller(store).call(("search", ("green tea",), {"user_id": "u1"}))
