"""Hostile files and pipes through the CLI and the REST API: one line and exit 2 (or a 4xx),
never a traceback; a closed pipe ends the command quietly."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from navi_memory.cli import main

from .bad_input_support import U, seed

HUGE_INT = "9" * 5000
HOSTILE_FILES = [
    pytest.param(f'[{{"role": "user", "content": "hi", "seq": {HUGE_INT}}}]'.encode(), "number too long", id="5000-digit-int"),
    pytest.param(b"[" * 100_000 + b"]" * 100_000, "nested too deeply", id="nested-100000"),
    pytest.param('[{"role": "user", "content": "café"}]'.encode("latin-1"), "not UTF-8", id="latin-1-bytes"),
    pytest.param(b'[{"role": "user", "content": "hi"}', "is not JSON", id="truncated"),
    pytest.param(b'[{"role": "user", "content": "hi", "content": "bye"}]', "the key 'content' appears twice",
                 id="repeated-key"),
]


def run(capsys, db_url, *argv):
    code = main(["--db", db_url, "--embeddings", "hashing", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def one_line_error(code: int, err: str, expected: str) -> None:
    assert code == 2 and "Traceback" not in err, err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and expected in lines[0], err


@pytest.mark.parametrize("content, expected", HOSTILE_FILES)
def test_a_hostile_ingest_file_is_one_line_and_exit_2(store, db_url, dump, tmp_path, capsys, content, expected):
    seed(store)
    before = dump()
    path = tmp_path / "chat.json"
    path.write_bytes(content)
    code, _, err = run(capsys, db_url, "ingest", "--user", U, "--session", "s9", str(path))
    one_line_error(code, err, expected)
    assert dump() == before


@pytest.mark.parametrize("line, expected", [
    pytest.param(f'{{"type": "item", "user_id": "{U}", "id": {HUGE_INT}}}', "number too long", id="5000-digit-int"),
    pytest.param("[" * 100_000 + "]" * 100_000, "nested too deeply", id="nested-100000"),
    pytest.param(f'{{"type": "item", "user_id": "{U}", "user_id": "someone-else", "content": "x"}}',
                 "the key 'user_id' appears twice", id="repeated-key"),
])
def test_a_hostile_import_line_is_one_line_and_exit_2(store, db_url, dump, tmp_path, capsys, line, expected):
    seed(store)
    exported: list[dict] = []
    store.export(exported.append, user_id=U)
    before = dump()
    path = tmp_path / "import.jsonl"
    path.write_text(json.dumps(exported[0]) + "\n" + line + "\n")
    code, _, err = run(capsys, db_url, "import", str(path))
    one_line_error(code, err, expected)
    assert dump() == before


def test_the_rest_api_answers_400_for_a_5000_digit_number(store, dump):
    from starlette.testclient import TestClient

    from navi_memory.ui.api import create_api_app

    from .ui_helpers import LOCAL, TOKEN

    seed(store)
    before = dump()
    client = TestClient(create_api_app(store, token=TOKEN), base_url=LOCAL, headers={"Authorization": f"Bearer {TOKEN}"})
    reply = client.post(f"/api/users/{U}/items", content=f'{{"content": "x", "confidence": {HUGE_INT}}}',
                        headers={"Content-Type": "application/json"})
    assert reply.status_code == 400 and "number too long" in reply.json()["error"]
    assert dump() == before


def test_a_closed_pipe_ends_the_command_quietly(store, db_url):
    store.add_many([{"user_id": U, "content": f"note {n} " + "x" * 200} for n in range(2000)])
    command = [sys.executable, "-m", "navi_memory.cli", "--db", db_url, "--embeddings", "none",
               "export", "--user", U]
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE) as proc:
        first = proc.stdout.readline()  # like `| head -1`: read one line, then go away
        proc.stdout.close()
        err = proc.stderr.read().decode()
        code = proc.wait(120)
    assert b'"format"' in first
    assert code == 141 and "Traceback" not in err and "BrokenPipe" not in err, err


def test_ingest_takes_json_lines_and_the_messages_of_an_export(store, db_url, tmp_path, capsys):
    lines = tmp_path / "chat.jsonl"
    lines.write_text('{"role": "user", "content": "I live in Lyon"}\n\n{"role": "assistant", "content": "noted"}\n')
    code, out, _ = run(capsys, db_url, "ingest", "--user", U, "--session", "s1", str(lines))
    assert code == 0 and "stored 2 messages in session s1" in out
    assert [m.content for m in store.get_session("s1", user_id=U).messages] == ["I live in Lyon", "noted"]
    exported: list[dict] = []
    store.export(exported.append, user_id=U)
    dump = tmp_path / "export.jsonl"
    dump.write_text("".join(json.dumps(record) + "\n" for record in exported))
    code, out, _ = run(capsys, db_url, "ingest", "--user", "u2", str(dump))  # its sessions, under their ids
    assert code == 0 and "stored 2 messages in session s1 for u2" in out
    assert [m.role for m in store.get_session("s1", user_id="u2").messages] == ["user", "assistant"]
    plain = tmp_path / "number.json"
    plain.write_text("42")
    code, _, err = run(capsys, db_url, "ingest", "--user", U, str(plain))
    one_line_error(code, err, "JSON Lines of messages")


def test_fact_get_and_delete_take_the_category_before_the_key(store, db_url, capsys):
    store.upsert_fact(user_id=U, category="profile", key="city", value="Lyon")
    code, out, _ = run(capsys, db_url, "fact", "get", "--user", U, "profile", "city")
    assert code == 0 and "Lyon" in out
    code, _, err = run(capsys, db_url, "fact", "get", "--user", U, "--category", "technical", "profile", "city")
    one_line_error(code, err, "two categories")
    code, _, err = run(capsys, db_url, "fact", "get", "--user", U, "places", "city")
    one_line_error(code, err, "unknown fact category 'places'")
    code, out, _ = run(capsys, db_url, "fact", "delete", "--user", U, "profile", "city")
    assert code == 0 and "deleted 1 fact(s)" in out


def test_list_keeps_one_line_per_item(store, db_url, capsys):
    store.add(user_id=U, content="first line\nsecond line\n\nthird " + "x" * 200)
    code, out, _ = run(capsys, db_url, "list", "--user", U)
    rows = out.splitlines()
    assert code == 0 and len(rows) == 1 and "first line second line third" in rows[0] and rows[0].endswith("…")


def test_doctor_on_a_fresh_machine_says_nothing_is_stored_yet(tmp_path, capsys):
    fresh = f"sqlite:///{tmp_path / 'never-written.db'}"
    code, out, err = run(capsys, fresh, "doctor")
    assert code == 0 and not err and "none yet: nothing is stored" in out
    assert not (tmp_path / "never-written.db").exists()


def test_the_id_map_is_written_only_after_an_import_and_never_over_its_input(store, db_url, dump, tmp_path, capsys):
    """The id map was opened for writing before anything was checked: ``--id-map`` naming the export
    itself emptied the backup, and any failed import emptied an existing map."""
    seed(store)
    exported: list[dict] = []
    store.export(exported.append, user_id=U)
    source = tmp_path / "backup.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in exported))
    backup = source.read_bytes()
    before = dump()
    code, _, err = run(capsys, db_url, "import", str(source), "--id-map", str(source), "--user-map", f"{U}=copy")
    one_line_error(code, err, "is the file being imported")
    assert source.read_bytes() == backup and dump() == before
    earlier = tmp_path / "ids.jsonl"
    earlier.write_text('{"kept": true}\n')
    broken = tmp_path / "broken.jsonl"
    broken.write_text(json.dumps(exported[0]) + "\n{not json\n")
    code, _, err = run(capsys, db_url, "import", str(broken), "--id-map", str(earlier))
    one_line_error(code, err, "is not JSON")
    assert earlier.read_text() == '{"kept": true}\n' and dump() == before
    for where, expected in ((tmp_path, "it is a folder"), (tmp_path / "no" / "ids.jsonl", "does not exist")):
        code, _, err = run(capsys, db_url, "import", str(source), "--id-map", str(where), "--user-map", f"{U}=copy")
        one_line_error(code, err, expected)
    assert dump() == before
    code, _, err = run(capsys, db_url, "import", str(source), "--id-map", str(earlier), "--user-map", f"{U}=copy")
    assert code == 0, err
    rows = [json.loads(line) for line in earlier.read_text().splitlines()]
    assert rows and all(r["user_id"] == "copy" for r in rows)


def test_non_utf8_standard_input_to_import_is_one_line_and_exit_2(db_url, tmp_path):
    done = subprocess.run([sys.executable, "-m", "navi_memory.cli", "--db", db_url, "--embeddings", "hashing",
                           "import", "-"], input=b"\xff\xfe\x00bad\n", capture_output=True, timeout=120)
    assert done.returncode == 2 and b"Traceback" not in done.stderr and b"not UTF-8" in done.stderr, done.stderr


def test_an_ingest_file_with_one_bad_session_stores_none_of_them(store, db_url, dump, tmp_path, capsys):
    """Sessions were stored one by one: a bad second session left the first stored, and running the
    mended file again stored its messages twice."""
    seed(store)
    before = dump()
    path = tmp_path / "export.jsonl"
    lines = [{"format": "navi-memory-export", "version": 1},
             {"type": "message", "session_id": "s1", "role": "user", "content": "hello"},
             {"type": "message", "session_id": "s2", "role": "alien", "content": "bad"}]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    code, _, err = run(capsys, db_url, "ingest", "--user", U, str(path))
    one_line_error(code, err, "session s2: message 0: unknown role 'alien'")
    assert "nothing was stored" in err and dump() == before
