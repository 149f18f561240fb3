"""Import is checked whole before anything is written, every record passes the public API's
limits, and a file cannot write into users it does not name."""

from __future__ import annotations

import json

import pytest

from navi_memory import MemoryStore, ValidationError
from navi_memory.cli import main

from .fakes import FakeEmbeddings


def exported(store: MemoryStore, user: str) -> list[dict]:
    records: list[dict] = []
    store.export(records.append, user_id=user)
    return records


@pytest.fixture
def source(new_db_url):
    """A store with user u1's 200 notes, a summary and a session; returns its export."""
    with MemoryStore.open(new_db_url(), embeddings=FakeEmbeddings()) as store:
        store.add_many([{"user_id": "u1", "content": f"note {n}"} for n in range(200)])
        store.set_summary("u1 likes ferries.", user_id="u1")
        store.add_messages("s1", [{"role": "user", "content": "hello"}], user_id="u1", background=False)
        return exported(store, "u1")


def bad(records: list[dict], kind: str, **changes) -> dict:
    template = next(r for r in records if r.get("type") == kind)
    return {**template, **changes}


BAD_RECORDS = [
    pytest.param("session", {"attempts": 2**64}, "attempts", id="attempts-2**64"),
    pytest.param("summary", {"version": 2**63}, "version", id="summary-version-2**63"),
    pytest.param("message", {"seq": 2**64}, "seq", id="message-seq-2**64"),
    pytest.param("item", {"content": "x" * 10_000_000}, "more than the maximum", id="10M-char-content"),
    pytest.param("item", {"id": 2**64}, "id", id="item-id-2**64"),
]


@pytest.mark.parametrize("kind, changes, expected", BAD_RECORDS)
def test_a_bad_record_after_200_good_ones_writes_nothing(source, store, dump, kind, changes, expected):
    items = [r for r in source if r.get("type") == "item"]
    assert len(items) == 200
    records = [source[0], *[r for r in source[1:] if r.get("type") == "user"], *items, bad(source, kind, **changes)]
    before = dump()
    with pytest.raises(ValidationError, match=expected):
        store.import_records(records, batch_size=50)
    assert dump() == before


def test_fact_history_confidence_is_checked(store, dump):
    header = {"format": "navi-memory-export", "version": 1, "users": ["u1"]}
    fact = {"type": "fact", "user_id": "u1", "category": "profile", "key": "city", "value": "Oslo",
            "source": "conversation", "confidence": 70, "created_at": "2024-01-01T00:00:00Z",
            "updated_at": "2024-01-01T00:00:00Z",
            "history": [{"value": "Bergen", "source": "conversation", "confidence": 101,
                         "valid_from": "2023-01-01T00:00:00Z", "valid_to": "2024-01-01T00:00:00Z"}]}
    before = dump()
    with pytest.raises(ValidationError, match="confidence"):
        store.import_records([header, fact])
    assert dump() == before


@pytest.mark.parametrize("user_map", [None, {"u1": "u2"}], ids=["no-map", "u1=u2"])
def test_a_line_for_a_user_the_file_does_not_name_is_refused(source, store, dump, user_map):
    store.set_summary("the stranger's own summary", user_id="stranger")
    planted = [bad(source, "summary", user_id="stranger", content="replaced by a hostile file", version=99),
               bad(source, "item", user_id="stranger", content="a planted note")]
    before = dump()
    with pytest.raises(ValidationError, match="stranger"):
        store.import_records([*source, *planted], user_map=user_map)
    assert dump() == before
    assert store.get_summary(user_id="stranger") == "the stranger's own summary"


def test_the_cli_import_of_a_bad_file_is_one_line_and_writes_nothing(source, store, db_url, dump, tmp_path, capsys):
    path = tmp_path / "u1.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in [*source, bad(source, "message", seq=2**64)]))
    before = dump()
    code = main(["--db", db_url, "--embeddings", "none", "import", str(path), "--user-map", "u1=u2"])
    err = capsys.readouterr().err
    assert code == 2 and "seq" in err and len(err.strip().splitlines()) == 1
    assert dump() == before


def test_a_good_file_still_imports_and_a_second_import_adds_nothing(source, store):
    first = store.import_records(source, user_map={"u1": "u2"})
    second = store.import_records(source, user_map={"u1": "u2"})
    assert first.added.get("item") == 200 and not second.added.get("item")
    assert len(store.list_items(user_id="u2", limit=500)) == 200
