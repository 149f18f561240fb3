"""Hostile structures and numbers at every door (issue K item 5): metadata nested 20,000 deep, a chat
model answering with a 5,000-digit number, tool-call arguments 20,000 deep in a LangChain history,
5,000-digit ids on the CLI and in URLs, a non-UTF-8 byte in an ingest file. Each is one clear error
(a ``ValidationError``, one line and exit 2, a 4xx, an unusable reply), never a traceback or a 500,
and nothing is stored."""

from __future__ import annotations

import json

import pytest

from navi_memory import ValidationError
from navi_memory.cli import main

from .bad_input_support import U, seed, unchanged_after

HUGE = "9" * 5000


def nested(levels: int, leaf: object = 1) -> object:
    """``levels`` lists and dicts inside each other (built without recursion)."""
    value = leaf
    for level in range(levels):
        value = [value] if level % 2 else {"k": value}
    return value


def one_line_exit_2(capsys, db_url: str, *argv: str) -> str:
    code = main(["--db", db_url, "--embeddings", "hashing", *argv])
    _, err = capsys.readouterr()
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1 and "Traceback" not in err and len(err) < 300, err
    return lines[0]


# -- 1. metadata and source_ref nested too deeply --------------------------------------------------------

DEEP_FIELDS = [pytest.param(field, levels, id=f"{field}-{levels}")
               for field in ("metadata", "source_ref") for levels in (500, 20_000)]


@pytest.mark.parametrize("field, levels", DEEP_FIELDS)
def test_deeply_nested_metadata_is_refused_on_every_python_write(store, dump, field, levels):
    ids = seed(store)
    value = {"deep": nested(levels)}
    for call in (lambda: store.add(user_id=U, content="deep", **{field: value}),
                 lambda: store.add_many([{"user_id": U, "content": "deep", field: value}]),
                 lambda: store.update(ids["item"], user_id=U, **{field: value})):
        error = unchanged_after(dump, call, ValidationError)
        assert f"{field} is nested more than 32 levels deep" in str(error)


def test_metadata_at_the_nesting_limit_is_stored_and_read_back(store):
    value = nested(31)  # inside {"deep": ...}: 32 levels
    item_id = store.add(user_id=U, content="just deep enough", metadata={"deep": value})
    assert store.get(item_id, user_id=U).metadata == {"deep": value}


@pytest.fixture
def api(store):
    from starlette.testclient import TestClient

    from navi_memory.ui.api import create_api_app

    from .ui_helpers import LOCAL, TOKEN

    return TestClient(create_api_app(store, token=TOKEN), base_url=LOCAL, raise_server_exceptions=False,
                      headers={"Authorization": f"Bearer {TOKEN}"})


@pytest.mark.parametrize("field", ["metadata", "source_ref"])
def test_the_rest_api_answers_422_for_deeply_nested_metadata(store, dump, api, field):
    ids = seed(store)
    before = dump()
    body = json.dumps({"content": "deep", field: nested(500)})  # parses fine: 500 levels is under the parser's limit
    for method, path in (("POST", f"/api/users/{U}/items"), ("PATCH", f"/api/users/{U}/items/{ids['item']}")):
        reply = api.request(method, path, content=body, headers={"Content-Type": "application/json"})
        assert reply.status_code == 422 and "nested more than 32 levels" in reply.json()["error"], reply.text
    assert dump() == before


def test_memory_tools_refuse_deeply_nested_arguments(store, dump):
    from navi_memory.integrations._tools import MemoryTools

    seed(store)
    before = dump()
    tools = MemoryTools(store, U)
    for args in ({"content": nested(20_000)}, {"content": "x", "theme": nested(20_000)}):
        assert "error" in json.loads(tools.run("memory_add_note", **args))
    assert dump() == before


# -- 2. a chat model reply with a 5,000-digit number or 100,000 brackets -----------------------------------

HOSTILE_REPLIES = [
    pytest.param('{"facts": [{"category": "profile", "key": "k", "value": "v", "confidence": %s}]}' % HUGE,
                 "number too long", id="5000-digit-number"),
    pytest.param("[" * 100_000 + "]" * 100_000, "nested too deeply", id="nested-100000"),
    pytest.param('Here: {"facts": ' + "[" * 100_000, "nested too deeply", id="cut-off-nested-100000"),
]


