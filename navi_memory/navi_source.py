"""Read the memory tables of an existing Navi database as export records, for ``import_records``.

Navi keeps ``memory_facts`` (category/key/value, and in its PostgreSQL flavour user_id, source,
confidence, expires_at, last_verified_at, source_context, source_session_id, an ``embedding``
vector), ``memory_summary`` (one row, or one per user) and ``session_memory_state`` (session_id,
extracted_at). Columns are discovered, so SQLite, PostgreSQL with or without the pgvector
columns all read the same way; the vectors are never read (navi-memory embeds its own text).
Rows become ``fact``, ``summary`` and ``session`` records; the import's natural keys make a
second migration add nothing. Reading is blocking (a one-off admin job).
"""

from __future__ import annotations

import os
import re
import sqlite3
from contextlib import contextmanager
from datetime import datetime, timezone
from typing import Any, Iterator, Sequence

from .core import validation as v
from .config import DatabaseURL, parse_url
from .errors import ConfigurationError, StorageError, ValidationError
from .models import FACT_CATEGORIES, FACT_SOURCES
from .core.contract import DEFAULT_CONFIDENCE, SOURCE_CONFIDENCE
from .transfer_format import FORMAT, VERSION

FACT_COLUMNS = ("id", "user_id", "category", "key", "value", "source", "confidence", "source_context",
                "source_session_id", "expires_at", "last_verified_at", "created_at", "updated_at")
SUMMARY_TEXT_COLUMNS = ("content", "summary", "text")
SESSION_TABLES = ("sessions", "navi_sessions")  # where a session's owner is found when the state table has none
TIME_COLUMNS = ("expires_at", "last_verified_at", "created_at", "updated_at", "extracted_at")
_SECONDS = re.compile(r"-?\d+(\.\d+)?")


def _when(value: Any) -> str | None:
    """A Navi timestamp (datetime, ISO or ``YYYY-MM-DD HH:MM:SS`` text, Unix seconds as a number or
    digits) as ISO 8601 UTC, checked as every timestamp entering the store is (``validation.when``):
    out of the years 1 to 9999 in UTC, or unreadable, is a ``ValidationError``."""
    if value is None or value == "":
        return None
    if isinstance(value, str) and _SECONDS.fullmatch(value.strip()):
        value = float(value)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        try:
            return datetime.fromtimestamp(value, timezone.utc).isoformat()
        except (OverflowError, OSError, ValueError) as exc:
            raise ValidationError(f"timestamp {value!r} (Unix seconds) is outside 0001-01-01 .. 9999-12-31"
                                  " in UTC") from exc
    if not isinstance(value, (str, datetime)):
        raise ValidationError(f"unreadable timestamp {value!r}")
    if isinstance(value, str):
        value = value.strip().replace(" ", "T", 1)
    when = v.when(value, "timestamp")
    return None if when is None else when.isoformat()


@contextmanager
def _row(label: str) -> Iterator[None]:
    """A ValidationError while turning one source row into a record names the row."""
    try:
        yield
    except ValidationError as exc:
        raise ValidationError(f"{label}: {exc}") from exc


