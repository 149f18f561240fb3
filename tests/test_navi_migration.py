"""Migration from an existing Navi database (``import --from-navi``): its SQLite flavour (one user,
no user_id) and its PostgreSQL flavour (per user, with and without the pgvector column), lossless
and idempotent, then embedded."""

from __future__ import annotations

import json
import sqlite3
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterator

import pytest

from navi_memory import MemoryStore, ValidationError
from navi_memory.cli import main
from navi_memory.navi_source import NaviSource

from .fakes import FakeEmbeddings

# Navi's SQLite flavour, written from the seeds' description: facts unique on (category, key),
# a single-row summary, and the extraction marks of sessions.
NAVI_SQLITE = """
CREATE TABLE memory_facts (id INTEGER PRIMARY KEY AUTOINCREMENT, category TEXT NOT NULL, key TEXT NOT NULL,
    value TEXT NOT NULL, created_at TEXT NOT NULL DEFAULT CURRENT_TIMESTAMP,
    updated_at TEXT NOT NULL DEFAULT CURRENT_TIMESTAMP, UNIQUE (category, key));
CREATE TABLE memory_summary (id INTEGER PRIMARY KEY CHECK (id = 1), content TEXT NOT NULL, updated_at TEXT NOT NULL);
CREATE TABLE session_memory_state (session_id TEXT PRIMARY KEY, extracted_at TEXT NOT NULL);
INSERT INTO memory_facts (category, key, value, created_at, updated_at) VALUES
    ('profile', 'name', 'Eugene', '2024-03-01 09:00:00', '2024-03-01 09:00:00'),
    ('preferences', 'prefers_dark_ui', 'true', '2024-03-02 10:30:00', '2024-04-01 08:15:00.250000'),
    ('technical', 'os', 'Debian 12', '2024-03-05T12:00:00Z', '2024-03-05T12:00:00Z'),
    ('hobbies', 'sport', 'climbing', '2024-03-06 07:00:00', '2024-03-06 07:00:00');
INSERT INTO memory_summary VALUES (1, 'Eugene uses Debian and prefers dark UIs.', '2024-04-01 08:20:00');
INSERT INTO session_memory_state VALUES ('sess-a', '2024-04-01 08:16:00'), ('sess-b', '2024-04-02 19:00:00');
"""


def _pg_ddl(vector: bool) -> list[str]:
    """Navi's PostgreSQL flavour: per-user facts with source, confidence, expiry, context and an
    optional vector(768), per-user summaries, and sessions owned by users."""
    embedding = "embedding vector(768)," if vector else ""
    return [
        "CREATE TABLE navi_users (id text PRIMARY KEY, name text)",
        "CREATE TABLE sessions (id text PRIMARY KEY, user_id text REFERENCES navi_users(id) ON DELETE CASCADE,"
        " last_active timestamptz)",
        f"""CREATE TABLE memory_facts (id serial PRIMARY KEY,
            user_id text REFERENCES navi_users(id) ON DELETE CASCADE, category text NOT NULL, key text NOT NULL,
            value text NOT NULL, {embedding} source text DEFAULT 'conversation', confidence integer DEFAULT 70,
            expires_at timestamptz, last_verified_at timestamptz, source_context text, source_session_id text,
            created_at timestamptz NOT NULL DEFAULT now(), updated_at timestamptz NOT NULL DEFAULT now(),
            UNIQUE (user_id, category, key))""",
        "CREATE TABLE memory_summary (user_id text PRIMARY KEY REFERENCES navi_users(id) ON DELETE CASCADE,"
        " content text NOT NULL, updated_at timestamptz NOT NULL DEFAULT now())",
        "CREATE TABLE session_memory_state (session_id text PRIMARY KEY, extracted_at timestamptz NOT NULL)",
    ]


