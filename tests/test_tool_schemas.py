"""The memory tools' schemas as the SDKs want them: OpenAI's strict mode (Chat Completions and the
Responses API), Anthropic's form, the nulls a strict model sends, and each tool's output schema
against what the tool really returns."""

from __future__ import annotations

import json
import sys

import jsonschema
import pytest

from navi_memory import MemoryStore, ValidationError
from navi_memory.integrations._outputs import OUTPUTS
from navi_memory.integrations._tools import MULTI_TOOLS, TOOLS, strict_arguments
from navi_memory.integrations.tools import MemoryTools, output_schema

# the keywords a strict schema here may use (OpenAI's strict mode supports a subset of JSON schema;
# `default`, for one, is refused)
STRICT_KEYWORDS = {"type", "properties", "required", "additionalProperties", "description", "enum", "anyOf",
                   "items", "minimum", "maximum"}


def strict_problems(schema, path="parameters"):
    """Where ``schema`` breaks OpenAI's strict-mode rules, checked at every level."""
    if not isinstance(schema, dict):
        return [f"{path}: not an object"]
    problems = [f"{path}: keyword {k!r}" for k in sorted(set(schema) - STRICT_KEYWORDS)]
    if schema.get("type") == "object":
        if schema.get("additionalProperties") is not False:
            problems.append(f"{path}: additionalProperties is not false")
        if list(schema.get("required", [])) != list(schema.get("properties", {})):
            problems.append(f"{path}: required is not every property")
    for name, sub in schema.get("properties", {}).items():
        problems += strict_problems(sub, f"{path}.{name}")
    for i, sub in enumerate(schema.get("anyOf", [])):
        problems += strict_problems(sub, f"{path}.anyOf[{i}]")
    if "items" in schema:
        problems += strict_problems(schema["items"], f"{path}.items")
    return problems


def nullable(prop):
    return {"type": "null"} in prop.get("anyOf", []) or "null" in (prop.get("type") or [])


@pytest.fixture(scope="module")
def memory():
    with MemoryStore.open("sqlite:///:memory:", embeddings="hashing") as store:
        yield store


@pytest.mark.parametrize("household, specs", [("single", TOOLS), ("multi", MULTI_TOOLS)])
def test_strict_schemas_keep_strict_mode_rules_at_every_level(memory, household, specs):
    tools = MemoryTools(memory, household=household)
    chat = tools.openai_schemas()  # strict is the default
    assert [t["function"]["name"] for t in chat] == list(specs)
    for tool in chat:
        fn = tool["function"]
        args, description = specs[fn["name"]]
        assert tool["type"] == "function" and fn["strict"] is True and fn["description"] == description
        schema = fn["parameters"]
        jsonschema.Draft202012Validator.check_schema(schema)
        assert schema["type"] == "object" and strict_problems(schema) == [], fn["name"]
        assert "user_id" not in json.dumps(schema)
        for name, field in args.model_fields.items():  # an optional field: null stands for its default
            assert nullable(schema["properties"][name]) == (not field.is_required()), (fn["name"], name)
        # a strict model's call: every field, null for those it leaves out
        call = {name: None for name, field in args.model_fields.items() if not field.is_required()}
        required = {name: 1 if name == "item_id" else "x" for name in args.model_fields if name not in call}
        required.update({"category": "other"} if "category" in required else {})
        jsonschema.validate({**required, **call}, schema)
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate({**required, **call, "user_id": "bob"}, schema)


