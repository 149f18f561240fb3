"""Bad input through the other two doors: the CLI (``navi_memory.cli.main``, in-process) and the
memory tools a model calls. The CLI exits 2 with one line on stderr (argparse's own usage error
for an invalid choice); a tool answers ``{"error": ...}``. Stored data is unchanged either way."""

from __future__ import annotations

import json

import pytest

from navi_memory.cli import main
from navi_memory.integrations._tools import MemoryTools

from .bad_input_support import MAX, U, seed


@pytest.fixture
def cli_db(store, db_url, dump):
    """The seeded test database (either backend) and a CLI runner returning (exit code, stdout, stderr)."""
    ids = seed(store)

    def run(capsys, *argv: str) -> tuple[int, str, str]:
        try:
            code = main([*argv, "--db", db_url, "--embeddings", "hashing"])
        except SystemExit as exc:  # argparse rejects invalid choices itself
            code = exc.code
        out, err = capsys.readouterr()
        return code, out, err

    return run, ids


SURROGATE = b"caf\xe9 bytes".decode("utf-8", "surrogateescape")  # how Python hands over a non-UTF-8 argv

CLI_BAD = [
    pytest.param(("add", "--user", U, ""), "content is empty", id="empty-content"),
    pytest.param(("add", "--user", U, "x" * (MAX + 1)), "more than the maximum", id="huge-content"),
    pytest.param(("add", "--user", U, "a\x00b"), "NUL", id="NUL-content"),
    pytest.param(("add", "--user", U, SURROGATE), "UTF-8", id="invalid-utf8-argv"),
    pytest.param(("add", "--user", "", "x"), "user_id is empty", id="empty-user"),
    pytest.param(("add", "--user", U, "x", "--type", "diary"), "invalid choice", id="invalid-enum-type"),
    pytest.param(("add", "--user", U, "x", "--theme", "!!!"), "theme", id="theme-without-letters"),
    pytest.param(("add", "--user", U, "x", "--expires-days", "nan"), "expires_days", id="nan-expiry"),
    pytest.param(("search", "--user", U, "x", "--limit", "0"), "limit must be between", id="limit-0"),
    pytest.param(("search", "--user", U, "x", "--limit", "-1"), "limit must be between", id="limit-minus-1"),
    pytest.param(("search", "--user", U, "x", "--limit", str(10**9)), "limit must be between", id="limit-1e9"),
    pytest.param(("search", "--user", U, "x", "--recency-days", "inf"), "recency_days", id="inf-recency"),
    pytest.param(("search", "--user", U, "a\x00b"), "NUL", id="NUL-query"),
    pytest.param(("list", "--user", U, "--limit", str(10**9)), "limit must be between", id="list-limit-1e9"),
    pytest.param(("list", "--user", U, "--offset", "-1"), "offset", id="negative-offset"),
    pytest.param(("get", "--user", U, "999999"), "no item 999999", id="unknown-id"),
    pytest.param(("get", "--user", U, "0"), "invalid id 0", id="id-zero"),
    pytest.param(("fact", "set", "k", "v", "--user", U, "--category", "hobbies"), "invalid choice", id="bad-category"),
    pytest.param(("fact", "set", "k", "v", "--user", U, "--category", "other", "--confidence", "101"), "confidence",
                 id="confidence-101"),
    pytest.param(("fact", "delete", "nope", "--user", U), "no fact", id="unknown-fact"),
    pytest.param(("summary", "--user", U, "--set", " "), "empty", id="empty-summary"),
]


@pytest.mark.parametrize("argv, message", CLI_BAD)
def test_cli_bad_input_exits_2_and_changes_nothing(cli_db, dump, capsys, argv, message):
    run, _ = cli_db
    before = dump()
    code, _, err = run(capsys, *argv)
    assert code == 2
    assert message in err
    if "invalid choice" not in message:
        assert len([line for line in err.splitlines() if line.strip()]) == 1
    assert dump() == before


@pytest.mark.parametrize("command", ["get", "pin", "archive", "delete", "update"])
def test_cli_another_users_id_is_not_found(cli_db, dump, capsys, command):
    run, ids = cli_db
    before = dump()
    extra = ("--content", "taken over") if command == "update" else ()
    code, _, err = run(capsys, command, "--user", U, str(ids["bob_item"]), *extra)
    assert code == 2 and f"no item {ids['bob_item']}" in err and "bob" not in err
    assert dump() == before


@pytest.mark.parametrize("query", ['NOT', '"', '* -', 'NEAR(a b)', 'col:on', "' OR '1'='1", "'; DROP TABLE items;--"])
def test_cli_search_with_query_syntax_is_safe(cli_db, dump, capsys, query):
    run, _ = cli_db
    before = dump()
    code, out, _ = run(capsys, "search", "--user", U, query, "--json")
    assert code == 0 and isinstance(json.loads(out), list)
    assert dump() == before


@pytest.mark.parametrize("payload, message", [
    ('{"messages": [', "not JSON"),
    ('"just a string"', "list of messages"),
    ('[{"role": "robot", "content": "beep"}]', "unknown role"),
    ('[{"role": "user", "content": {"a": 1}}]', "message 0"),
    ('[{"role": "user", "content": "a\\u0000b"}]', "NUL"),
])
def test_cli_ingest_of_a_malformed_transcript(cli_db, dump, capsys, tmp_path, payload, message):
    run, _ = cli_db
    path = tmp_path / "transcript.json"
    path.write_text(payload, encoding="utf-8")
    before = dump()
    code, _, err = run(capsys, "ingest", "--user", U, str(path))
    assert code == 2 and message in err
    assert dump() == before