def _pg_rows(conn, vector: bool) -> None:
    conn.execute("INSERT INTO navi_users VALUES ('alice', 'Alice'), ('bob', 'Bob')")
    conn.execute("INSERT INTO sessions VALUES ('s-alice', 'alice', now()), ('s-bob', 'bob', now())")
    facts = [
        ("alice", "profile", "city", "Lisbon", "user_explicit", 90, None, "said in chat", "s-alice"),
        ("alice", "technical", "server_ip", "10.0.0.5", "tool_call", 95, "2030-01-01T00:00:00+00:00",
         "from ip addr", "s-alice"),
        ("alice", "projects", "thesis", "graph databases", "web", 50, None, None, None),
        ("bob", "preferences", "tea", "green", "conversation", 80, None, None, "s-bob"),
    ]
    for f in facts:
        conn.execute("INSERT INTO memory_facts (user_id, category, key, value, source, confidence, expires_at,"
                     " source_context, source_session_id, created_at, updated_at) VALUES"
                     " (%s, %s, %s, %s, %s, %s, %s, %s, %s, '2024-05-01T10:00:00+02:00', '2024-05-02T10:00:00Z')", f)
    if vector:
        conn.execute("UPDATE memory_facts SET embedding = array_fill(0.01, ARRAY[768])::vector WHERE user_id = 'alice'")
    conn.execute("INSERT INTO memory_summary VALUES ('alice', 'Alice lives in Lisbon.', '2024-05-03T00:00:00Z'),"
                 " ('bob', 'Bob likes green tea.', '2024-05-04T00:00:00Z')")
    conn.execute("INSERT INTO session_memory_state VALUES ('s-alice', '2024-05-02T09:00:00Z'),"
                 " ('s-bob', '2024-05-02T11:00:00Z'), ('s-orphan', '2024-05-02T12:00:00Z')")


@pytest.fixture
def navi_sqlite(tmp_path: Path) -> Path:
    path = tmp_path / "navi.db"
    conn = sqlite3.connect(path)
    conn.executescript(NAVI_SQLITE)
    conn.close()
    return path


@pytest.fixture(params=[True, False], ids=["pgvector", "no-vector-column"])
def navi_postgres(request: pytest.FixtureRequest, postgres_server) -> Iterator[str]:
    import psycopg

    url = postgres_server.fresh_schema_url()
    with psycopg.connect(url, autocommit=True) as conn:
        for statement in _pg_ddl(request.param):
            conn.execute(statement)
        _pg_rows(conn, request.param)
    yield url
    postgres_server.drop_schema(url)


def _utc(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=timezone.utc)


def test_sqlite_navi_migrates_losslessly_and_only_once(store, navi_sqlite):
    source = NaviSource(str(navi_sqlite), user="eugene")
    report = store.import_records(source)
    assert report.added == {"fact": 4, "summary": 1, "session": 2}
    facts = {(f.category, f.key): f for f in store.get_all_facts(user_id="eugene")}
    assert facts[("profile", "name")].value == "Eugene"
    assert facts[("profile", "name")].created_at == _utc("2024-03-01T09:00:00")
    assert facts[("preferences", "prefers_dark_ui")].updated_at == _utc("2024-04-01T08:15:00.250000")
    assert facts[("profile", "name")].source == "conversation" and facts[("profile", "name")].confidence == 70
    assert facts[("other", "hobbies/sport")].value == "climbing"  # unknown category kept in the key
    assert store.get_summary(user_id="eugene") == "Eugene uses Debian and prefers dark UIs."
    assert store.get_extracted_at("sess-a", user_id="eugene") == _utc("2024-04-01T08:16:00")
    assert store.get_session("sess-b", user_id="eugene", messages=False).state == "extracted"
    assert store.search("climbing", user_id="eugene")[0].kind == "fact"

    again = store.import_records(source)
    assert sum(again.added.values()) == 0 and again.skipped == report.added
    assert len(store.get_all_facts(user_id="eugene")) == 4
    assert len(store.summary_history(user_id="eugene")) == 1


def test_sqlite_navi_needs_a_user(store, navi_sqlite):
    source = NaviSource(f"sqlite:///{navi_sqlite}")
    report = store.import_records(source)
    assert sum(report.added.values()) == 0
    assert source.skipped["fact without a user (give --navi-user)"] == 4


def test_not_a_navi_database(store, tmp_path):
    empty = tmp_path / "empty.db"
    sqlite3.connect(empty).close()
    with pytest.raises(ValidationError, match="memory_facts"):
        store.import_records(NaviSource(str(empty), user="u"))


