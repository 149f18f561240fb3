"""navi-memory person / promote / memory-md, in-process against a SQLite file (and once as a subprocess)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from navi_memory import cli

from .test_cli import run


@pytest.fixture
def db(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'cli.db'}"


def nm(db: str, *args: str) -> int:
    return cli.main(["--db", db, "--embeddings", "hashing", *args])


def out_json(capsys: pytest.CaptureFixture[str], db: str, *args: str) -> object:
    capsys.readouterr()
    assert nm(db, *args) == 0
    return json.loads(capsys.readouterr().out)


def test_person_add_list_resolve(db: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert nm(db, "person", "add", "--user", "u1", "Tom") == 0
    assert nm(db, "person", "add", "--user", "u1", "Sarah Miller", "--alias", "mom", "--alias", "wife",
              "--role", "spouse") == 2
    assert "single mode" in capsys.readouterr().err
    assert nm(db, "person", "add", "--user", "u1", "Sarah Miller", "--alias", "mom", "--alias", "wife",
              "--role", "spouse", "--multi", "--birth-date", "1985-04-02") == 0
    people = out_json(capsys, db, "person", "list", "--user", "u1", "--json")
    assert [(p["display_name"], p["role"], p["aliases"]) for p in people] == [
        ("Tom", "primary", []), ("Sarah Miller", "spouse", ["mom", "wife"])]
    found = out_json(capsys, db, "person", "resolve", "--user", "u1", "MOM", "--json")
    assert found["display_name"] == "Sarah Miller" and found["birth_date"] == "1985-04-02"
    assert out_json(capsys, db, "person", "resolve", "--user", "u1", "grandpa", "--json") is None
    assert nm(db, "person", "resolve", "--user", "u1", "grandpa") == 2
    capsys.readouterr()
    assert nm(db, "person", "list", "--user", "u1") == 0
    assert "Sarah Miller  (role spouse; aliases mom, wife; born 1985-04-02)" in capsys.readouterr().out


def test_person_mode_update_remove_speaker(db: str, capsys: pytest.CaptureFixture[str]) -> None:
    nm(db, "person", "add", "--user", "u1", "Tom")
    nm(db, "person", "add", "--user", "u1", "Leo", "--role", "child", "--multi")
    assert out_json(capsys, db, "person", "mode", "--user", "u1", "--json") == {"mode": "multi"}
    assert nm(db, "person", "mode", "--user", "u1", "single") == 2
    speaker = out_json(capsys, db, "person", "speaker", "--user", "u1", "my son wants pizza", "--json")
    assert speaker["speaker"]["display_name"] == "Tom" and speaker["hints"] == ["Tom", "Leo"]
    updated = out_json(capsys, db, "person", "update", "--user", "u1", "child", "--name", "Leonard", "--json")
    assert updated["display_name"] == "Leonard"
    assert nm(db, "person", "remove", "--user", "u1", "Leonard") == 0
    assert out_json(capsys, db, "person", "mode", "--user", "u1", "single", "--json") == {"mode": "single"}
    speaker = out_json(capsys, db, "person", "speaker", "--user", "u1", "hello", "--json")
    assert speaker["reason"] == "single household"


def test_promote_and_memory_md(db: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for _ in range(3):  # the same words give the same hashing vector: one cluster
        nm(db, "add", "--user", "u1", "Prefers oat milk in coffee", "--theme", "preferences", "--allow-duplicate")
    nm(db, "add", "--user", "u1", "Owns a red bicycle")
    report = out_json(capsys, db, "promote", "--json")
    assert (report["users"], report["clusters"], report["facts_added"], report["items_promoted"]) == (1, 1, 1, 3)
    assert out_json(capsys, db, "promote", "--user", "u1", "--json")["items_promoted"] == 0
    target = tmp_path / "MEMORY.md"
    assert nm(db, "memory-md", "--user", "u1", "--output", str(target)) == 0
    assert "- **prefers oat milk coffee**: Prefers oat milk in coffee" in target.read_text()
    capsys.readouterr()
    assert nm(db, "export", "--format", "markdown", "--user", "u1") == 0
    assert capsys.readouterr().out == target.read_text()
    assert nm(db, "export", "--format", "markdown", "--all-users") == 2
    capsys.readouterr()
    assert nm(db, "promote") == 0
    assert "1 user(s), 4 items read: 0 clusters" in capsys.readouterr().out


def test_subprocess_and_global_options_after_the_action(db: str) -> None:
    run("person", "add", "--user", "u1", "Tom", "--alias", "dad", "--db", db)
    out = run("person", "resolve", "--user", "u1", "dad", "--json", "--db", db).stdout
    assert json.loads(out)["display_name"] == "Tom"


def test_person_devices(db: str, capsys: pytest.CaptureFixture[str]) -> None:
    nm(db, "person", "add", "--user", "u1", "Tom", "--device", "tom-phone")
    nm(db, "person", "add", "--user", "u1", "Sarah", "--multi", "--device", "kitchen-speaker")
    speaker = out_json(capsys, db, "person", "speaker", "--user", "u1", "what's for dinner?", "--device",
                       "kitchen-speaker", "--json")
    assert speaker["speaker"]["display_name"] == "Sarah" and speaker["confidence"] == "high"
    assert nm(db, "person", "update", "--user", "u1", "Tom", "--device", "kitchen-speaker") == 2
    assert "device 'kitchen-speaker' is Sarah's" in capsys.readouterr().err
    assert nm(db, "person", "list", "--user", "u1") == 0
    people = out_json(capsys, db, "person", "list", "--user", "u1", "--json")
    assert [p["devices"] for p in people] == [["tom-phone"], ["kitchen-speaker"]]
