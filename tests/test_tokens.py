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


def test_token_commands_at_once_lose_no_change(tmp_path):
    """Each command read, changed and wrote the file: run at once, one's change was lost (a revoked
    token came back, an issued one never acted). Real processes, as two shells would run them."""
    import subprocess
    import sys

    path = tmp_path / "tokens.json"
    revoked = issue_token(path, "bob")
    code = ("import sys; from navi_memory.tokens import issue_token, revoke_tokens;"
            "revoke_tokens(sys.argv[1], 'bob') if sys.argv[2] == '-' else print(issue_token(sys.argv[1], sys.argv[2]))")
    runs = [subprocess.Popen([sys.executable, "-c", code, str(path), user], stdout=subprocess.PIPE, text=True)
            for user in [f"u{i}" for i in range(12)] + ["-"]]
    printed = [run.communicate(timeout=120)[0].strip() for run in runs]
    assert all(run.returncode == 0 for run in runs)
    entries = json.loads(path.read_text())
    assert revoked not in entries and set(filter(None, printed)) == set(entries) and len(entries) == 12
    assert not [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_a_link_planted_where_the_temporary_file_was_is_not_followed(tmp_path):
    """The temporary file had a name anyone could guess (.tokens.json.<pid>.tmp), opened without
    O_EXCL: a symlink planted there got every token written through it."""
    import os

    victim = tmp_path / "victim.txt"
    victim.write_text("important data\n")
    path = tmp_path / "tokens.json"
    (tmp_path / f".tokens.json.{os.getpid()}.tmp").symlink_to(victim)
    issue_token(path, "alice")
    assert victim.read_text() == "important data\n" and not path.is_symlink()
    assert list(json.loads(path.read_text()).values()) == ["alice"]


def test_a_token_file_that_is_not_utf8_is_a_bad_file_not_a_crash(tmp_path, monkeypatch, caplog):
    path = tmp_path / "tokens.json"
    path.write_bytes(b'{"\xff": "alice"}')
    with pytest.raises(ConfigurationError, match=r"not UTF-8 text \(byte 2\)"):
        TokenMap.load(path)
    with pytest.raises(ConfigurationError, match="not UTF-8"):
        issue_token(path, "bob")
    monkeypatch.setattr(token_module, "RELOAD_SECONDS", 0.0)
    path.write_text(json.dumps({ALICE: "alice"}), encoding="utf-8")
    tokens = TokenMap.load(path)
    path.write_bytes(b'{"\xff": "alice"}  ')  # changed under a running server: it fails closed
    with caplog.at_level(logging.ERROR, logger="navi_memory"):
        assert tokens.user_for(ALICE) is None
    assert "not UTF-8" in caplog.text
    with pytest.raises(ConfigurationError, match="does not exist"):
        issue_token(tmp_path / "missing" / "tokens.json", "bob")
