"""Timestamps: every accepted value reads back, nothing unrepresentable is stored, no stored row
makes a user unreadable, and PostgreSQL sessions read in UTC whatever the database's zone."""

from __future__ import annotations

import json
import sqlite3
import uuid
from datetime import datetime, timezone
from urllib.parse import urlsplit, urlunsplit

import pytest

from navi_memory import MemoryStore, ValidationError
from navi_memory.cli import main

from .bad_input_support import U, seed, unchanged_after
from .fakes import FakeEmbeddings

UTC = timezone.utc
ACCEPTED = [  # as given -> what reads back (aware UTC)
    ("0999-06-01", datetime(999, 6, 1, tzinfo=UTC)),
    ("0001-01-01T00:00:00-23:59", datetime(1, 1, 1, 23, 59, tzinfo=UTC)),
    ("0001-01-01T00:00:00Z", datetime(1, 1, 1, tzinfo=UTC)),
    ("9999-12-31T23:59:59Z", datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC)),
    ("9999-12-31T23:59:59.999999+00:00", datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC)),
]
REFUSED = ["0001-01-01T00:00:00+01:00", "9999-12-31T23:00:00-05:00", "10000-01-01", "2026-13-01", "yesterday"]


@pytest.mark.parametrize("given, expected", ACCEPTED)
def test_every_accepted_timestamp_reads_back_through_every_read(store, given, expected):
    item = store.add(user_id=U, content="the ferry leaves at dawn", observed_at=given, expires_at="9999-12-31T23:59:59Z")
    store.upsert_fact(user_id=U, category="profile", key="ferry", value="at dawn", expires_at=given)
    assert store.get(item, user_id=U).observed_at == expected
    assert [i.observed_at for i in store.list_items(user_id=U, types=["note"], include_expired=True)] == [expected]
    assert store.search("ferry", user_id=U, include_expired=True)
    assert [f.expires_at for f in store.get_all_facts(user_id=U, include_expired=True)] == [expected]
    records: list[dict] = []
    store.export(records.append, user_id=U)
    store.export(records.append, all_users=True)
    assert any(r.get("observed_at") for r in records)


@pytest.mark.parametrize("given", REFUSED)
def test_an_unrepresentable_timestamp_is_refused_and_nothing_written(store, dump, given):
    seed(store)
    error = unchanged_after(dump, lambda: store.add(user_id=U, content="x", observed_at=given), ValidationError)
    assert "observed_at" in str(error)
    unchanged_after(dump, lambda: store.upsert_fact(user_id=U, category="profile", key="k", value="v",
                                                    expires_at=given), ValidationError)
    unchanged_after(dump, lambda: store.add_messages("s9", [{"role": "user", "content": "hi", "timestamp": given}],
                                                     user_id=U), ValidationError)


def test_the_cli_refuses_a_transcript_with_an_unrepresentable_timestamp(store, db_url, dump, capsys, tmp_path):
    seed(store)
    before = dump()
    transcript = tmp_path / "chat.json"
    transcript.write_text(json.dumps([{"role": "user", "content": "hi", "timestamp": "0001-01-01T00:00:00+01:00"}]))
    code = main(["--db", db_url, "--embeddings", "hashing", "ingest", "--user", U, "--session", "s9", str(transcript)])
    err = capsys.readouterr().err
    assert code == 2 and "created_at" in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert dump() == before


def test_the_rest_api_answers_422_and_writes_nothing(store, dump):
    from starlette.testclient import TestClient

    from navi_memory.ui.api import create_api_app

    from .ui_helpers import LOCAL, TOKEN

    seed(store)
    before = dump()
    client = TestClient(create_api_app(store, token=TOKEN), base_url=LOCAL, headers={"Authorization": f"Bearer {TOKEN}"})
    for given in REFUSED[:2]:
        reply = client.post(f"/api/users/{U}/items", json={"content": "x", "observed_at": given})
        assert reply.status_code == 422 and "observed_at" in reply.json()["error"]
    assert dump() == before
    reply = client.post(f"/api/users/{U}/items", json={"content": "old", "observed_at": "0999-06-01"})
    assert reply.status_code in (200, 201)
    assert client.get(f"/api/users/{U}/items").status_code == 200


@pytest.mark.parametrize("stored", ["999-06-01T00:00:00.000000Z", "garbage", "", "2026-02-30T00:00:00.000000Z"])
def test_a_corrupt_stored_timestamp_never_makes_the_user_unreadable(store, db_path, stored):
    item = store.add(user_id=U, content="the ferry leaves at dawn")
    store.upsert_fact(user_id=U, category="profile", key="ferry", value="at dawn")
    with sqlite3.connect(db_path) as conn:  # as an older version or a hand edit left it
        conn.execute("UPDATE items SET observed_at = ?, created_at = ? WHERE id = ?", (stored, stored, item))
        conn.execute("UPDATE facts SET updated_at = ?", (stored,))
    assert [i.id for i in store.list_items(user_id=U, include_expired=True)]
    assert store.get(item, user_id=U).content == "the ferry leaves at dawn"
    assert store.search("ferry", user_id=U)
    assert store.get_all_facts(user_id=U)
    records: list[dict] = []
    store.export(records.append, all_users=True)
    assert len(records) > 2
    if stored.startswith("999-"):  # an unpadded year of an older version reads as what it meant
        assert store.get(item, user_id=U).observed_at == datetime(999, 6, 1, tzinfo=UTC)


