"""navi-memory ingest / extract / stats / facts / sessions: subprocesses against a SQLite file (no LLM),
and in-process runs with a scripted chat model."""

from __future__ import annotations

import json

import pytest

from navi_memory import cli
from navi_memory.pipeline.llm import ChatClient

from .chat_fakes import ScriptedChat
from .test_cli import run

CONVERSATION = [
    {"role": "system", "content": "You are a helpful assistant."},
    {"role": "user", "content": "Hi, my name is Eugene and I live in Berlin.", "created_at": "2024-03-01T10:00:00Z"},
    {"role": "assistant", "content": "Hi Eugene! Let me check your machine.", "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "uname", "arguments": "{\"flags\": \"-a\"}"}}]},
    {"role": "tool", "tool_call_id": "c1", "content": "Linux 6.8.0-arch1 x86_64"},
    {"role": "user", "content": "I prefer short answers."},
    {"role": "assistant", "content": "Noted."},
]


@pytest.fixture
def db(tmp_path):
    return f"sqlite:///{tmp_path / 'cli.db'}"


@pytest.fixture
def transcript_file(tmp_path):
    path = tmp_path / "conversation.json"
    path.write_text(json.dumps(CONVERSATION))
    return str(path)


def test_ingest_extract_facts_stats_summary(db, transcript_file):
    out = run("ingest", "--user", "u1", "--session", "s1", transcript_file, db=db).stdout
    assert "stored 6 messages in session s1 for u1" in out
    sessions = json.loads(run("sessions", "--user", "u1", "--json", db=db).stdout)
    assert [(s["session_id"], s["state"], s["message_count"], s["last_active"]) for s in sessions] == [
        ("s1", "open", 6, "2024-03-01T10:00:00+00:00")]
    [report] = json.loads(run("extract", "--json", db=db).stdout)  # old timestamps: stale already
    assert (report["session_id"], report["state"], report["llm_calls"], report["chunks"]) == ("s1", "extracted", 0, 2)
    facts = json.loads(run("facts", "--user", "u1", "--json", db=db).stdout)
    assert {(f["category"], f["key"], f["value"], f["source"]) for f in facts} == {
        ("profile", "name", "Eugene", "user_explicit"), ("profile", "location", "Berlin", "user_explicit"),
        ("preferences", "short_answers", "short answers", "user_explicit")}
    assert "name: Eugene; location: Berlin" in run("summary", "--user", "u1", db=db).stdout
    stats = json.loads(run("stats", "--json", db=db).stdout)
    assert stats["totals"]["sessions"] == 1 and stats["totals"]["llm_calls"] == 0
    assert stats["states"] == {"extracted": {"sessions": 1, "messages": 6}}
    assert "no sessions to extract" in run("extract", db=db).stdout
    hits = json.loads(run("search", "--user", "u1", "uname linux", "--json", db=db).stdout)
    assert any("[Tool result] uname: Linux 6.8.0-arch1" in h["content"] for h in hits)


def test_files_with_a_byte_order_mark_are_read(db, tmp_path):
    """Windows editors (and PowerShell 5's utf8) start a UTF-8 file with a byte order mark."""
    chat = tmp_path / "bom.json"
    chat.write_bytes(b"\xef\xbb\xbf" + json.dumps(CONVERSATION[1:2]).encode())
    run("ingest", "--user", "u1", "--session", "s1", str(chat), db=db)
    backup = tmp_path / "backup.jsonl"
    run("export", "--user", "u1", "-o", str(backup), db=db)
    backup.write_bytes(b"\xef\xbb\xbf" + backup.read_bytes())
    again = f"sqlite:///{tmp_path / 'again.db'}"
    run("import", str(backup), db=again)
    assert "I live in Berlin" in run("export", "--user", "u1", db=again).stdout