@pytest.mark.parametrize("reply, problem", HOSTILE_REPLIES)
def test_a_hostile_model_reply_is_an_unusable_reply(store, reply, problem):
    from .chat_fakes import ScriptedChat

    chat = ScriptedChat(script=[reply, reply])  # the extraction and its one repair request
    store.set_chat_model(chat)
    store.add_messages("s1", [{"role": "user", "content": "I work on compilers at night."},
                              {"role": "assistant", "content": "Interesting."}], user_id=U, triggers=False)
    report = store.extract_session("s1", user_id=U)
    assert report.state == "error" and problem in report.error and len(chat.calls) == 2
    assert store.get_all_facts(user_id=U) == []
    assert store.get_session("s1", user_id=U, messages=False).state == "error"


# -- 3. LangChain history with tool-call arguments 20,000 deep ---------------------------------------------

def test_langchain_history_refuses_tool_call_arguments_nested_too_deeply(store, dump):
    from langchain_core.messages import AIMessage, HumanMessage

    from navi_memory.integrations.langchain import NaviChatMessageHistory

    seed(store)
    history = NaviChatMessageHistory(store, session_id="s9", user_id=U)
    call = {"name": "lookup", "args": {"q": nested(20_000)}, "id": "c1"}
    error = unchanged_after(dump, lambda: history.add_messages([HumanMessage("hi"), AIMessage("", tool_calls=[call])]),
                            ValidationError)
    assert "tool call arguments is nested more than 32 levels deep" in str(error)


@pytest.mark.parametrize("arguments", ["[" * 20_000 + "]" * 20_000, '{"n": %s}' % HUGE])
def test_stored_hostile_tool_call_text_reads_back_as_text(store, arguments):
    from langchain_core.messages import AIMessage, HumanMessage

    from navi_memory.integrations.langchain import NaviChatMessageHistory
    from navi_memory.pipeline import transcript

    history = NaviChatMessageHistory(store, session_id="s9", user_id=U)
    raw = {"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": arguments}}
    history.add_messages([HumanMessage("hi"), AIMessage("", additional_kwargs={"tool_calls": [raw]})])
    message = history.messages[-1]
    assert message.tool_calls[0]["args"] == {"arguments": arguments}
    rendered = transcript.render(store.get_session("s9", user_id=U).messages)
    line = next(line for line in rendered.splitlines() if line.startswith("[Tool call] lookup("))
    assert len(line) < transcript.MAX_TOOL_ARGS + 40


# -- 4. 5,000-digit ids on the CLI and in URLs --------------------------------------------------------------

@pytest.mark.parametrize("argv", [
    pytest.param(("get", "--user", U, HUGE), id="get"),
    pytest.param(("pin", "--user", U, HUGE), id="pin"),
    pytest.param(("archive", "--user", U, HUGE), id="archive"),
    pytest.param(("delete", "--user", U, HUGE), id="delete"),
    pytest.param(("update", "--user", U, HUGE, "--content", "x"), id="update"),
    pytest.param(("get", "--user", U, str(2**70)), id="get-22-digits"),
    pytest.param(("list", "--user", U, "--limit", HUGE), id="list-limit"),
    pytest.param(("list", "--user", U, "--offset", HUGE), id="list-offset"),
    pytest.param(("fact", "set", "k", "v", "--user", U, "--category", "other", "--confidence", HUGE),
                 id="fact-confidence"),
    pytest.param(("person", "update", HUGE, "--user", U, "--name", "Ann"), id="person-update"),
    pytest.param(("person", "remove", HUGE, "--user", U), id="person-remove"),
])
def test_a_5000_digit_number_on_the_cli_is_one_line_and_exit_2(store, db_url, dump, capsys, argv):
    seed(store)
    before = dump()
    line = one_line_exit_2(capsys, db_url, *argv)
    assert "must be an integer of at most 19 digits" in line
    assert dump() == before


