"""PostgreSQL's full-text column reads folded text since schema version 15 (accents, compatibility
forms, the separators of addresses and numbers), as SQLite's indexes always have: an older database
is re-indexed by ``migrate``, and a database that is not UTF8 (where normalize() fails) keeps its
column and its searches as they were. The behaviour on both backends: ``tests/test_search.py``."""

from __future__ import annotations

import uuid
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest

from navi_memory import MemoryStore
from navi_memory.backends.postgres.schema import FOLDED_TSV_EXPRESSION, LATEST_VERSION, TSV_EXPRESSION

from .helpers import postgres_back_to
from .pg import drop_database

pytestmark = pytest.mark.postgres

OLD_COLUMN = f"ALTER TABLE items ADD COLUMN content_tsv tsvector GENERATED ALWAYS AS ({TSV_EXPRESSION}) STORED"


def _fts_ids(store: MemoryStore, query: str) -> list[int]:
    return [r.id for r in store.search(query, user_id="alice", min_score=0) if r.signals["fts"]]


def test_a_version_14_database_is_reindexed_with_folded_text(postgres_server):
    url = postgres_server.fresh_schema_url()
    try:
        with MemoryStore.open(url, embeddings=False) as store:
            first = store.add(user_id="alice", content="Dinner at the Café Müller, write to bob@example.com")
        postgres_back_to(url, 14, "ALTER TABLE items DROP COLUMN content_tsv", OLD_COLUMN,
                         "CREATE INDEX IF NOT EXISTS items_tsv ON items USING gin (content_tsv)")
        with MemoryStore.open(url, embeddings=False, migrate=False) as store:
            assert store.backend.schema_version() == 14 and not store.backend.fold_text
            assert _fts_ids(store, "café") == [first] and _fts_ids(store, "cafe") == []  # what 14 did
        with MemoryStore.open(url, embeddings=False) as store:
            assert store.backend.schema_version() == LATEST_VERSION and store.backend.fold_text
            assert _fts_ids(store, "cafe") == _fts_ids(store, "CAFÉ") == _fts_ids(store, "muller") == [first]
            assert _fts_ids(store, "example") == [first]
            second = store.add(user_id="alice", content="the cafe by the station")
            assert sorted(_fts_ids(store, "Café")) == [first, second]
            assert store.migrate() == LATEST_VERSION  # idempotent
        with psycopg.connect(url) as conn:
            assert conn.execute("SELECT indexdef FROM pg_indexes WHERE indexname = 'items_tsv'"
                                " AND schemaname = current_schema()").fetchone() is not None
            assert conn.execute(f"SELECT count(*) FROM items WHERE content_tsv IS DISTINCT FROM"
                                f" ({FOLDED_TSV_EXPRESSION})").fetchone() == (0,)
    finally:
        postgres_server.drop_schema(url)


def test_a_database_that_is_not_utf8_keeps_its_column_and_searches_unfolded(postgres_server):
    name = "navi_ascii_" + uuid.uuid4().hex[:12]
    with psycopg.connect(postgres_server.url, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name} ENCODING 'SQL_ASCII' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0")
    parts = urlsplit(postgres_server.url)
    url = urlunsplit(parts._replace(path="/" + name))
    try:
        with MemoryStore.open(url, embeddings=False) as store:
            assert store.backend.schema_version() == LATEST_VERSION and not store.backend.fold_text
            item = store.add(user_id="alice", content="the ferry to Bergen, then the cafe")
            assert _fts_ids(store, "Bergen") == _fts_ids(store, "cafe") == [item]
    finally:
        drop_database(postgres_server.url, url)


def test_a_search_folds_its_words_as_the_column_folds_its_text(postgres_server):
    """``fold_words`` (Python, once per search) and ``folded`` (SQL, each stored text) agree."""
    from navi_memory.backends.postgres.schema import fold_words, folded

    texts = ["Café crème", "ＦＵＬＬ", "ﬁsh", "½ ⒈ ㎏", "São Paulo", "naïve Zürich", "Ελληνικά",
             "東京 서울 がっこう", "bob@example.com", "v1.2.3", "C:\\Users\\me", "555-0100 +1", "ǅ ǈ",
             "e\u0301\u0327", "x\u20d7 y\ufe20", "<script>alert(1)</script> tea", "a<b>c"]
    with psycopg.connect(postgres_server.url) as conn:
        for text in texts:
            assert conn.execute(f"SELECT {folded('%s')}", [text]).fetchone() == (fold_words(text),), text