@pytest.mark.postgres
def test_postgres_navi_migrates_every_column(store, navi_postgres):
    source = NaviSource(navi_postgres)
    report = store.import_records(source, user_map={"bob": "robert"})
    assert report.added == {"fact": 4, "summary": 2, "session": 2}
    assert source.skipped == {"session whose user is unknown": 1}
    facts = {f.key: f for f in store.get_all_facts(user_id="alice", include_expired=True)}
    ip = facts["server_ip"]
    assert (ip.category, ip.value, ip.source, ip.confidence) == ("technical", "10.0.0.5", "tool_call", 95)
    assert ip.expires_at == _utc("2030-01-01T00:00:00") and ip.source_context == "from ip addr"
    assert ip.source_session_id == "s-alice" and ip.created_at == _utc("2024-05-01T08:00:00")
    thesis = facts["thesis"]  # a source navi-memory does not know is kept in the context
    assert thesis.source == "conversation" and thesis.confidence == 50 and "web" in thesis.source_context
    assert store.get_all_facts(user_id="robert")[0].value == "green"
    assert store.get_summary(user_id="robert") == "Bob likes green tea."
    assert store.get_extracted_at("s-alice", user_id="alice") == _utc("2024-05-02T09:00:00")
    status = store.backfill()
    assert status.remaining == 0 and store.embedding_status()["ready"] == 4

    again = store.import_records(source, user_map={"bob": "robert"})
    assert sum(again.added.values()) == 0


@pytest.mark.postgres
def test_cli_from_navi_embeds_and_is_idempotent(navi_postgres, db_url, capsys):
    args = ["--db", db_url, "--embeddings", "hashing", "import", "--from-navi", navi_postgres, "--json"]
    assert main(args) == 0
    first = json.loads(capsys.readouterr().out)
    assert first["added"]["fact"] == 4 and first["backfill"]["remaining"] == 0
    assert main(args) == 0
    second = json.loads(capsys.readouterr().out)
    assert second["added"] == {} and second["backfill"]["embedded"] == 0
    with MemoryStore.open(db_url, embeddings=FakeEmbeddings()) as store:
        assert len(store.get_all_facts(user_id="alice", include_expired=True)) == 3


def test_cli_from_navi_sqlite(navi_sqlite, db_url, capsys):
    assert main(["--db", db_url, "--embeddings", "hashing", "import", "--from-navi", str(navi_sqlite),
                 "--navi-user", "eugene"]) == 0
    out = capsys.readouterr().out
    assert "4 fact" in out and "1 summary" in out
    assert main(["--db", db_url, "import", "--from-navi", str(navi_sqlite), "some.jsonl"]) == 2


@pytest.fixture
def navi_novector() -> Iterator[str]:
    """Navi's PostgreSQL tables on a server that has no pgvector at all."""
    import psycopg

    from .pg import drop_database, fresh_database, novector_server_url

    server = novector_server_url()
    if server is None:
        pytest.skip("no PostgreSQL without pgvector here (set NAVI_MEMORY_TEST_POSTGRES_NOVECTOR_URL)")
    url = fresh_database(server)
    with psycopg.connect(url, autocommit=True) as conn:
        for statement in _pg_ddl(vector=False):
            conn.execute(statement)
        _pg_rows(conn, vector=False)
    yield url
    drop_database(server, url)


@pytest.mark.postgres
def test_navi_on_a_server_without_pgvector(store, navi_novector):
    report = store.import_records(NaviSource(navi_novector))
    assert report.added == {"fact": 4, "summary": 2, "session": 2}
    assert store.backfill().remaining == 0
    assert sum(store.import_records(NaviSource(navi_novector)).added.values()) == 0


# -- timestamps the source cannot give: out of range or unreadable, each named by its row ------------------

BAD_SQLITE_TIMES = [
    ("UPDATE memory_facts SET created_at = '10000-01-01 00:00:00' WHERE key = 'os'", "memory_facts row 3"),
    ("UPDATE memory_facts SET updated_at = '0001-01-01T00:00:00+01:00' WHERE key = 'name'", "memory_facts row 1"),
    ("UPDATE memory_facts SET updated_at = 'yesterday' WHERE key = 'sport'", "memory_facts row 4"),
    ("UPDATE memory_facts SET updated_at = 1e20 WHERE key = 'name'", "memory_facts row 1"),
    ("UPDATE memory_facts SET updated_at = -1e15 WHERE key = 'name'", "memory_facts row 1"),
    ("UPDATE memory_summary SET updated_at = '2024-13-01 00:00:00'", "memory_summary row 1"),
    ("UPDATE memory_summary SET updated_at = 1e300", "memory_summary row 1"),
    ("UPDATE session_memory_state SET extracted_at = '99999-01-01' WHERE session_id = 'sess-b'",
     "session_memory_state sess-b"),
    ("UPDATE session_memory_state SET extracted_at = 'soon' WHERE session_id = 'sess-a'",
     "session_memory_state sess-a"),
]