def test_the_responses_api_form_is_flat(memory):
    tools = MemoryTools(memory, household="multi")
    chat, responses = tools.openai_schemas(), tools.openai_schemas(api="responses")
    for c, r in zip(chat, responses):
        assert set(r) == {"type", "name", "description", "parameters", "strict"}
        assert r == {"type": "function", **c["function"]} and r["strict"] is True
    plain = tools.openai_schemas(api="responses", strict=False)  # the Responses API's default is strict: say so
    assert all(t["strict"] is False and "default" in json.dumps(t["parameters"]) for t in plain[:1])
    assert [t["parameters"] for t in plain] == [t["function"]["parameters"] for t in tools.openai_schemas(strict=False)]
    with pytest.raises(ValidationError, match="api must be 'chat' or 'responses'"):
        tools.openai_schemas(api="assistants")  # type: ignore[arg-type]


def test_the_forms_fit_the_sdks_own_types(memory):
    from openai.types.chat import ChatCompletionFunctionToolParam
    from openai.types.responses import FunctionToolParam
    from openai.types.shared_params import FunctionDefinition

    tools = MemoryTools(memory)
    for tool in tools.openai_schemas():
        assert ChatCompletionFunctionToolParam.__required_keys__ <= set(tool)
        assert set(tool["function"]) <= FunctionDefinition.__optional_keys__ | FunctionDefinition.__required_keys__
    for tool in tools.openai_schemas(api="responses"):
        assert FunctionToolParam.__required_keys__ <= set(tool)
        assert set(tool) <= FunctionToolParam.__required_keys__ | FunctionToolParam.__optional_keys__
    anthropic = pytest.importorskip("anthropic")
    keys = anthropic.types.ToolParam.__required_keys__ | anthropic.types.ToolParam.__optional_keys__
    for tool in tools.anthropic_schemas():
        assert anthropic.types.ToolParam.__required_keys__ <= set(tool) <= keys
        assert tool["input_schema"]["type"] == "object"


@pytest.mark.parametrize("blocked", [[], ["openai"], ["openai", "langchain_core.utils.function_calling"]],
                         ids=["openai-sdk", "langchain-core", "pydantic-only"])
def test_every_way_of_making_the_strict_schemas_agrees(memory, monkeypatch, blocked):
    """The OpenAI SDK's pydantic_function_tool, else LangChain's convert_to_openai_tool(strict=True),
    else pydantic's schema of the strict model alone: the same parameters."""
    expected = {name: strict_arguments(args).model_json_schema() for name, (args, _) in MULTI_TOOLS.items()}
    for module in blocked:
        monkeypatch.setitem(sys.modules, module, None)  # its import fails, as when it is not installed
    for tool in MemoryTools(memory, household="multi").openai_schemas():
        fn = tool["function"]
        assert fn["strict"] is True and strict_problems(fn["parameters"]) == []
        assert {k: v for k, v in fn["parameters"].items() if k != "required"} == \
            {k: v for k, v in expected[fn["name"]].items() if k != "required"}
        assert fn["parameters"].get("required", []) == expected[fn["name"]].get("required", [])


def test_a_strict_models_nulls_mean_the_defaults(store, clock):
    tools = MemoryTools(store, "alice")
    added = json.loads(tools.dispatch("memory_add_note", {"content": "Alice keeps bees", "theme": None,
                                                          "title": None, "type": None}))
    item = store.get(added["id"], user_id="alice")
    assert (item.theme, item.type, item.title) == ("general", "note", None)
    nulls = {"limit": None, "theme": None, "types": None, "recency_days": None, "status": None}
    assert tools.dispatch("memory_search", {"query": "bees", **nulls}) == tools.dispatch("memory_search",
                                                                                          {"query": "bees"})
    tools.dispatch("memory_save_fact", json.dumps({"category": "profile", "key": "name", "value": "Alice",
                                                   "source": None, "confidence": None, "expires_days": None,
                                                   "source_context": None, "observed_at": None}))
    fact = store.get_fact("name", user_id="alice")
    assert (fact.source, fact.confidence, fact.expires_at) == ("user_explicit", 90, None)
    assert json.loads(tools.dispatch("memory_forget", {"key": "name", "category": None}))["deleted"] == 1
    with pytest.raises(ValidationError, match="invalid arguments: query: Input should be a valid string"):
        tools.dispatch("memory_search", {"query": None, **nulls})  # a required field has no default


