"""The token file: expiry, and a loaded map following the file (no restart to add or revoke)."""

from __future__ import annotations

import json
import logging
from datetime import datetime, timedelta, timezone

import pytest

from navi_memory import tokens as token_module
from navi_memory.errors import ConfigurationError, ValidationError
from navi_memory.tokens import TokenMap, issue_token, revoke_tokens

ALICE = "alice-token-0123456789"
BOB = "bob-token-0123456789ab"


def _at(days: float) -> str:
    return (datetime.now(timezone.utc) + timedelta(days=days)).isoformat()


def test_a_token_stops_acting_when_it_expires():
    tokens = TokenMap({ALICE: {"user": "alice", "expires_at": _at(-0.001)},
                       BOB: {"user": "bob", "expires_at": _at(1)}})
    assert tokens.user_for(ALICE) is None
    assert tokens.user_for(BOB) == "bob"
    naive = TokenMap({ALICE: {"user": "alice", "expires_at": "2999-01-01T00:00:00"}})  # naive = UTC
    assert naive.user_for(ALICE) == "alice"


@pytest.mark.parametrize("entry, message", [
    ({"user": "alice", "expires_at": "next week"}, "ISO 8601"),
    ({"user": "alice", "expires_at": 5}, "ISO 8601"),
    ({"user": "alice", "until": _at(1)}, "unknown keys"),
    ({"expires_at": _at(1)}, "invalid user id"),
    ({"user": " alice"}, "invalid user id"),
])
def test_a_bad_entry_is_a_configuration_error_that_does_not_show_the_token(entry, message):
    with pytest.raises(ConfigurationError, match=message) as caught:
        TokenMap({ALICE: entry})
    assert ALICE not in str(caught.value)


def test_a_loaded_map_follows_its_file(tmp_path, monkeypatch, caplog):
    monkeypatch.setattr(token_module, "RELOAD_SECONDS", 0.0)
    path = tmp_path / "tokens.json"
    first = issue_token(path, "alice")
    tokens = TokenMap.load(path)
    assert tokens.user_for(first) == "alice"
    second = issue_token(path, "bob")
    assert tokens.user_for(second) == "bob"  # added while loaded
    assert revoke_tokens(path, "alice") == 1
    assert tokens.user_for(first) is None  # revoked while loaded
    with caplog.at_level(logging.ERROR, logger="navi_memory"):
        path.write_text("{not json", encoding="utf-8")
        assert tokens.user_for(second) is None  # fails closed
    assert "not JSON" in caplog.text and second not in caplog.text
    path.write_text(json.dumps({second: "bob"}), encoding="utf-8")
    assert tokens.user_for(second) == "bob"
    path.unlink()
    assert tokens.user_for(second) is None
    assert len(tokens) == 0 and repr(tokens) == "TokenMap(0 tokens)"


def test_the_file_is_looked_at_at_most_once_per_interval(tmp_path, monkeypatch):
    path = tmp_path / "tokens.json"
    first = issue_token(path, "alice")
    tokens = TokenMap.load(path)
    looks = []
    real = token_module._signature
    monkeypatch.setattr(token_module, "_signature", lambda p: (looks.append(p), real(p))[1])
    for _ in range(100):
        assert tokens.user_for(first) == "alice"
    assert len(looks) <= 1  # RELOAD_SECONDS is 1: a hundred lookups take far less


def test_issue_token_with_an_expiry_writes_it_and_revoke_reads_both_forms(tmp_path):
    path = tmp_path / "tokens.json"
    plain = issue_token(path, "alice")
    dated = issue_token(path, "alice", expires_days=2)
    entries = json.loads(path.read_text())
    assert entries[plain] == "alice" and entries[dated]["user"] == "alice"
    expires = datetime.fromisoformat(entries[dated]["expires_at"])
    assert timedelta(days=1.99) < expires - datetime.now(timezone.utc) <= timedelta(days=2)
    assert TokenMap.load(path).user_for(dated) == "alice"
    for bad in (0, -1, 40_000, True):
        with pytest.raises(ValidationError, match="expires_days"):
            issue_token(path, "alice", expires_days=bad)
    assert revoke_tokens(path, "alice") == 2 and json.loads(path.read_text()) == {}