@pytest.mark.postgres
def test_postgresql_reads_in_utc_whatever_the_databases_zone(postgres_server):
    name = "tz_" + uuid.uuid4().hex[:10]
    postgres_server.execute(f"CREATE DATABASE {name}")
    postgres_server.execute(f"ALTER DATABASE {name} SET timezone = 'Europe/Oslo'")
    url = urlunsplit(urlsplit(postgres_server.url)._replace(path=f"/{name}"))
    try:
        with MemoryStore.open(url, embeddings=FakeEmbeddings()) as store:
            item = store.add(user_id=U, content="forever", expires_at="9999-12-31T23:59:59Z",
                             observed_at="0001-01-01T00:00:00Z")
            got = store.get(item, user_id=U)
            assert got.expires_at == datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC)
            assert got.observed_at == datetime(1, 1, 1, tzinfo=UTC)
            assert [i.id for i in store.list_items(user_id=U)] == [item]
            assert store.search("forever", user_id=U)
    finally:
        postgres_server.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


LATE = datetime(9990, 1, 1, tzinfo=UTC)  # a clock this late leaves 3,651 days before year 9999 ends


@pytest.mark.parametrize("now, days", [(None, 10**6), (None, 10**9), (None, 10**20), (None, 1e308),
                                       (LATE, 10**4), (LATE, 365_000)])
def test_expires_days_past_year_9999_is_refused_and_nothing_written(store, clock, dump, now, days):
    seed(store)
    if now is not None:
        clock.set(now)
    for call in (lambda: store.upsert_fact(user_id=U, category="profile", key="k", value="v", expires_days=days),
                 lambda: store.add(user_id=U, content="x", expires_days=days)):
        error = unchanged_after(dump, call, ValidationError)
        assert "expires_days" in str(error)


def test_expires_days_up_to_the_last_representable_day_is_kept(store, clock):
    clock.set(LATE)
    store.upsert_fact(user_id=U, category="profile", key="k", value="v", expires_days=3651)
    assert store.get_all_facts(user_id=U)[0].expires_at == datetime(9999, 12, 31, tzinfo=UTC)


def test_recency_days_reaching_before_year_1_excludes_nothing(store, clock):
    clock.set(datetime(100, 1, 1, tzinfo=UTC))
    item = store.add(user_id=U, content="the ferry leaves at dawn")
    assert [r.id for r in store.search("ferry", user_id=U, recency_days=365_000)] == [item]


@pytest.mark.parametrize("days", ["1e9", "1e20", "inf"])
def test_the_cli_refuses_expires_days_past_year_9999(store, db_url, dump, capsys, days):
    seed(store)
    before = dump()
    for args in (["fact", "set", "--user", U, "--category", "profile", "k", "v", "--expires-days", days],
                 ["add", "--user", U, "x", "--expires-days", days]):
        code = main(["--db", db_url, "--embeddings", "hashing", *args])
        err = capsys.readouterr().err
        assert code == 2 and "expires_days" in err and "Traceback" not in err, err
    assert dump() == before


def test_the_rest_api_refuses_expires_days_past_year_9999(store, clock, dump):
    from starlette.testclient import TestClient

    from navi_memory.ui.api import create_api_app

    from .ui_helpers import LOCAL, TOKEN

    seed(store)
    before = dump()
    client = TestClient(create_api_app(store, token=TOKEN), base_url=LOCAL, headers={"Authorization": f"Bearer {TOKEN}"})
    for now, days in ((None, 10**20), (None, 10**6), (LATE, 10**4)):
        if now is not None:
            clock.set(now)
        reply = client.post(f"/api/users/{U}/facts", json={"category": "profile", "key": "k", "value": "v",
                                                          "expires_days": days})
        assert reply.status_code == 422 and "expires_days" in reply.json()["error"], reply.text
        reply = client.post(f"/api/users/{U}/items", json={"content": "x", "expires_days": days})
        assert reply.status_code == 422 and "expires_days" in reply.json()["error"], reply.text
    assert dump() == before


@pytest.mark.postgres
@pytest.mark.parametrize("configured", ["database", "role", "url"])
def test_postgresql_reads_and_writes_whatever_the_date_style(postgres_server, configured):
    name = "ds_" + uuid.uuid4().hex[:10]
    postgres_server.execute(f"CREATE DATABASE {name}")
    url = urlunsplit(urlsplit(postgres_server.url)._replace(path=f"/{name}"))
    role = urlsplit(postgres_server.url).username
    if configured == "database":
        postgres_server.execute(f"ALTER DATABASE {name} SET DateStyle = 'SQL, DMY'")
    elif configured == "role":
        postgres_server.execute(f'ALTER ROLE "{role}" IN DATABASE {name} SET DateStyle = \'German, DMY\'')
    else:
        parts = urlsplit(url)
        url = urlunsplit(parts._replace(query="&".join(filter(None, [parts.query, "options=-c%20DateStyle%3DPostgres%2CDMY"]))))
    try:
        with MemoryStore.open(url, embeddings=FakeEmbeddings()) as store:
            item = store.add(user_id=U, content="the ferry leaves at dawn", observed_at="2026-02-01T10:00:00Z",
                             expires_at="9999-12-31T23:59:59Z")
            store.upsert_fact(user_id=U, category="profile", key="ferry", value="at dawn",
                              expires_at="2026-01-02T03:04:05.678901Z")
            got = store.get(item, user_id=U)
            assert got.observed_at == datetime(2026, 2, 1, 10, tzinfo=UTC)
            assert got.expires_at == datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC)
            assert got.created_at.tzinfo is not None
            facts = store.get_all_facts(user_id=U, include_expired=True)
            assert [f.expires_at for f in facts] == [datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)]
            assert [i.id for i in store.list_items(user_id=U, types=["note"])] == [item]
            assert store.search("ferry", user_id=U)
            records: list[dict] = []
            store.export(records.append, all_users=True)
            assert any(r.get("observed_at") for r in records)
    finally:
        postgres_server.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