def test_cli_bad_database_urls_exit_2_without_a_traceback(capsys):
    for url in ("mysql://u:pw@h/db", "not a url", "sqlite://relative"):
        assert main(["list", "--user", U, "--db", url, "--embeddings", "none"]) == 2
        err = capsys.readouterr().err
        assert "Traceback" not in err and "pw" not in err


# -- tools --------------------------------------------------------------------------------------------

TOOL_BAD = [
    pytest.param("memory_add_note", {"content": ""}, id="add-empty"),
    pytest.param("memory_add_note", {"content": "a\x00b"}, id="add-NUL"),
    pytest.param("memory_add_note", {"content": "x" * (MAX + 1)}, id="add-huge"),
    pytest.param("memory_add_note", {"content": "lone \ud800"}, id="add-surrogate"),
    pytest.param("memory_add_note", {"content": "ok", "type": "diary"}, id="add-invalid-type"),
    pytest.param("memory_add_note", {"content": "ok", "theme": "!!!"}, id="add-theme-without-letters"),
    pytest.param("memory_add_note", {}, id="add-missing-content"),
    pytest.param("memory_save_fact", {"category": "hobbies", "key": "k", "value": "v"}, id="fact-invalid-category"),
    pytest.param("memory_save_fact", {"category": "other", "key": "", "value": "v"}, id="fact-empty-key"),
    pytest.param("memory_save_fact", {"category": "other", "key": "k", "value": None}, id="fact-null-value"),
    pytest.param("memory_search", {"query": "x", "limit": 0}, id="search-limit-0"),
    pytest.param("memory_search", {"query": "x", "limit": -1}, id="search-limit-minus-1"),
    pytest.param("memory_search", {"query": "x", "limit": 10**9}, id="search-limit-1e9"),
    pytest.param("memory_search", {"query": "x", "status": "deleted"}, id="search-invalid-status"),
    pytest.param("memory_search", {"query": "x", "types": ["diary"]}, id="search-invalid-type"),
    pytest.param("memory_search", {"query": "a\x00b"}, id="search-NUL"),
    pytest.param("memory_search", {"query": "x", "recency_days": 0}, id="search-recency-0"),
    pytest.param("memory_get", {"item_id": 999_999}, id="get-unknown-id"),
    pytest.param("memory_get", {"item_id": "abc"}, id="get-non-integer-id"),
    pytest.param("memory_get", {"item_id": -1}, id="get-negative-id"),
    pytest.param("memory_get", {"item_id": 2**63}, id="get-id-over-64-bits"),
    pytest.param("memory_archive", {"item_id": 999_999}, id="archive-unknown-id"),
    pytest.param("memory_forget", {"key": "never-stored"}, id="forget-unknown-key"),
    pytest.param("memory_forget", {"key": "drink", "category": "bogus"}, id="forget-invalid-category"),
]


@pytest.mark.parametrize("name, args", TOOL_BAD)
@pytest.mark.parametrize("flavour", ["sync", "async"])
async def test_tools_answer_bad_arguments_with_an_error_and_change_nothing(store, dump, name, args, flavour):
    seed(store)
    tools = MemoryTools(store, U)
    before = dump()
    out = tools.run(name, **args) if flavour == "sync" else await tools.arun(name, **args)
    reply = json.loads(out)
    assert set(reply) == {"error"} and reply["error"] and len(reply["error"]) < 400
    assert dump() == before


def test_tools_reach_another_users_ids_only_as_not_found(store, dump):
    ids = seed(store)
    tools = MemoryTools(store, U)
    before = dump()
    for name in ("memory_get", "memory_archive"):
        reply = json.loads(tools.run(name, item_id=ids["bob_item"]))
        assert reply == {"error": f"no item {ids['bob_item']} for this user"}
    assert dump() == before


@pytest.mark.parametrize("query", ['NOT', '"', '*', '-x', 'NEAR(a b)', 'a:b', "' OR '1'='1"])
def test_tool_search_with_query_syntax_is_safe(store, dump, query):
    seed(store)
    before = dump()
    reply = json.loads(MemoryTools(store, U).run("memory_search", query=query))
    assert isinstance(reply["results"], list)
    assert all("bob" not in r["content_snippet"] for r in reply["results"])
    assert dump() == before


def test_framework_tools_return_schema_errors_to_the_model(store):
    from navi_memory.integrations.langchain import NaviMemoryToolkit
    from navi_memory.integrations.llamaindex import NaviMemoryToolSpec

    lc = {t.name: t for t in NaviMemoryToolkit(store=store, user_id=U).get_tools()}
    li = {t.metadata.name: t for t in NaviMemoryToolSpec(store, user_id=U).to_tool_list()}
    assert "limit" in json.loads(lc["memory_search"].invoke({"query": "x", "limit": 0}))["error"]
    assert "item_id" in json.loads(lc["memory_get"].invoke({"item_id": "abc"}))["error"]
    assert "limit" in json.loads(str(li["memory_search"].call(query="x", limit=0)))["error"]