def test_ingest_from_stdin_and_extract_one_session(db, tmp_path):
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-m", "navi_memory.cli", "--db", db, "ingest", "--user", "u2", "-",
                           "--extract", "--json"], input=json.dumps({"session_id": "from-stdin", "messages": [
                               {"role": "user", "content": "Remember that my bike is a green Brompton."}]}),
                          capture_output=True, text=True, timeout=120,
                          env={**__import__("os").environ, "NAVI_MEMORY_EMBEDDINGS": "hashing"})
    assert proc.returncode == 0, proc.stderr
    [report] = json.loads(proc.stdout)
    assert (report["session_id"], report["state"]) == ("from-stdin", "extracted")
    facts = json.loads(run("facts", "--user", "u2", "--json", db=db).stdout)
    assert [(f["key"], f["value"]) for f in facts] == [("bike", "a green Brompton")]


@pytest.mark.parametrize("args, message", [
    (("ingest", "--user", "u1", "/nonexistent.json"), "cannot read"),
    (("extract", "--session", "s1"), "--session needs --user"),
    (("extract", "--user", "u1", "--session", "nope"), "no session 'nope'"),
    (("extract", "--stale-minutes", "-5"), "stale_minutes must be a non-negative number of minutes"),
])
def test_bad_input_exits_2(db, args, message):
    proc = run(*args, db=db, check=False)
    assert proc.returncode == 2 and message in proc.stderr


def test_ingest_rejects_bad_json_and_bad_messages(db, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("[{]")
    assert "not JSON" in run("ingest", "--user", "u1", str(bad), db=db, check=False).stderr
    bad.write_text(json.dumps([{"role": "robot", "content": "beep"}]))
    proc = run("ingest", "--user", "u1", str(bad), db=db, check=False)
    assert proc.returncode == 2 and "message 0: unknown role" in proc.stderr


@pytest.fixture
def scripted(monkeypatch):
    model = ScriptedChat()

    def resolve(choice, settings):
        return None if choice is False else ChatClient.wrap(model)

    monkeypatch.setattr("navi_memory.store.resolve_chat_model", resolve)
    monkeypatch.setenv("NAVI_MEMORY_EMBEDDINGS", "hashing")  # never load a real model in-process
    return model


def test_extract_with_a_chat_model_records_cost(db, transcript_file, scripted, capsys):
    scripted.script = [{"facts": [{"category": "technical", "key": "os", "value": "Arch Linux", "source": "tool_call"}],
                        "notes": []}, "Eugene runs Arch Linux."]
    assert cli.main(["--db", db, "ingest", "--user", "u1", transcript_file]) == 0
    assert cli.main(["--db", db, "extract", "--user", "u1"]) == 0
    line = capsys.readouterr().out.splitlines()[-1]
    assert "extracted by LLM: 3 added" in line and "2 LLM calls (240 in / 60 out tokens); summary updated" in line
    assert cli.main(["--db", db, "stats", "--user", "u1", "--json"]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert {p: s["calls"] for p, s in stats["purposes"].items()} == {"extract": 1, "summary": 1}
    assert stats["totals"]["extraction_calls_per_extracted_session"] == 1.0
    (model, per_model), = stats["models"].items()
    assert (per_model["calls"], per_model["input_tokens"], per_model["output_tokens"]) == (2, 240, 60)
    assert cli.main(["--db", db, "stats"]) == 0
    out = capsys.readouterr().out
    assert "LLM calls 2 (0 failed), tokens 240 in / 60 out" in out and f"  {model}: 2 calls (0 failed), 240 in, 60 out" in out
    assert cli.main(["--db", db, "summary", "--user", "u1"]) == 0
    assert capsys.readouterr().out.strip() == "Eugene runs Arch Linux."


def test_a_failed_extraction_exits_2_and_is_retried(db, transcript_file, scripted, capsys):
    scripted.script = ["not json", "still not json"]
    cli.main(["--db", db, "ingest", "--user", "u1", transcript_file])
    assert cli.main(["--db", db, "extract"]) == 2
    captured = capsys.readouterr()
    assert "u1/s" not in captured.err and "retried on the next run" in captured.err
    assert ": error: " in captured.out
    scripted.script = [{"facts": [], "notes": []}]
    assert cli.main(["--db", db, "extract"]) == 0
    assert "extracted by LLM" in capsys.readouterr().out