def test_a_cli_integer_in_another_script_is_one_line_and_exit_2(store, db_url, capsys):
    seed(store)
    assert "limit must be an integer" in one_line_exit_2(capsys, db_url, "list", "--user", U, "--limit", "\u0661\u0662")
    assert "person id" not in one_line_exit_2(capsys, db_url, "person", "remove", "\u00b2", "--user", U)


@pytest.mark.parametrize("method", ["GET", "PATCH", "DELETE"])
def test_a_5000_digit_id_in_a_rest_path_is_a_422(store, dump, api, method):
    seed(store)
    before = dump()
    reply = api.request(method, f"/api/users/{U}/items/{HUGE}", json={"content": "x"} if method == "PATCH" else None)
    assert reply.status_code == 422 and "at most 19 digits" in reply.json()["error"], reply.text[:300]
    assert dump() == before


def test_a_5000_digit_id_in_a_browser_ui_path_is_a_400(store):
    from starlette.testclient import TestClient

    from navi_memory.ui.app import create_app

    from .ui_helpers import LOCAL

    seed(store)
    ui = TestClient(create_app(store), base_url=LOCAL, raise_server_exceptions=False)
    assert ui.get(f"/users/{U}/items/{HUGE}").status_code == 400
    reply = ui.get(f"/api/users/{U}/items/{HUGE}")
    assert reply.status_code == 400 and "at most 19 digits" in reply.json()["error"]


# -- 5. a non-UTF-8 byte in an ingest file ------------------------------------------------------------------

def test_a_non_utf8_byte_in_an_ingest_file_names_the_file_and_line(store, db_url, dump, tmp_path, capsys):
    seed(store)
    before = dump()
    path = tmp_path / "chat.json"
    path.write_bytes(b'[\n  {"role": "user", "content": "hi"},\n  {"role": "user", "content": "caf\xe9"}\n]\n')
    line = one_line_exit_2(capsys, db_url, "ingest", "--user", U, "--session", "s9", str(path))
    assert f"{path} line 3 column 35: not UTF-8 text (byte 0xe9)" in line
    assert dump() == before


@pytest.mark.parametrize("field", ["metadata", "source_ref"])
def test_an_import_record_with_deeply_nested_metadata_is_refused(store, dump, field):
    seed(store)
    records: list[dict] = []
    store.export(records.append, user_id=U)
    item = next(r for r in records if r.get("type") == "item")
    records.append({**item, "content": "planted", field: {"deep": nested(500)}})
    error = unchanged_after(dump, lambda: store.import_records(records, user_map={U: "copy"}), ValidationError)
    assert f"{field} is nested more than 32 levels deep" in str(error)


# -- 7. strings in metadata neither database can store alike -----------------------------------------

UNSTORABLE = [pytest.param({"note": "x\x00y"}, "a NUL byte", id="nul-value"),
              pytest.param({"k\x00": 1}, "a NUL byte", id="nul-key"),
              pytest.param({"list": ["ok", {"deep": "\ud800"}]}, "lone surrogate", id="surrogate-value"),
              pytest.param({"\udfff": 1}, "lone surrogate", id="surrogate-key")]


@pytest.mark.parametrize("value, problem", UNSTORABLE)
def test_a_nul_or_lone_surrogate_inside_metadata_is_refused_on_every_backend(store, dump, value, problem):
    """json.dumps escapes both, so SQLite stored them while PostgreSQL's jsonb refused them (a
    StorageError there, a raw UnicodeEncodeError on SQLite for a surrogate): now one clear error."""
    ids = seed(store)
    for call in (lambda: store.add(user_id=U, content="odd", metadata=value),
                 lambda: store.add_many([{"user_id": U, "content": "odd", "source_ref": value}]),
                 lambda: store.update(ids["item"], user_id=U, metadata=value),
                 lambda: store.put_keyed(user_id=U, namespace=("docs",), key="k", content="odd", metadata=value)):
        error = unchanged_after(dump, call, ValidationError)
        assert problem in str(error)
    assert store.get(store.add(user_id=U, content="fine", metadata={"emoji": "🙂", "e": "é"}), user_id=U).metadata == {
        "emoji": "🙂", "e": "é"}  # a valid pair of surrogates is a character, kept
