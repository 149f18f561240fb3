"""Export/import (JSON Lines): nothing is lost on a round trip, re-imports add nothing, a model
change re-embeds, and bad input names its line and writes nothing."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from navi_memory import AsyncMemoryStore, MemoryStore, ValidationError
from navi_memory.cli import main
from navi_memory.transfer_format import dumps

from .fakes import FakeClock, FakeEmbeddings
from .test_postgres import novector_url  # noqa: F401  (a fixture: a fresh database without pgvector)


def populate(store: MemoryStore, clock: FakeClock) -> None:
    """Every kind of row, with the fields that are easy to lose."""
    u = "u1"
    store.add(user_id=u, content="I drink oat milk lattes", theme="food", tags=["coffee", "daily"], pinned=True,
              title="Coffee", type="preference", source="chat", source_ref={"session_id": "s1", "turn": 2},
              person="Anna", confidence=80, observed_at="2024-12-01T08:00:00+00:00", metadata={"k": [1, 2]},
              context="what do you drink?")
    clock.advance(minutes=5)
    store.set_household_mode("multi", user_id=u)  # the household: persons and their mode travel too
    store.add_person("Anna", user_id=u, aliases=["mom", "Annie"], role="parent", pronouns="she/her",
                     birth_date="1980-04-02", notes="takes her coffee black")
    clock.advance(minutes=1)
    store.add_person("Tom", user_id=u, role="child", birth_date="2015-09-30")
    store.add_person("Ben", user_id="u2", aliases=["B"])  # single mode, one person
    archived = store.add(user_id=u, content="Old address: Lindenstrasse 5", theme="home", expires_days=400)
    store.archive(archived, user_id=u)
    store.add_many([{"user_id": u, "content": "same text twice"}, {"user_id": u, "content": "same text twice"}])
    clock.advance(minutes=5)
    # update_summary=False: the summary history below is the fixture's own
    store.upsert_fact(user_id=u, category="profile", key="city", value="Berlin", source="user_explicit",
                      source_context="said so", source_session_id="s1", expires_days=30, update_summary=False)
    clock.advance(days=1)
    change = store.upsert_fact(user_id=u, category="profile", key="city", value="Hamburg", source="tool_call",
                               update_summary=False)
    store.pin(change.fact.item_id, user_id=u)
    store.upsert_fact(user_id=u, category="preferences", key="editor", value="vim", person="me", update_summary=False)
    store.set_summary("Lives in Berlin.", user_id=u)
    clock.advance(hours=1)
    store.set_summary("Lives in Hamburg, uses vim.", user_id=u)
    store.add_messages("s1", [{"role": "user", "content": "I moved to Hamburg"},
                              {"role": "assistant", "content": "", "tool_calls": [
                                  {"id": "c1", "name": "lookup", "arguments": "{\"q\": \"Hamburg\"}"}]},
                              {"role": "tool", "content": "sunny", "tool_call_id": "c1", "name": "lookup"}],
                       user_id=u, triggers=False)
    calls = [{"purpose": "extract", "model": "m", "input_tokens": 10, "output_tokens": 5, "estimated": True,
              "ok": True}] * 2 + [{"purpose": "summary", "model": "m", "input_tokens": 3, "output_tokens": 1,
                                   "estimated": False, "ok": False, "error": "timeout"}]
    store.backend.finish_session(u, "s1", {"state": "extracted", "extracted_seq": 3, "extracted_user_messages": 1},
                                 calls, clock())
    store.mark_session_extracted("s2", user_id=u, at="2024-11-30T10:00:00+00:00")
    store.add(user_id="u2", content="another user's note")


def export(store: Any, **kwargs: Any) -> list[dict]:
    records: list[dict] = []
    store.export(records.append, **kwargs)
    return json.loads(json.dumps(records))  # exactly what a file holds


def comparable(records: list[dict]) -> list[dict]:
    """Records without what legitimately differs between two stores: the export time and item ids
    (a promotion names its item by the item's content and time instead: the first vector of a
    model may cost PostgreSQL's call a restart, and the restarted call a sequence value)."""
    items = {r["id"]: (r["content"], r["created_at"]) for r in records[1:] if r.get("type") == "item"}
    out = []
    for record in records[1:]:
        record = {k: v for k, v in record.items() if k != "id"}
        if isinstance(record.get("item"), dict):
            record["item"] = {k: v for k, v in record["item"].items() if k != "id"}
        elif record.get("type") == "promotion":
            record["item"] = items.get(record["item"], record["item"])
        out.append(record)
    return out


def write(tmp_path: Path, records: list[dict], name: str = "memory.jsonl") -> Path:
    path = tmp_path / name
    path.write_text("".join(dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


@pytest.fixture
def source(store: MemoryStore, clock: FakeClock) -> MemoryStore:
    populate(store, clock)
    return store


@pytest.fixture
def target_url(new_db_url: Any) -> str:
    return new_db_url()


def test_export_has_a_versioned_header_and_every_record_type(source):
    records = export(source, user_id="u1")
    assert records[0]["format"] == "navi-memory-export" and records[0]["version"] == 1
    assert records[0]["embedding_model"] == source.embedding_model and records[0]["users"] == ["u1"]
    kinds = {r["type"] for r in records[1:]}
    assert kinds == {"user", "person", "theme", "item", "fact", "summary", "session", "message", "llm_call"}
    assert records[1] == {"type": "user", "user_id": "u1", "created_at": records[1]["created_at"],
                          "household_mode": "multi"}
    anna = next(r for r in records[1:] if r["type"] == "person" and r["display_name"] == "Anna")
    assert (anna["aliases"], anna["role"], anna["pronouns"], anna["birth_date"], anna["notes"]) == (
        ["mom", "Annie"], "parent", "she/her", "1980-04-02", "takes her coffee black")
    assert all(r["user_id"] == "u1" for r in records[1:])
    city = next(r for r in records[1:] if r["type"] == "fact" and r["key"] == "city")
    assert city["value"] == "Hamburg" and [h["value"] for h in city["history"]] == ["Berlin"]
    assert city["item"]["pinned"] is True and "vector" not in city["item"]["embedding"]
    assert len(export(source, all_users=True)[0]["users"]) == 2


def test_export_pages_give_the_same_records(source):
    whole = export(source, all_users=True, with_vectors=True)
    paged = export(source, all_users=True, with_vectors=True, page_size=1)
    assert paged[1:] == whole[1:] and len(whole) > 20


@pytest.mark.parametrize("with_vectors", [False, True], ids=["re-embed", "vectors"])
def test_round_trip_loses_nothing(source, target_url, clock, with_vectors):
    before = export(source, user_id="u1", with_vectors=with_vectors)
    embedder = FakeEmbeddings()
    with MemoryStore.open(target_url, embeddings=embedder, clock=clock) as target:
        ids: dict[int, int] = {}
        report = target.import_records(before, id_map=lambda user, old, new: ids.setdefault(old, new))
        exported = {r["id"]: r for r in before[1:] if r["type"] == "item"}
        exported.update({r["item"]["id"]: r["item"] for r in before[1:] if r["type"] == "fact"})
        assert set(ids) == set(exported)
        assert all(target.get(new, user_id="u1").content == exported[old]["content"] for old, new in ids.items())
        assert report.added["item"] == 4 and report.added["fact"] == 2 and report.added["llm_call"] == 3
        after = export(target, user_id="u1", with_vectors=with_vectors)
        assert comparable(after) == comparable(before)
        # without vectors the target embeds every item itself; with them, none (one short text tells
        # the size of the provider's vectors)
        assert len(embedder.embedded_texts) == (1 if with_vectors else 6)
        assert target.embedding_status()["ready"] == 6
        assert target.get_all_facts(user_id="u1", include_history=True)[0].history[0].value == "Berlin"
        assert [s.version for s in target.summary_history(user_id="u1")] == [2, 1]
        assert target.search("oat milk", user_id="u1")[0].content == "I drink oat milk lattes"


def test_import_twice_adds_nothing(source, target_url, clock, tmp_path):
    path = write(tmp_path, export(source, all_users=True))
    with MemoryStore.open(target_url, embeddings=FakeEmbeddings(), clock=clock) as target:
        first = target.import_file(path)
        snapshot = export(target, all_users=True)
        again = target.import_file(path, batch_size=3)
        assert sum(again.added.values()) == 0 and again.skipped == first.added
        assert comparable(export(target, all_users=True)) == comparable(snapshot)


def test_user_map_renames_users(source, target_url, clock):
    with MemoryStore.open(target_url, embeddings=FakeEmbeddings(), clock=clock) as target:
        target.import_records(export(source, user_id="u1"), user_map={"u1": "eugene"})
        assert [u["id"] for u in target.list_users()] == ["eugene"]
        assert target.get_summary(user_id="eugene") == "Lives in Hamburg, uses vim."
        assert target.get_session("s1", user_id="eugene").message_count == 3


def test_a_different_embedding_model_re_embeds_on_import(clock, new_db_url):
    old = FakeEmbeddings(model="old-model", dimensions=32)
    with MemoryStore.open(new_db_url(), embeddings=old, clock=clock) as a:
        a.add(user_id="u1", content="the cat sleeps on the sofa")
        a.upsert_fact(user_id="u1", category="profile", key="pet", value="cat")
        records = export(a, user_id="u1", with_vectors=True)
    assert records[0]["embedding_model"] == a.embedding_model
    new = FakeEmbeddings(model="new-model", dimensions=48)
    with MemoryStore.open(new_db_url(), embeddings=new, clock=clock) as b:
        report = b.import_records(records)
        assert report.embedded == 2 and new.document_calls > 0
        status = b.embedding_status()
        assert status["ready"] == 2 and status["other_model"] == 0 and status["model"] == b.embedding_model
        items = b.list_items(user_id="u1", limit=10)
        assert {i.embedding.model for i in items} == {b.embedding_model}
        assert {i.embedding.dimensions for i in items} == {48}
        assert b.search("cat sofa", user_id="u1")[0].signals["semantic"]


def test_same_model_with_vectors_keeps_them_and_does_not_embed(clock, new_db_url):
    emb = FakeEmbeddings()
    with MemoryStore.open(new_db_url(), embeddings=emb, clock=clock) as a:
        a.add(user_id="u1", content="vectors travel with the file")
        records = export(a, user_id="u1", with_vectors=True)
    twin = FakeEmbeddings()
    with MemoryStore.open(new_db_url(), embeddings=twin, clock=clock) as b:
        b.import_records(records)
        assert len(twin.embedded_texts) == 1  # one short text: the size of the provider's vectors, no item
        again = export(b, user_id="u1", with_vectors=True)
    vector = next(r for r in again[1:] if r["type"] == "item")["embedding"]["vector"]
    assert np.allclose(vector, twin.expected("vectors travel with the file"))


def test_vectors_of_the_stores_model_but_another_size_are_embedded_again(clock, new_db_url):
    """A provider declaring no size let an imported vector of the model's name and any size be
    stored ready: counted ready, never re-embedded, never found by a search of the real size."""
    with MemoryStore.open(new_db_url(), embeddings=FakeEmbeddings(), clock=clock) as a:
        a.add(user_id="u1", content="the cat sleeps on the sofa")
        records = export(a, user_id="u1", with_vectors=True)
    item = next(r for r in records if r.get("type") == "item")
    item["embedding"] = {**item["embedding"], "dimensions": 2, "vector": [0.6, 0.8]}
    twin = FakeEmbeddings()
    with MemoryStore.open(new_db_url(), embeddings=twin, clock=clock) as b:
        assert b.import_records(records).embedded == 1
        [kept] = b.list_items(user_id="u1")
        assert kept.embedding.dimensions == 64 and kept.embedding.state == "ready"
        assert b.search("cat sofa", user_id="u1")[0].signals["semantic"]
    item["embedding"] = {**item["embedding"], "dimensions": 3}  # the record contradicts itself
    with MemoryStore.open(new_db_url(), embeddings=FakeEmbeddings(), clock=clock) as c:
        with pytest.raises(ValidationError, match="vector has 2 numbers, its dimensions say 3"):
            c.import_records(records)
        assert c.list_users() == []


def test_import_into_a_lexical_store(source, target_url, clock):
    with MemoryStore.open(target_url, embeddings=False, clock=clock) as target:
        target.import_records(export(source, user_id="u1", with_vectors=True))
        assert target.search("lattes", user_id="u1")[0].content == "I drink oat milk lattes"


def _bad_inputs(records: list[dict]) -> dict[str, tuple[str, str]]:
    good = "".join(dumps(r) + "\n" for r in records)
    lines = good.splitlines(keepends=True)
    wrong_type = dict(next(r for r in records[1:] if r["type"] == "fact"), confidence="high")
    later = len(lines) + 1
    return {
        "truncated": ("".join(lines[:-1]) + lines[-1][: len(lines[-1]) // 2], f"line {len(lines)}"),
        "unknown version": (dumps({**records[0], "version": 99}) + "\n" + "".join(lines[1:]), "version 99"),
        "not an export": ("".join(lines[1:]), "line 1"),
        "wrong type": (good + dumps(wrong_type) + "\n", f"line {later}"),
        "unknown record": (good + dumps({"type": "reminder", "user_id": "u1"}) + "\n", f"line {later}"),
        "missing field": (good + dumps({"type": "message", "user_id": "u1", "session_id": "s1"}) + "\n", f"line {later}"),
        "bad time": (good + dumps({"type": "user", "user_id": "u3", "created_at": "yesterday"}) + "\n", f"line {later}"),
        "empty": ("", "empty input"),
    }


@pytest.mark.parametrize("case", ["truncated", "unknown version", "not an export", "wrong type", "unknown record",
                                  "missing field", "bad time", "empty"])
def test_bad_input_names_the_line_and_writes_nothing(store, clock, new_db_url, tmp_path, dump, case):
    with MemoryStore.open(new_db_url(), embeddings=FakeEmbeddings(), clock=clock) as other:
        populate(other, clock)
        records = export(other, all_users=True)
    store.add(user_id="u1", content="already here")
    text, where = _bad_inputs(records)[case]
    path = tmp_path / "bad.jsonl"
    path.write_text(text, encoding="utf-8")
    before = dump()
    with pytest.raises(ValidationError, match=where):
        store.import_file(path, batch_size=2)
    assert dump() == before


def test_unknown_record_types_can_be_skipped(store, tmp_path):
    header = {"format": "navi-memory-export", "version": 1, "record_types": ["user", "reminder"]}
    path = write(tmp_path, [header, {"type": "user", "user_id": "u5", "created_at": "2024-01-01T00:00:00Z"},
                            {"type": "reminder", "user_id": "u5", "text": "call Anna"}])
    with pytest.raises(ValidationError, match="reminder"):
        store.import_file(path)
    report = store.import_file(path, skip_unknown=True)
    assert report.added == {"user": 1} and report.unknown == 1


def test_cli_export_and_import(source, target_url, tmp_path, capsys, db_url):
    out = tmp_path / "cli.jsonl"
    assert main(["--db", db_url, "--embeddings", "hashing", "export", "--user", "u1", "-o", str(out)]) == 0
    assert "exported" in capsys.readouterr().err
    id_map = tmp_path / "ids.jsonl"
    assert main(["--db", target_url, "--embeddings", "hashing", "import", str(out), "--user-map", "u1=u7",
                 "--id-map", str(id_map), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["added"]["fact"] == 2
    pairs = [json.loads(line) for line in id_map.read_text(encoding="utf-8").splitlines()]
    assert len(pairs) == 6 and {p["user_id"] for p in pairs} == {"u7"}
    bad = tmp_path / "bad.jsonl"
    bad.write_text(out.read_text(encoding="utf-8") + "{\"type\": \"item\"\n", encoding="utf-8")
    assert main(["--db", target_url, "--embeddings", "hashing", "import", str(bad)]) == 2
    assert "line" in capsys.readouterr().err
    assert main(["--db", target_url, "export"]) == 2


async def test_async_store_exports_and_imports(source, target_url, clock):
    records = export(source, user_id="u1")
    target = await AsyncMemoryStore.open(target_url, embeddings=FakeEmbeddings(), clock=clock)
    try:
        report = await target.import_records(records)
        assert report.added["session"] == 2
        again: list[dict] = []
        await target.export(again.append, user_id="u1")
        assert comparable(json.loads(json.dumps(again))) == comparable(records)
    finally:
        await target.close()


@pytest.mark.postgres
@pytest.mark.parametrize("direction", ["sqlite->postgres", "postgres->sqlite"])
def test_round_trip_across_backends(postgres_server, tmp_path, direction):
    clock = FakeClock()
    pg_url = postgres_server.fresh_schema_url()
    sqlite_url = f"sqlite:///{tmp_path}/memory.db"
    first, second = (sqlite_url, pg_url) if direction.startswith("sqlite") else (pg_url, sqlite_url)
    try:
        with MemoryStore.open(first, embeddings=FakeEmbeddings(), clock=clock) as a:
            populate(a, clock)
            before = export(a, all_users=True, with_vectors=True)
        clock.advance(days=3)
        with MemoryStore.open(second, embeddings=FakeEmbeddings(), clock=clock) as b:
            b.import_records(before)
            after = export(b, all_users=True, with_vectors=True)
            assert b.search("lattes", user_id="u1")[0].signals["semantic"]
    finally:
        postgres_server.drop_schema(pg_url)
    assert comparable(after) == comparable(before)
    times = [r["created_at"] for r in after[1:] if r["type"] == "item"]
    assert max(times) < (FakeClock().now + timedelta(days=2)).isoformat()  # stored times, not the import's


def test_a_list_is_checked_whole_before_writing(store, dump):
    header = {"format": "navi-memory-export", "version": 1}
    good = {"type": "user", "user_id": "u8", "created_at": "2024-01-01T00:00:00Z"}
    before = dump()
    with pytest.raises(ValidationError, match="record 3: .*created_at"):
        store.import_records([header, good, {"type": "user", "user_id": "u9"}], batch_size=1)
    assert dump() == before
    with pytest.raises(ValidationError, match="record 3"):  # a one-shot iterable too: read whole, then checked
        store.import_records(iter([header, good, {"type": "user", "user_id": "u9"}]), batch_size=1)
    assert dump() == before


@pytest.mark.postgres
def test_import_into_postgres_without_pgvector(novector_url, tmp_path):  # noqa: F811 (the imported fixture)
    clock = FakeClock()
    with MemoryStore.open(f"sqlite:///{tmp_path}/a.db", embeddings=FakeEmbeddings(), clock=clock) as a:
        populate(a, clock)
        before = export(a, all_users=True, with_vectors=True)
    with MemoryStore.open(novector_url, embeddings=FakeEmbeddings(), clock=clock) as b:
        assert b.embedding_model is None  # lexical-only: vectors cannot be stored
        report = b.import_records(before)
        assert report.added["item"] == 5 and report.embedded == 0
        assert b.search("lattes", user_id="u1")[0].content == "I drink oat milk lattes"
        after = export(b, all_users=True)
        assert sum(b.import_records(before).added.values()) == 0
    strip = [{**r, "embedding": None} if r.get("type") == "item" else r for r in comparable(before)]
    strip = [{**r, "item": {**r["item"], "embedding": None}} if isinstance(r.get("item"), dict) else r for r in strip]
    assert comparable(after) == strip
