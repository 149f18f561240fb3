"""The navi-memory command, run as a real subprocess against a SQLite file."""

import json
import os
import subprocess
import sys

import pytest


def run(*args, db=None, env=None, check=True):
    cmd = [sys.executable, "-m", "navi_memory.cli"]
    if db:
        cmd += ["--db", db]
    full_env = {**os.environ, "NAVI_MEMORY_EMBEDDINGS": "hashing", **(env or {})}
    proc = subprocess.run([*cmd, *args], capture_output=True, text=True, env=full_env, timeout=120)
    if check and proc.returncode != 0:
        raise AssertionError(f"exit {proc.returncode}: {proc.stderr}")
    return proc


@pytest.fixture
def db(tmp_path):
    return f"sqlite:///{tmp_path / 'cli.db'}"


def test_add_then_search_json_reports_fts_signal(db):
    run("add", "--user", "u1", "I drink oat milk lattes", db=db)
    out = run("search", "--user", "u1", "oat milk", "--json", db=db).stdout
    results = json.loads(out)
    assert isinstance(results, list) and len(results) == 1
    assert results[0]["content"] == "I drink oat milk lattes"
    assert results[0]["signals"]["fts"] is True


def test_global_options_work_after_the_command(db):
    run("add", "--user", "u1", "Tea with lemon", "--db", db, "--embeddings", "none")
    out = run("list", "--user", "u1", "--json", "--db", db).stdout
    assert [i["content"] for i in json.loads(out)] == ["Tea with lemon"]


def test_facts_themes_summary_and_forget(db):
    run("fact", "set", "--user", "u1", "--category", "preferences", "coffee_order", "latte", db=db)
    run("fact", "set", "--user", "u1", "--category", "preferences", "coffee_order", "flat white", db=db)
    fact = json.loads(run("fact", "get", "--user", "u1", "coffee_order", "--json", db=db).stdout)
    assert fact["value"] == "flat white"
    assert [h["value"] for h in fact["history"]] == ["latte"]
    facts = json.loads(run("fact", "list", "--user", "u1", "--json", db=db).stdout)
    assert [f["key"] for f in facts] == ["coffee_order"]
    themes = json.loads(run("themes", "--user", "u1", "--json", db=db).stdout)
    assert {t["slug"]: t["active_count"] for t in themes} == {"preferences": 1}
    run("summary", "--user", "u1", "--set", "Likes coffee.", db=db)
    assert json.loads(run("summary", "--user", "u1", "--json", db=db).stdout)["summary"] == "Likes coffee."
    run("forget", "--user", "u1", "--yes", db=db)
    assert json.loads(run("fact", "list", "--user", "u1", "--json", db=db).stdout) == []


@pytest.mark.parametrize(
    "args, message",
    [
        (("add", "--user", "u1", ""), "content is empty"),
        (("get", "--user", "u1", "999"), "no item 999"),
        (("search", "--user", "u1", "x", "--limit", "0"), "limit must be between 1 and 50"),
        (("search", "--user", "u1", "x", "--limit", "51"), "limit must be between 1 and 50"),
        (("fact", "get", "--user", "u1", "missing"), "no fact"),
        (("forget", "--user", "u1"), "--yes"),
        (("timezone", "--user", "u1", "Mars/Olympus"), "unknown time zone 'Mars/Olympus'"),
        (("timezone", "--user", "u1", "UTC", "--clear"), "not both"),
        (("search", "--user", "u1", "x", "--timezone", "Mars/Olympus"), "unknown time zone"),
    ],
)
def test_bad_input_exits_2_with_one_line(db, args, message):
    run("add", "--user", "u1", "keep me", db=db)
    proc = run(*args, db=db, check=False)
    assert proc.returncode == 2
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and message in lines[0]
    assert json.loads(run("list", "--user", "u1", "--json", db=db).stdout)[0]["content"] == "keep me"


def test_a_users_time_zone_is_shown_set_and_cleared(db):
    run("add", "--user", "u1", "keep me", db=db)
    assert run("timezone", "--user", "u1", db=db).stdout.strip() == "u1: none of its own (the store's UTC)"
    assert run("timezone", "--user", "u1", "Europe/Lisbon", db=db).stdout.strip() == "u1: Europe/Lisbon"
    shown = json.loads(run("timezone", "--user", "u1", "--json", db=db).stdout)
    assert shown == {"user_id": "u1", "timezone": "Europe/Lisbon", "in_effect": "Europe/Lisbon"}
    assert json.loads(run("users", "--json", db=db).stdout)[0]["timezone"] == "Europe/Lisbon"
    assert run("users", db=db).stdout.rstrip().endswith("Europe/Lisbon")
    run("timezone", "--user", "u1", "--clear", db=db)
    shown = json.loads(run("timezone", "--user", "u1", "--json", db=db, env={"NAVI_MEMORY_TIMEZONE": "Asia/Tokyo"}).stdout)
    assert shown == {"user_id": "u1", "timezone": None, "in_effect": "Asia/Tokyo"}


def test_another_users_item_is_not_found(db):
    run("add", "--user", "alice", "alice's secret", db=db)
    item_id = json.loads(run("list", "--user", "alice", "--json", db=db).stdout)[0]["id"]
    for command in ("get", "archive", "delete", "pin"):
        proc = run(command, "--user", "bob", str(item_id), db=db, check=False)
        assert proc.returncode == 2 and "no item" in proc.stderr
    assert json.loads(run("get", "--user", "alice", str(item_id), "--json", db=db).stdout)["status"] == "active"


def test_backfill_and_doctor(db):
    run("add", "--user", "u1", "written while lexical only", "--embeddings", "none", db=db)
    report = json.loads(run("backfill", "--json", db=db).stdout)
    assert report["embedded"] == 1 and report["remaining"] == 0
    doctor = json.loads(run("doctor", "--json", db=db).stdout)
    assert doctor["embedder_reachable"] is True
    assert doctor["embeddings"]["ready"] == 1


def test_demo_runs_and_shows_memory_block(tmp_path):
    proc = run("demo", db=f"sqlite:///{tmp_path / 'demo.db'}")
    assert "## What I remember about the user" in proc.stdout
    assert "## Relevant Memory" in proc.stdout
    assert "oat milk latte" in proc.stdout.lower()


def test_memory_off_and_on_for_a_user(db):
    run("add", "--user", "u1", "I drink oat milk lattes", db=db)
    assert run("memory", "--user", "u1", db=db).stdout.strip() == "u1: memory on"
    assert json.loads(run("memory", "--user", "u1", "off", "--json", db=db).stdout) == {
        "user_id": "u1", "memory_enabled": False}
    refused = run("add", "--user", "u1", "I drink tea", db=db, check=False)
    assert refused.returncode == 2 and "memory is off for this user" in refused.stderr
    assert len(json.loads(run("search", "--user", "u1", "oat milk", "--json", db=db).stdout)) == 1  # still read
    assert run("memory", "--user", "u1", "on", db=db).stdout.strip() == "u1: memory on"
    run("add", "--user", "u1", "I drink tea", db=db)