class _Reader:
    """Column discovery and streaming reads on a SQLite file or a PostgreSQL database."""

    def __init__(self, url: DatabaseURL) -> None:
        self.url = url

    @contextmanager
    def connect(self) -> Iterator[Any]:
        if self.url.scheme == "sqlite":
            try:
                conn = sqlite3.connect(f"file:{self.url.path}?mode=ro", uri=True)
            except sqlite3.Error as exc:
                raise StorageError(f"cannot open the Navi database {self.url}: {exc}") from exc
            try:
                yield conn
            finally:
                conn.close()
            return
        try:
            import psycopg
        except ImportError as exc:
            raise ConfigurationError("reading a PostgreSQL Navi database needs the postgres extra") from exc
        from .backends.postgres.connect import pin_session, split_url
        from .backends.postgres.pool import _translate

        try:  # read in UTC and ISO, whatever the database's zone and date style
            conninfo, threshold = split_url(self.url)
            with psycopg.connect(conninfo, prepare_threshold=threshold) as pg_conn:
                pin_session(pg_conn)
                yield pg_conn
        except psycopg.Error as exc:
            raise _translate(self.url, exc) from exc

    def columns(self, conn: Any, table: str) -> list[str]:
        if self.url.scheme == "sqlite":
            return [r[1] for r in conn.execute("SELECT * FROM pragma_table_info(?)", (table,))]
        rows = conn.execute("SELECT attname FROM pg_attribute WHERE attrelid = to_regclass(%s) AND attnum > 0"
                            " AND NOT attisdropped ORDER BY attnum", (table,)).fetchall()
        return [r[0] for r in rows]

    def rows(self, conn: Any, table: str, columns: Sequence[str], order: Sequence[str]) -> Iterator[dict[str, Any]]:
        """Every row of ``table`` (only ``columns``), streamed in ``order``; names come from the
        table's own catalogue and are quoted."""
        if self.url.scheme == "sqlite":
            quoted = ", ".join(f'"{c}"' for c in columns)
            by = ", ".join(f'"{c}"' for c in order)
            cursor = conn.execute(f'SELECT {quoted} FROM "{table}" ORDER BY {by}')
            for row in cursor:
                yield dict(zip(columns, row))
            return
        from psycopg import sql

        # timestamps as text: psycopg cannot hold infinity, BC or years past 9999 (a DataError on
        # the whole read); ``_when`` refuses them naming the row
        fields = [sql.SQL("{}::text").format(sql.Identifier(c)) if c in TIME_COLUMNS else sql.Identifier(c)
                  for c in columns]
        query = sql.SQL("SELECT {} FROM {} ORDER BY {}").format(
            sql.SQL(", ").join(fields), sql.Identifier(table),
            sql.SQL(", ").join(map(sql.Identifier, order)))
        with conn.cursor(name="navi_memory_migration") as cursor:  # server-side: rows arrive in chunks
            cursor.execute(query)
            for row in cursor:
                yield dict(zip(columns, row))