def _validate(name: str, text: str) -> dict:
    value = json.loads(text)
    assert "error" not in value, value
    jsonschema.validate(value, output_schema(name))
    return value


def test_every_tool_returns_what_its_output_schema_says(store):
    assert set(OUTPUTS) == set(MULTI_TOOLS)
    for name in OUTPUTS:
        jsonschema.Draft202012Validator.check_schema(output_schema(name))
        assert output_schema(name)["type"] == "object"
    store.add_person("Tom", user_id="u1")
    store.set_household_mode("multi", user_id="u1")
    store.add_person("Sarah", user_id="u1", aliases=["mom"], role="spouse", pronouns="she/her")
    tools = MemoryTools(store, "u1")
    note = {"content": "Sarah plays the cello on Sundays", "person": "mom"}
    added = _validate("memory_add_note", tools.dispatch("memory_add_note", note))
    assert _validate("memory_add_note", tools.dispatch("memory_add_note", note))["status"] == "existing"
    similar = _validate("memory_add_note", tools.dispatch("memory_add_note", {**note, "content": "Sarah plays the "
                                                                              "cello on Sundayz"}))
    assert similar["similar_ids"] == [added["id"]] and "note" in similar
    saved = [_validate("memory_save_fact", tools.dispatch("memory_save_fact", args)) for args in (
        {"category": "profile", "key": "home_city", "value": "Berlin"},
        {"category": "profile", "key": "home_city", "value": "Porto"},
        {"category": "profile", "key": "city", "value": "Porto"},  # the equivalent key on file: a note says so
        {"category": "profile", "key": "home_city", "value": "Lyon", "observed_at": "2001-01-01"})]
    assert [s["action"] for s in saved] == ["added", "updated", "unchanged", "history"]
    assert ["note" in s for s in saved] == [False, False, True, True]
    hits = _validate("memory_search", tools.dispatch("memory_search", {"query": "cello Porto"}))["results"]
    assert any("person" in h for h in hits) and any("fact" in h for h in hits)
    _validate("memory_get", tools.dispatch("memory_get", {"item_id": added["id"]}))
    _validate("memory_archive", tools.dispatch("memory_archive", {"item_id": added["id"]}))
    _validate("memory_list_themes", tools.dispatch("memory_list_themes"))
    assert _validate("memory_find_person", tools.dispatch("memory_find_person", {"ref": "mom"}))["person"] == \
        {"display_name": "Sarah", "role": "spouse", "aliases": ["mom"], "pronouns": "she/her"}
    assert _validate("memory_find_person", tools.dispatch("memory_find_person", {"ref": "nobody"})) == \
        {"person": None}
    _validate("memory_forget", tools.dispatch("memory_forget", {"key": "home_city"}))


def test_the_framework_tools_take_the_nulls_too(store):
    """A LangChain or LlamaIndex agent on a strict-mode OpenAI model sends the same nulls."""
    from navi_memory.integrations.langchain import NaviMemoryToolkit
    from navi_memory.integrations.llamaindex import NaviMemoryToolSpec

    tools = {t.name: t for t in NaviMemoryToolkit(store=store, user_id="alice").get_tools()}
    added = json.loads(tools["memory_add_note"].invoke({"content": "Alice keeps bees", "theme": None,
                                                        "title": None, "type": None}))
    nulls = {"limit": None, "theme": None, "types": None, "recency_days": None, "status": None}
    hits = json.loads(tools["memory_search"].invoke({"query": "bees", **nulls}))["results"]
    assert [h["id"] for h in hits] == [added["id"]]
    spec = {t.metadata.name: t for t in NaviMemoryToolSpec(store, "alice").to_tool_list()}
    assert json.loads(str(spec["memory_search"](query="bees", **nulls)))["results"] == hits
