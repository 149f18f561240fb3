"""Schema versions 4 (household persons, promotions), 8 (the user's time zone), 9 (memory off), 10
(person devices) and 14 (the household's name and locale) on databases created by earlier versions."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

import pytest

from navi_memory import MemoryStore
from navi_memory.backends.sqlite.schema import LATEST_VERSION

from .helpers import postgres_back_to, sqlite_at_version


def _alice_at_version(tmp_path, version: int) -> str:
    """The URL of a new SQLite file at schema ``version`` with the user alice."""
    path = tmp_path / f"v{version}.db"
    conn = sqlite_at_version(path, version)
    conn.execute("INSERT INTO users (id, created_at) VALUES ('alice', '2024-01-01T00:00:00.000000Z')")
    conn.close()
    return f"sqlite:///{path}"


def test_a_version_3_sqlite_database_gets_the_household(tmp_path):
    with MemoryStore.open(_alice_at_version(tmp_path, 3), embeddings=False) as store:
        assert store.migrate() == LATEST_VERSION
        assert store.household_mode(user_id="alice") == "single"
        store.add_person("Alice", user_id="alice", aliases=["me"])
        assert store.resolve_person_ref("me", user_id="alice").display_name == "Alice"
        assert store.forget(user_id="alice")["persons"] == 1


@contextmanager
def _alice_postgres_at(server, version: int, *undo: str) -> Iterator[str]:
    """A fresh schema with an item of alice, taken back to migration ``version``; dropped after."""
    url = server.fresh_schema_url()
    try:
        with MemoryStore.open(url, embeddings=False) as store:
            store.add(user_id="alice", content="an item from before")
        postgres_back_to(url, version, *undo)
        yield url
    finally:
        server.drop_schema(url)


@pytest.mark.postgres
def test_a_version_3_postgres_schema_gets_the_household(postgres_server):
    with _alice_postgres_at(postgres_server, 3, "DROP TABLE promotions", "DROP TABLE persons",
                            "ALTER TABLE users DROP COLUMN household_mode") as url, \
            MemoryStore.open(url, embeddings=False) as store:
        assert store.backend.schema_version() == LATEST_VERSION
        assert store.household_mode(user_id="alice") == "single"
        store.add_person("Alice", user_id="alice")
        store.set_household_mode("multi", user_id="alice")
        assert store.get_person("Alice", user_id="alice").role == "primary"
        assert store.migrate() == LATEST_VERSION  # idempotent


@pytest.mark.postgres
def test_a_version_2_postgres_schema_gets_the_context_column_and_its_full_text(postgres_server):
    old_tsv = ("setweight(to_tsvector('english', coalesce(title, '')), 'A') || "
               "setweight(to_tsvector('english', content), 'B')")
    old_column = f"ALTER TABLE items ADD COLUMN content_tsv tsvector GENERATED ALWAYS AS ({old_tsv}) STORED"
    with _alice_postgres_at(postgres_server, 2, "ALTER TABLE items DROP COLUMN content_tsv",
                            "ALTER TABLE items DROP COLUMN context", old_column) as url, \
            MemoryStore.open(url, embeddings=False) as store:
        assert store.backend.schema_version() == LATEST_VERSION
        store.add(user_id="alice", content="the ferry to Bergen", context="we talked about fjords")
        assert [r["content"] for r in store.search("fjords", user_id="alice", min_score=0)] == ["the ferry to Bergen"]
        assert store.search("before", user_id="alice", min_score=0)[0]["content"] == "an item from before"
        assert store.migrate() == LATEST_VERSION  # idempotent


def test_a_version_7_sqlite_database_gets_the_users_time_zone(tmp_path):
    with MemoryStore.open(_alice_at_version(tmp_path, 7), embeddings=False) as store:
        assert store.backend.schema_version() == LATEST_VERSION
        assert store.user_timezone(user_id="alice") is None
        assert store.set_user_timezone("Europe/Lisbon", user_id="alice") == "Europe/Lisbon"
        assert store.list_users()[0]["timezone"] == "Europe/Lisbon"


@pytest.mark.postgres
def test_a_version_7_postgres_schema_gets_the_users_time_zone(postgres_server):
    with _alice_postgres_at(postgres_server, 7, "ALTER TABLE users DROP COLUMN timezone") as url, \
            MemoryStore.open(url, embeddings=False) as store:
        assert store.backend.schema_version() == LATEST_VERSION
        assert store.user_timezone(user_id="alice") is None
        store.set_user_timezone("Asia/Tokyo", user_id="alice")
        assert store.list_users()[0]["timezone"] == "Asia/Tokyo"
        assert store.migrate() == LATEST_VERSION  # idempotent


def test_a_version_8_sqlite_database_gets_memory_off(tmp_path):
    with MemoryStore.open(_alice_at_version(tmp_path, 8), embeddings=False) as store:
        assert store.backend.schema_version() == LATEST_VERSION
        assert store.memory_enabled(user_id="alice") is True
        store.set_memory_enabled(False, user_id="alice")
        assert store.list_users()[0]["memory_off_since"] is not None


def test_a_version_8_postgres_schema_gets_memory_off(postgres_server):
    with _alice_postgres_at(postgres_server, 8, "ALTER TABLE users DROP COLUMN memory_off_since") as url, \
            MemoryStore.open(url, embeddings=False) as store:
        assert store.backend.schema_version() == LATEST_VERSION
        assert store.memory_enabled(user_id="alice") is True
        store.set_memory_enabled(False, user_id="alice")
        assert store.list_users()[0]["memory_off_since"] is not None


def test_a_version_9_sqlite_database_gets_person_devices(tmp_path):
    url = _alice_at_version(tmp_path, 9)
    with MemoryStore.open(url, embeddings=False) as store:
        assert store.backend.schema_version() == LATEST_VERSION
        store.add_person("Tom", user_id="alice", devices=["tom-phone"])
        assert store.infer_speaker(None, user_id="alice", device="tom-phone").speaker.display_name == "Tom"


def test_a_version_9_postgres_schema_gets_person_devices(postgres_server):
    with _alice_postgres_at(postgres_server, 9, "ALTER TABLE persons DROP COLUMN devices") as url, \
            MemoryStore.open(url, embeddings=False) as store:
        assert store.backend.schema_version() == LATEST_VERSION
        store.add_person("Tom", user_id="alice", devices=["tom-phone"])
        assert store.get_person("Tom", user_id="alice").devices == ["tom-phone"]


def test_a_version_13_sqlite_database_gets_the_households_name_and_locale(tmp_path):
    url = _alice_at_version(tmp_path, 13)
    with MemoryStore.open(url, embeddings=False) as store:
        assert store.backend.schema_version() == LATEST_VERSION >= 14
        assert store.household(user_id="alice")["display_name"] is None  # the user from before: none recorded
        store.put_household(user_id="alice", display_name="The Millers", locale="en-US")
        store.set_theme("travel", user_id="alice", description="Trips and bookings.")
    with MemoryStore.open(url, embeddings=False, read_only=True) as store:
        household = store.household(user_id="alice")
        assert (household["display_name"], household["locale"]) == ("The Millers", "en-US")
        assert store.list_themes(user_id="alice")[0].description == "Trips and bookings."


def test_a_version_13_postgres_schema_gets_the_households_name_and_locale(postgres_server):
    with _alice_postgres_at(postgres_server, 13, "ALTER TABLE users DROP COLUMN household_name",
                            "ALTER TABLE users DROP COLUMN locale") as url, \
            MemoryStore.open(url, embeddings=False) as store:
        assert store.backend.schema_version() == LATEST_VERSION
        assert store.household(user_id="alice")["locale"] is None
        made = store.put_household(user_id="alice", display_name="The Millers", locale="pt_BR")
        assert (made["display_name"], made["locale"]) == ("The Millers", "pt-BR")
        assert store.search("before", user_id="alice", min_score=0)[0]["content"] == "an item from before"
        assert store.migrate() == LATEST_VERSION  # idempotent