@pytest.mark.parametrize("corrupt, row", BAD_SQLITE_TIMES)
def test_a_navi_timestamp_out_of_range_or_unreadable_names_its_row(store, dump, navi_sqlite, corrupt, row):
    with sqlite3.connect(navi_sqlite) as conn:
        conn.execute(corrupt)
    conn.close()
    store.add(user_id="eugene", content="kept as it was")
    before = dump()
    with pytest.raises(ValidationError) as info:
        store.import_records(NaviSource(str(navi_sqlite), user="eugene"))
    assert row in str(info.value) and "timestamp" in str(info.value)
    assert dump() == before


def test_the_cli_names_the_navi_row_with_a_bad_timestamp(store, dump, db_url, navi_sqlite, capsys):
    with sqlite3.connect(navi_sqlite) as conn:
        conn.execute("UPDATE memory_facts SET created_at = 1e20 WHERE key = 'os'")
    conn.close()
    store.add(user_id="eugene", content="kept as it was")
    before = dump()
    code = main(["--db", db_url, "--embeddings", "hashing", "import", "--from-navi", str(navi_sqlite),
                 "--navi-user", "eugene"])
    err = capsys.readouterr().err
    assert code == 2 and "memory_facts row 3" in err and "Traceback" not in err, err
    assert len(err.strip().splitlines()) == 1
    assert dump() == before


@pytest.mark.postgres
@pytest.mark.parametrize("column, value, row", [
    ("updated_at", "infinity", "memory_facts row 2"),
    ("expires_at", "-infinity", "memory_facts row 2"),
    ("created_at", "0001-01-01 00:00:00+00 BC", "memory_facts row 2"),
    ("last_verified_at", "20000-01-01 00:00:00+00", "memory_facts row 2"),
])
def test_a_postgres_navi_timestamp_python_cannot_hold_names_its_row(store, dump, navi_postgres, column, value, row):
    import psycopg

    with psycopg.connect(navi_postgres, autocommit=True) as conn:
        conn.execute(f"UPDATE memory_facts SET {column} = %s::timestamptz WHERE key = 'server_ip'", (value,))
    store.add(user_id="alice", content="kept as it was")
    before = dump()
    with pytest.raises(ValidationError) as info:
        store.import_records(NaviSource(navi_postgres))
    assert row in str(info.value) and "timestamp" in str(info.value)
    assert dump() == before


@pytest.mark.postgres
def test_a_postgres_navi_database_in_another_zone_and_date_style_reads_the_same(store, navi_postgres):
    odd = navi_postgres.replace("options=", "options=-c%20DateStyle%3DSQL%2CDMY%20-c%20TimeZone%3DAsia%2FTokyo%20", 1)
    assert odd != navi_postgres
    store.import_records(NaviSource(odd))
    facts = {f.key: f for f in store.get_all_facts(user_id="alice", include_expired=True)}
    assert facts["server_ip"].created_at == _utc("2024-05-01T08:00:00")
    assert facts["server_ip"].expires_at == _utc("2030-01-01T00:00:00")


@pytest.mark.parametrize("seconds", [1e20, -1e15, 1e300, "1e20", "253402300800"])
def test_navi_unix_seconds_past_year_9999_name_their_row(store, dump, tmp_path, seconds):
    path = tmp_path / "navi-seconds.db"
    with sqlite3.connect(path) as conn:  # a flavour keeping Unix seconds in untyped columns
        conn.execute("CREATE TABLE memory_facts (id INTEGER PRIMARY KEY, category, key, value, created_at, updated_at)")
        conn.execute("INSERT INTO memory_facts VALUES (1, 'profile', 'name', 'Eugene', 1709283600, 1709283600),"
                     " (2, 'profile', 'city', 'Porto', 1709283600, ?)", (seconds,))
    conn.close()
    store.add(user_id="eugene", content="kept as it was")
    before = dump()
    with pytest.raises(ValidationError, match="memory_facts row 2: timestamp"):
        store.import_records(NaviSource(str(path), user="eugene"))
    assert dump() == before
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE memory_facts SET updated_at = '1709283600' WHERE id = 2")
    conn.close()
    store.import_records(NaviSource(str(path), user="eugene"))
    assert {f.updated_at for f in store.get_all_facts(user_id="eugene")} == {_utc("2024-03-01T09:00:00")}
