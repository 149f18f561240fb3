"""Export/import of the household (persons, single or multi mode) and of promotions: a round trip
keeps who the memories are about and which items became which fact, so the target's promotion
job has nothing left to do; re-imports add nothing and bad records name their line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from navi_memory import MemoryStore, ValidationError

from .fakes import FakeClock, FakeEmbeddings
from .test_promotion import U, corpus
from .test_transfer import comparable, export, write

OLD_TYPES = ["user", "theme", "item", "fact", "summary", "session", "message", "llm_call"]


def household(store: MemoryStore, clock: FakeClock) -> None:
    store.set_household_mode("multi", user_id=U)
    store.add_person("Sarah Miller", user_id=U, aliases=["mom", "Sarah"], role="parent", pronouns="she/her",
                     birth_date="1979-03-14", notes="allergic to nuts")
    clock.advance(minutes=1)
    store.add_person("Leo", user_id=U, aliases=["little one"], role="child", birth_date="2016-11-02")
    store.add_person("Grandpa Joe", user_id=U, role="grandparent")


def promoted(store: MemoryStore) -> list[tuple]:
    """The promoted facts, without their ids."""
    return [(f.category, f.key, f.value, f.person, f.source, f.confidence, f.source_context, f.created_at)
            for f in store.promoted_facts(user_id=U)]


def promotion_state(store: MemoryStore) -> list[tuple]:
    """Per candidate item: its text, whether it is promoted, and the key of its fact (if any)."""
    keys = {f.id: f.key for f in store.get_all_facts(user_id=U)}
    rows = store.backend.promotion_candidates(U, store.embedding_model, store._now(), 1000)
    return sorted((r["content"], r["promoted"], keys.get(r["fact_id"])) for r in rows)


def persons(store: MemoryStore, user_id: str = U) -> list[dict]:
    return [{k: v for k, v in p.to_dict().items() if k != "id"} for p in store.list_persons(user_id=user_id)]


@pytest.fixture
def source(store: MemoryStore, clock: FakeClock) -> MemoryStore:
    household(store, clock)
    corpus(store)
    clock.advance(hours=1)
    report = store.promote(user_id=U)
    assert (report.facts_added, report.items_promoted) == (2, 7)
    return store


def check_same_household_and_promotions(source: MemoryStore, target: MemoryStore) -> None:
    assert target.household_mode(user_id=U) == "multi"
    assert persons(target) == persons(source)
    assert target.resolve_person_ref("mom", user_id=U).display_name == "Sarah Miller"
    assert promoted(target) == promoted(source) and promoted(target)
    assert target.memory_markdown(user_id=U) == source.memory_markdown(user_id=U)
    assert promotion_state(target) == promotion_state(source)
    again = target.promote(user_id=U)
    assert (again.clusters, again.facts_added, again.facts_updated, again.items_promoted) == (0, 0, 0, 0)


def test_export_writes_persons_mode_and_promotions(source):
    records = export(source, user_id=U)
    assert records[0]["record_types"][:2] == ["user", "person"] and "promotion" in records[0]["record_types"]
    assert records[1]["household_mode"] == "multi"
    kinds = [r["type"] for r in records[1:]]
    assert kinds.index("person") < kinds.index("item") and kinds.index("promotion") > kinds.index("fact")
    sarah = next(r for r in records if r.get("type") == "person" and r["display_name"] == "Sarah Miller")
    assert sarah["aliases"] == ["mom", "Sarah"] and sarah["birth_date"] == "1979-03-14"
    item_ids = {r["id"] for r in records if r.get("type") == "item"}
    promotions = [r for r in records if r.get("type") == "promotion"]
    assert len(promotions) == 7 and all(p["item"] in item_ids for p in promotions)
    assert {p["fact"]["key"] for p in promotions} == {"lives_berlin", "drinks_oat_milk_lattes"}


def test_round_trip_keeps_household_and_promotions(source, new_db_url, clock):
    records = export(source, user_id=U, with_vectors=True)
    with MemoryStore.open(new_db_url(), embeddings=FakeEmbeddings(), clock=clock) as target:
        report = target.import_records(records, batch_size=3)
        assert report.added["person"] == 3 and report.added["promotion"] == 7
        check_same_household_and_promotions(source, target)
        assert comparable(export(target, user_id=U, with_vectors=True)) == comparable(records)


def test_a_deleted_promoted_fact_stays_deleted(source, new_db_url, clock):
    source.delete_fact("drinks_oat_milk_lattes", user_id=U)
    records = export(source, user_id=U, with_vectors=True)
    assert sum(r.get("type") == "promotion" and r["fact"] is None for r in records) == 3
    with MemoryStore.open(new_db_url(), embeddings=FakeEmbeddings(), clock=clock) as target:
        target.import_records(records)
        check_same_household_and_promotions(source, target)
        assert [f.key for f in target.promoted_facts(user_id=U)] == ["lives_berlin"]


def test_import_twice_adds_nothing(source, new_db_url, clock, tmp_path):
    path = write(tmp_path, export(source, all_users=True, with_vectors=True))
    with MemoryStore.open(new_db_url(), embeddings=FakeEmbeddings(), clock=clock) as target:
        target.import_file(path, user_map={U: "u9"}, batch_size=4)
        second = target.import_file(path, user_map={U: "u9"}, batch_size=4)
        assert second.added == {} and second.skipped["person"] == 3 and second.skipped["promotion"] == 7
        assert len(target.list_persons(user_id="u9")) == 3
        assert target.household_mode(user_id="u9") == "multi"


def test_promotions_find_items_the_store_already_had(source, new_db_url, clock):
    """Items skipped as already there are found again by their natural key for the promotions."""
    records = export(source, user_id=U, with_vectors=True)
    with MemoryStore.open(new_db_url(), embeddings=FakeEmbeddings(), clock=clock) as target:
        first = target.import_records([r for r in records if r.get("type") != "promotion"])
        assert "promotion" not in first.added and target.promoted_facts(user_id=U) == []
        second = target.import_records(records, batch_size=5)
        assert second.added == {"promotion": 7} and second.skipped["item"] == 11
        check_same_household_and_promotions(source, target)


def test_an_old_file_without_households_still_imports(source, new_db_url, clock):
    records = export(source, user_id=U)
    old = [{**records[0], "record_types": OLD_TYPES}]
    for record in records[1:]:
        if record["type"] in OLD_TYPES:
            old.append({k: v for k, v in record.items() if k != "household_mode"})
    with MemoryStore.open(new_db_url(), embeddings=FakeEmbeddings(), clock=clock) as target:
        report = target.import_records(old)
        assert report.added["item"] == 11 and report.added["fact"] == 2
        assert target.household_mode(user_id=U) == "single" and target.list_persons(user_id=U) == []
        assert target.get_fact("lives_berlin", user_id=U).person == "Sarah Miller"  # the name travels as text


def _person(**fields: Any) -> dict:
    return {"type": "person", "user_id": U, "created_at": "2024-01-01T00:00:00Z",
            "updated_at": "2024-01-02T00:00:00Z", **fields}


BAD = {
    "no name": ([_person(role="child")], "display_name"),
    "bad birth date": ([_person(display_name="Kim", birth_date="14.03.1979")], "birth_date"),
    "aliases not names": ([_person(display_name="Kim", aliases=[1, 2])], "aliases"),
    "no times": ([{"type": "person", "user_id": U, "display_name": "Kim"}], "created_at"),
    "alias is a name": ([_person(display_name="Kim"), _person(display_name="Lou", aliases=["kim"])],
                        "alias 'kim' is the name of another person"),
    "role not text": ([_person(display_name="Kim", role=["child"])], "role must be a string"),
    "unknown time zone": ([{"type": "user", "user_id": U, "created_at": "2024-01-01T00:00:00Z",
                            "timezone": "Mars/Olympus"}], "timezone: unknown time zone"),
    "promotion of an unknown item": ([{"type": "promotion", "user_id": U, "item": 999999, "fact": None,
                                       "promoted_at": "2024-01-01T00:00:00Z"}], "item 999999"),
    "promotion of an unknown fact": ([{"type": "promotion", "user_id": U, "item": "first", "promoted_at":
                                       "2024-01-01T00:00:00Z", "fact": {"category": "other", "key": "nope"}}],
                                     "fact other/nope"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_records_name_their_line_and_write_nothing(store, clock, new_db_url, tmp_path, dump, case):
    with MemoryStore.open(new_db_url(), embeddings=FakeEmbeddings(), clock=clock) as other:
        household(other, clock)
        corpus(other)
        records = export(other, user_id=U)
    first_item = next(r["id"] for r in records if r.get("type") == "item")
    extra = [{**r, "item": first_item} if r.get("item") == "first" else r for r in BAD[case][0]]
    store.add(user_id="u2", content="already here")
    before = dump()
    path = write(tmp_path, records + extra)
    with pytest.raises(ValidationError, match=f"line {len(records) + len(extra)}: .*{BAD[case][1]}"):
        store.import_file(path, batch_size=2)
    assert dump() == before


def test_the_stored_household_is_checked_before_writing(store, clock, tmp_path, dump):
    """A person of the file must fit the target's household: a single-mode user keeps one person,
    and no alias may be the name of a stored person. A stored person of the same name is skipped."""
    store.add_person("Kim", user_id=U)
    header = export(store, user_id=U)[0]
    user = {"type": "user", "user_id": U, "created_at": "2024-01-01T00:00:00Z"}
    before = dump()
    with pytest.raises(ValidationError, match="line 3: a single-mode household holds one person"):
        store.import_file(write(tmp_path, [header, user, _person(display_name="Lou")]))
    with pytest.raises(ValidationError, match="line 3: alias 'KIM' is the name"):
        store.import_file(write(tmp_path, [header, {**user, "household_mode": "multi"},
                                           _person(display_name="Lou", aliases=["KIM"])]))
    with pytest.raises(ValidationError, match="record 2: a single-mode"):  # one pass: checked per batch
        store.import_records(iter([header, _person(display_name="Lou")]))
    assert dump() == before
    report = store.import_file(write(tmp_path, [header, {**user, "household_mode": "multi"},
                                                _person(display_name="kim", role="spouse"),
                                                _person(display_name="Lou")]))
    assert report.added == {"person": 1} and report.skipped == {"user": 1, "person": 1}
    assert store.household_mode(user_id=U) == "multi"  # widened by the file, never narrowed
    assert [(p.display_name, p.role) for p in store.list_persons(user_id=U)] == [("Kim", None), ("Lou", None)]


def test_user_map_applies_to_persons_and_promotions(source, new_db_url, clock):
    records = export(source, user_id=U, with_vectors=True)
    with MemoryStore.open(new_db_url(), embeddings=FakeEmbeddings(), clock=clock) as target:
        target.import_records(records, user_map={U: "eugene"})
        assert [p.display_name for p in target.list_persons(user_id="eugene")] == ["Sarah Miller", "Leo",
                                                                                  "Grandpa Joe"]
        assert len(target.promoted_facts(user_id="eugene")) == 2
        assert target.promote(user_id="eugene").items_promoted == 0


def test_cli_round_trip(source, new_db_url, tmp_path, capsys, db_url):
    from navi_memory.cli import main

    out = tmp_path / "household.jsonl"
    assert main(["--db", db_url, "--embeddings", "hashing", "export", "--user", U, "-o", str(out)]) == 0
    target_url = new_db_url()
    assert main(["--db", target_url, "--embeddings", "hashing", "import", str(out), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["added"]["person"] == 3 and report["added"]["promotion"] == 7


@pytest.mark.postgres
@pytest.mark.parametrize("direction", ["sqlite->postgres", "postgres->sqlite"])
def test_round_trip_across_backends(postgres_server, tmp_path: Path, direction: str) -> None:
    clock = FakeClock()
    pg_url = postgres_server.fresh_schema_url()
    sqlite_url = f"sqlite:///{tmp_path}/memory.db"
    first, second = (sqlite_url, pg_url) if direction.startswith("sqlite") else (pg_url, sqlite_url)
    try:
        with MemoryStore.open(first, embeddings=FakeEmbeddings(), clock=clock) as a, \
                MemoryStore.open(second, embeddings=FakeEmbeddings(), clock=clock) as b:
            household(a, clock)
            corpus(a)
            a.promote(user_id=U)
            a.delete_fact("drinks_oat_milk_lattes", user_id=U)  # a retired promotion travels as well
            records = export(a, all_users=True, with_vectors=True)
            b.import_records(records, batch_size=7)
            check_same_household_and_promotions(a, b)
            assert comparable(export(b, all_users=True, with_vectors=True)) == comparable(records)
            assert sum(b.import_records(records).added.values()) == 0
    finally:
        postgres_server.drop_schema(pg_url)



def test_the_users_time_zone_travels_and_a_stored_one_stays(source, new_db_url, clock):
    source.set_user_timezone("Europe/Lisbon", user_id=U)
    source.add(user_id="u2", content="no zone of my own")
    records = export(source, all_users=True)
    users = {r["user_id"]: r for r in records if r.get("type") == "user"}
    assert users[U]["timezone"] == "Europe/Lisbon" and "timezone" not in users["u2"]
    with MemoryStore.open(new_db_url(), embeddings=FakeEmbeddings(), clock=clock) as target:
        target.import_records(records)
        assert target.user_timezone(user_id=U) == "Europe/Lisbon" and target.user_timezone(user_id="u2") is None
        assert comparable(export(target, all_users=True)) == comparable(records)
    with MemoryStore.open(new_db_url(), embeddings=FakeEmbeddings(), clock=clock) as target:
        target.set_user_timezone("Asia/Tokyo", user_id=U)
        target.add(user_id="u2", content="here first")
        target.import_records(records)  # an import never replaces the zone a user has
        assert target.user_timezone(user_id=U) == "Asia/Tokyo"
        assert target.user_timezone(user_id="u2") is None
        target.import_records([records[0], {**users["u2"], "timezone": "America/Denver"}])
        assert target.user_timezone(user_id="u2") == "America/Denver"  # but gives one to a user without
