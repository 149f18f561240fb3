"""What the CLI prints for a person: help on every option, --version, one facts command with its
history, a readable doctor, scores without -0.000, the no-embedder warning once per process."""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import re

import pytest

import navi_memory
from navi_memory import embeddings
from navi_memory.cli import build_parser
from navi_memory.cli.common import score
from navi_memory.config import Settings
from tests.test_cli import run

from .local_models import cross_encoder_folder


def _undocumented(parser: argparse.ArgumentParser, path: str) -> list[str]:
    missing = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help for a in action._choices_actions}
            for name, sub in action.choices.items():
                if not helps.get(name):
                    missing.append(f"{path} {name} (the command itself)")
                missing += _undocumented(sub, f"{path} {name}")
        elif not action.help:
            missing.append(f"{path} {'/'.join(action.option_strings) or action.dest}")
    return missing


def test_every_option_of_every_command_has_help():
    assert _undocumented(build_parser(), "navi-memory") == []


def test_version():
    assert run("--version").stdout.strip() == f"navi-memory {navi_memory.__version__}"


@pytest.fixture
def db(tmp_path):
    url = f"sqlite:///{tmp_path / 'out.db'}"
    run("fact", "set", "--user", "u1", "--category", "preferences", "coffee_order", "latte", db=url)
    run("fact", "set", "--user", "u1", "--category", "preferences", "coffee_order", "flat white", db=url)
    run("fact", "set", "--user", "u1", "--category", "profile", "home_city", "Lisbon", db=url)
    return url


def test_facts_is_fact_list_and_history_shows_in_text(db):
    plain = run("fact", "list", "--user", "u1", db=db).stdout
    assert run("facts", "--user", "u1", db=db).stdout == plain
    assert "latte" not in plain and re.search(r"coffee_order +flat white", plain)
    history = run("facts", "--user", "u1", "--history", "--sort-by", "key", "--order", "asc", db=db).stdout
    assert run("fact", "list", "--user", "u1", "--history", "--sort-by", "key", "--order", "asc", db=db).stdout \
        == history
    lines = history.splitlines()
    assert re.match(r"preferences +coffee_order +flat white +\(user_explicit, confidence \d+\)$", lines[0])
    assert re.match(r" +was 'latte' from \d{4}-\d\d-\d\d to \d{4}-\d\d-\d\d$", lines[1])
    assert lines[2].startswith("profile") and len(lines) == 3
    assert run("facts", "--user", "nobody", db=db).stdout == "no facts stored for nobody\n"


def test_facts_json_always_carries_the_history(db):
    for command in (["facts"], ["fact", "list"]):
        facts = {f["key"]: f for f in json.loads(run(*command, "--user", "u1", "--json", db=db).stdout)}
        assert [h["value"] for h in facts["coffee_order"]["history"]] == ["latte"]
        assert facts["home_city"]["history"] == []


def test_doctor_prints_a_readable_report(db):
    out = run("doctor", db=db).stdout
    assert "{" not in out and "'" not in out  # no dict dump
    rows = dict(re.match(r"(\S[\w -]*?)\s{2,}(.*)", line).groups() for line in out.splitlines())
    assert rows["navi-memory"] == navi_memory.__version__
    assert rows["schema version"].isdigit()
    assert rows["embeddings"] == "hashing-256 (setting: hashing)"
    assert rows["vectors"] == "2 items: 2 ready, 0 pending, 0 failed, 0 of another model, 0 missing"
    assert rows["embedder"] == "reachable"
    assert rows["long texts"] == "embedded whole (the model reads what fits its window)"  # hashed words
    assert "local installed" in rows["extras"] and "rerank installed" in rows["extras"]
    assert rows["reranker"] == "off"
    assert json.loads(run("doctor", "--json", db=db).stdout)["embeddings"]["ready"] == 2


def test_doctor_shows_the_reranker_of_the_environment(db):
    folder = cross_encoder_folder()
    out = run("doctor", db=db, env={"NAVI_MEMORY_RERANKER": f"onnx:{folder}"}).stdout
    assert f"onnx:{folder} (reads the best 8, the rest of 20 when none scores 2; weight 0.5)" in out
    wide = run("doctor", db=db, env={"NAVI_MEMORY_EMBEDDINGS": "local", "NAVI_MEMORY_EMBEDDING_PASSAGE_CHARS": "500",
                                     "HF_HUB_OFFLINE": "1"}).stdout
    assert re.search(r"\nlong texts +over 500 characters: the mean of their passages\n", wide)
    bad = run("doctor", db=db, env={"NAVI_MEMORY_RERANKER": "onnx:/nowhere"}, check=False)
    assert bad.returncode != 0 and "has no model.onnx or tokenizer.json" in bad.stderr


def test_scores_have_three_decimals_and_no_negative_zero():
    assert score(-0.0004) == " 0.000" and score(0.12345) == " 0.123" and score(-0.5) == "-0.500"
    assert score(1) == " 1.000"


def test_search_prints_scores_with_three_decimals(db):
    run("add", "--user", "u1", "I drink oat milk lattes", db=db)
    line = run("search", "--user", "u1", "oat milk", db=db).stdout.splitlines()[0]
    assert re.match(r" +\d+ +\d\.\d{3}  ", line)


def test_the_no_embedder_warning_is_logged_once_per_process(monkeypatch, caplog):
    monkeypatch.setattr(embeddings, "_NO_PROVIDER_WARNED", False)
    monkeypatch.setattr(embeddings.importlib.util, "find_spec", lambda name: None)
    settings = dataclasses.replace(Settings.from_env(), ollama_host=None)
    with caplog.at_level(logging.DEBUG, logger="navi_memory.embeddings"):
        for _ in range(3):
            assert embeddings.resolve_embedder("auto", settings) is None
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "lexical-only" in warnings[0].getMessage()


def test_read_only_commands_do_not_resolve_an_embedder(db):
    # a provider name that cannot resolve: a command that resolved one would fail (and "auto" warn)
    env = {"NAVI_MEMORY_EMBEDDINGS": "no-such-provider"}
    assert "unknown embeddings provider" in run("search", "--user", "u1", "x", db=db, env=env, check=False).stderr
    for args in (["facts", "--user", "u1"], ["stats"], ["sessions"], ["list", "--user", "u1"]):
        assert run(*args, db=db, env=env).stderr == ""


def test_doctor_shows_the_chat_model_and_provider_urls_without_secrets(db):
    out = run("doctor", db=db, env={"NAVI_MEMORY_CHAT_MODEL": "openai:gpt-4o-mini",
                                    "NAVI_MEMORY_CHAT_URL": "http://user:s3cret-pw@127.0.0.1:9/v1",
                                    "NAVI_MEMORY_CHAT_API_KEY": "sk-secret-key-0123456789"}).stdout
    rows = dict(re.match(r"(\S[\w -]*?)\s{2,}(.*)", line).groups() for line in out.splitlines())
    assert rows["chat model"] == "openai:gpt-4o-mini" and rows["chat url"].startswith("http://user:")
    assert "s3cret-pw" not in out and "sk-secret-key" not in out
    assert "chat url" not in run("doctor", db=db).stdout