class NaviSource:
    """A re-readable source of (label, record) pairs from a Navi database (header first).

    ``user``: the user of rows without one (Navi's SQLite flavour has no user_id column).
    ``skipped`` counts rows that could not become records, by reason (filled while reading)."""

    def __init__(self, url: str, user: str | None = None) -> None:
        if "://" not in url:  # a bare path is a SQLite file
            url = f"sqlite:///{os.path.expanduser(url)}"
        self.url = parse_url(url)
        self.user = None if user is None else v.user_id(user)  # exact or refused, as every user id
        self.skipped: dict[str, int] = {}
        self._reader = _Reader(self.url)

    def __call__(self) -> Iterator[tuple[str, dict[str, Any]]]:
        self.skipped = {}
        yield "header", {"format": FORMAT, "version": VERSION, "embedding_model": None, "with_vectors": False,
                         "record_types": ["fact", "summary", "session"], "source": "navi"}
        with self._reader.connect() as conn:
            tables = {t: self._reader.columns(conn, t) for t in
                      ("memory_facts", "memory_summary", "session_memory_state", *SESSION_TABLES)}
            if not tables["memory_facts"]:
                raise ValidationError(f"{self.url} has no memory_facts table: not a Navi database")
            yield from self._facts(conn, tables["memory_facts"])
            yield from self._summaries(conn, tables["memory_summary"])
            yield from self._sessions(conn, tables)

    def _skip(self, reason: str) -> None:
        self.skipped[reason] = self.skipped.get(reason, 0) + 1

    def _owner(self, row: dict[str, Any]) -> str | None:
        owner = row.get("user_id")
        return self.user if owner is None else str(owner)

    def _facts(self, conn: Any, columns: list[str]) -> Iterator[tuple[str, dict[str, Any]]]:
        present = [c for c in FACT_COLUMNS if c in columns]
        order = ["id"] if "id" in present else ["category", "key"]
        now = datetime.now(timezone.utc).isoformat()
        for number, row in enumerate(self._reader.rows(conn, "memory_facts", present, order), 1):
            owner = self._owner(row)
            key, value = str(row.get("key") or "").strip(), str(row.get("value") or "").strip()
            if owner is None:
                self._skip("fact without a user (give --navi-user)")
                continue
            if not key or not value:
                self._skip("fact with an empty key or value")
                continue
            category = str(row.get("category") or "other").strip().lower()
            if category not in FACT_CATEGORIES:  # kept in the key, so nothing is lost
                category, key = "other", f"{category}/{key}"
            source, context = row.get("source"), row.get("source_context")
            if source not in FACT_SOURCES:
                if source:
                    context = f"{context} (Navi source: {source})" if context else f"Navi source: {source}"
                source = "conversation"
            confidence = row.get("confidence")
            confidence = SOURCE_CONFIDENCE.get(source, DEFAULT_CONFIDENCE) if confidence is None \
                else max(0, min(100, round(float(confidence))))
            label = f"memory_facts row {row.get('id', number)}"
            with _row(label):
                updated = _when(row.get("updated_at")) or _when(row.get("created_at")) or now
                record = {
                    "type": "fact", "user_id": owner, "category": category, "key": key, "value": value,
                    "source": source, "confidence": confidence, "source_context": context,
                    "source_session_id": None if row.get("source_session_id") is None else str(row["source_session_id"]),
                    "expires_at": _when(row.get("expires_at")), "last_verified_at": _when(row.get("last_verified_at")),
                    "created_at": _when(row.get("created_at")) or updated, "updated_at": updated}
            yield label, record

    def _summaries(self, conn: Any, columns: list[str]) -> Iterator[tuple[str, dict[str, Any]]]:
        text = next((c for c in SUMMARY_TEXT_COLUMNS if c in columns), None)
        if text is None:
            return
        present = [c for c in ("id", "user_id", text, "created_at", "updated_at") if c in columns]
        order: list[str] = (["id"] if "id" in present
                            else [c for c in ("user_id", "updated_at") if c in present] or [text])
        for number, row in enumerate(self._reader.rows(conn, "memory_summary", present, order), 1):
            owner = self._owner(row)
            if owner is None or not str(row.get(text) or "").strip():
                self._skip("summary without a user or text")
                continue
            label = f"memory_summary row {row.get('id', row.get('user_id', number))}"
            with _row(label):
                when = _when(row.get("updated_at")) or _when(row.get("created_at")) or datetime.now(timezone.utc).isoformat()
            yield label, {"type": "summary", "user_id": owner, "content": str(row[text]), "created_at": when}

    def _session_owners(self, conn: Any, tables: dict[str, list[str]]) -> dict[str, str]:
        for table in SESSION_TABLES:
            if {"id", "user_id"} <= set(tables[table]):
                return {str(r["id"]): str(r["user_id"]) for r in
                        self._reader.rows(conn, table, ["id", "user_id"], ["id"]) if r["user_id"] is not None}
        return {}

    def _sessions(self, conn: Any, tables: dict[str, list[str]]) -> Iterator[tuple[str, dict[str, Any]]]:
        columns = tables["session_memory_state"]
        if "session_id" not in columns:
            return
        owners = {} if "user_id" in columns else self._session_owners(conn, tables)
        present = [c for c in ("session_id", "user_id", "extracted_at") if c in columns]
        for row in self._reader.rows(conn, "session_memory_state", present, ["session_id"]):
            sid = str(row["session_id"])
            owner = self._owner(row) if "user_id" in columns else owners.get(sid, self.user)
            if owner is None:
                self._skip("session whose user is unknown")
                continue
            with _row(f"session_memory_state {sid}"):
                extracted = _when(row.get("extracted_at"))
            yield f"session_memory_state {sid}", {
                "type": "session", "user_id": owner, "session_id": sid, "state": "extracted" if extracted else "open",
                "extracted_at": extracted, "updated_at": extracted or datetime.now(timezone.utc).isoformat()}
