"""SQLite backend: one file, WAL, FTS5 (external content + triggers), numpy vectors in memory.

Connections are per thread (WAL lets readers run beside one writer); writes take ``BEGIN
IMMEDIATE`` so two writers queue on the busy timeout instead of failing on upgrade.
"""

from __future__ import annotations

import sqlite3
import threading
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, ContextManager, Iterator, Sequence
from urllib.parse import quote

import numpy as np

from ... import ann
from ...core.contract import NOT_INDEXED
from ...errors import SchemaError, ValidationError
from ...core.timeutil import to_db
from ...vectors import to_blob
from . import fresh_schema, lexicon
from .schema import LATEST_VERSION
from .persons import SQLitePromotion
from .search import SQLiteSearch
from .transfer import SQLiteTransfer
from .vectors import VectorCache
from .runner import SQLITE, SQLiteRunner, register, translate_errors
from ..shared.facts import FactQueries
from ..shared.embeddings import EmbeddingQueries, moving_condition
from ..shared.items import ItemQueries
from ..shared.keyed import KeyedQueries
from ..shared.search import SearchReadQueries
from ..shared.persons import PersonQueries
from ..shared.sessions import SessionQueries
from ..shared.transfer import TransferQueries
from ...sansio import install
from .rows import EMBED_TEXT

if TYPE_CHECKING:  # what ``install`` below makes of the shared generators: the Protocol's methods
    from ..base import (EmbeddingStore, FactStore, ItemStore, KeyedStore, Lifecycle, PersonStore, SearchReads,
                        SessionStore, Transfer)

    class _Shared(ItemStore, KeyedStore, FactStore, SessionStore, PersonStore, EmbeddingStore, Transfer, Lifecycle,
                  SearchReads): ...
else:
    class _Shared(ItemQueries, KeyedQueries, FactQueries, SessionQueries, PersonQueries, EmbeddingQueries,
                  TransferQueries, SearchReadQueries): ...


class SQLiteBackend(SQLitePromotion, SQLiteTransfer, SQLiteSearch, SQLiteRunner, _Shared):
    schema_latest = LATEST_VERSION  # the version migrate() brings a database to
    has_vector = True  # vectors live in the file (blobs) and in memory: always available
    vector_error: str | None = None

    def __init__(self, path: str, busy_timeout_ms: int = 30_000, vector_cache_bytes: int = 1 << 30,
                 create: bool = True, lexical_row_budget: int | None = None,
                 ann_from: int | None = ann.ANN_FROM) -> None:
        """``create=False`` (read-only opens): a missing file is a ``SchemaError``, never created.
        ``ann_from``: live vectors of one user from which an approximate graph serves semantic
        candidates once its recall check passes (needs ``usearch``; None: always the exact scan).
        ``lexical_row_budget`` (approximate, off by default): rank only rows holding one of the rarest
        query terms whose rows add up to this budget (see ``SQLiteSearch._rare_terms``)."""
        for name, rows in (("ann_from", ann_from), ("lexical_row_budget", lexical_row_budget)):
            if rows is not None and (isinstance(rows, bool) or not isinstance(rows, int) or rows < 0):
                raise ValidationError(f"{name} must be a whole number of rows (0 or more), or None")
        self.path = path
        self.create = create
        self.busy_timeout_ms = busy_timeout_ms
        self._memory = path == ":memory:"
        self._local = threading.local()
        self._shared: sqlite3.Connection | None = None
        self._shared_lock = threading.RLock()
        self._all: list[sqlite3.Connection] = []
        self._all_lock = threading.Lock()
        self.vectors = VectorCache(vector_cache_bytes, ann_from)
        self.lexical_row_budget = lexical_row_budget
        if not self._memory and create:
            Path(path).expanduser().parent.mkdir(parents=True, exist_ok=True)
        elif not self._memory and not Path(path).expanduser().is_file():
            raise SchemaError(f"no navi-memory schema at {path}: the file does not exist, and nothing was created"
                              " (navi-memory migrate creates it)", empty=True)

    def __repr__(self) -> str:
        return f"SQLiteBackend({self.path!r})"

    # -- connections and transactions -------------------------------------------------------

    def _open(self) -> sqlite3.Connection:
        target = ":memory:" if self._memory else str(Path(self.path).expanduser())
        if not self.create and not self._memory:  # never create the file, even if it went away meanwhile
            target = f"file:{quote(str(Path(target).resolve()))}?mode=rw"
        conn = sqlite3.connect(target, timeout=self.busy_timeout_ms / 1000, isolation_level=None,
                               check_same_thread=False, uri=not self.create and not self._memory)
        conn.row_factory = sqlite3.Row
        conn.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout_ms)}")
        conn.execute("PRAGMA foreign_keys = ON")
        lexicon.register(conn)  # the function the items triggers call (the per-user lexical index)
        register(conn)  # the functions the shared generators' statements call
        if not self._memory:
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = NORMAL")
        with self._all_lock:
            self._all.append(conn)
        return conn

    @contextmanager
    def _connection(self) -> Iterator[sqlite3.Connection]:
        if self._memory:
            with self._shared_lock:
                if self._shared is None:
                    self._shared = self._open()
                yield self._shared
            return
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._local.conn = self._open()
        yield conn

    @contextmanager
    def _transaction(self, write: bool) -> Iterator[sqlite3.Connection]:
        """A transaction, or a savepoint when one is already open on this connection."""
        with self._connection() as conn:
            if conn.in_transaction:
                conn.execute("SAVEPOINT nested")
                try:
                    yield conn
                except BaseException:
                    conn.execute("ROLLBACK TO nested")
                    conn.execute("RELEASE nested")
                    raise
                conn.execute("RELEASE nested")
                return
            conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
            try:
                yield conn
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")

    def _statement(self) -> ContextManager[sqlite3.Connection]:
        """The connection for a read of ONE statement: SQLite gives it a consistent snapshot of its
        own, so the BEGIN and COMMIT round a read transaction would add are saved (in a transaction
        already open on this thread, the statement is part of it)."""
        return self._connection()

    def close(self) -> None:
        with self._all_lock:
            conns, self._all = self._all, []
        for conn in conns:  # each was used by one thread only; closing from here is safe
            conn.close()
        self._shared = None
        self._local = threading.local()
        self.vectors.clear()

    def migrate(self) -> int:
        with self._transaction(write=True) as conn:
            conn.execute(fresh_schema.CREATE_VERSIONS_TABLE)
            new = fresh_schema.is_new(conn)
            if new and fresh_schema.create(conn):  # the schema the first new database got, in one step
                return LATEST_VERSION
            done = {r[0] for r in conn.execute("SELECT version FROM schema_migrations")}
            fresh_schema.apply_migrations(conn, done)
            if new:
                fresh_schema.learn(conn)
        return LATEST_VERSION

    def schema_version(self) -> int:
        with self._transaction(write=False) as conn:
            exists = conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'schema_migrations'").fetchone()
            if not exists:
                return 0
            version: int = conn.execute("SELECT coalesce(max(version), 0) FROM schema_migrations").fetchone()[0]
            return version

    # -- vectors: blobs, and the generation the in-memory indexes follow ---------------------

    @staticmethod
    def _bump_gen(conn: sqlite3.Connection, user_id: str) -> int:
        conn.execute("UPDATE users SET vec_gen = vec_gen + 1 WHERE id = ?", (user_id,))
        row = conn.execute("SELECT vec_gen FROM users WHERE id = ?", (user_id,)).fetchone()
        # a user a concurrent forget deleted has no rows left to store vectors for
        return int(row[0]) if row is not None else 0

    # -- embeddings -------------------------------------------------------------------------

    def store_embeddings(self, model: str, results: Sequence[tuple[int, str, str, np.ndarray | None, str | None]],
                         now: datetime, moving_to: str | None = None) -> int:
        """Store (item_id, user_id, embedded_text, vector or None, error) rows; an item whose text changed
        since it was read (or that was deleted) is skipped, and so is one whose user's searches no
        longer read ``model`` (``moving_condition``)."""
        stamp, stored = to_db(now), 0
        moving, moving_params = moving_condition(model, moving_to)
        with self._transaction(write=True) as conn:
            gens = {u: self._bump_gen(conn, u) for u in {r[1] for r in results}}
            for item_id, user_id, text, vector, error in results:
                cur = conn.execute(
                    "INSERT INTO embeddings (item_id, user_id, model, dimensions, state, error, vector, gen, updated_at)"
                    f" SELECT i.id, i.user_id, ?, ?, ?, ?, ?, ?, ? FROM items i WHERE i.id = ? AND i.user_id = ? AND {EMBED_TEXT} = ?"
                    + SQLITE.render(moving) +
                    " ON CONFLICT (item_id) DO UPDATE SET model = excluded.model, dimensions = excluded.dimensions,"
                    " state = excluded.state, error = excluded.error, vector = excluded.vector, gen = excluded.gen,"
                    " updated_at = excluded.updated_at",
                    (model, None if vector is None else int(vector.size), "error" if vector is None else "ready",
                     error, None if vector is None else to_blob(vector), gens[user_id], stamp, item_id, user_id, text,
                     *moving_params))
                stored += cur.rowcount
        return stored

    def reset_embeddings(self, user_id: str | None, now: datetime) -> int:
        stamp = to_db(now)
        with self._transaction(write=True) as conn:
            # an unknown user has no row to bump (and nothing to reset)
            users = [r[0] for r in conn.execute("SELECT id FROM users WHERE ? IS NULL OR id = ?", (user_id, user_id))]
            count = 0
            for uid in users:
                gen = self._bump_gen(conn, uid)
                count += conn.execute("UPDATE embeddings SET state = 'pending', vector = NULL, error = NULL, gen = ?,"
                                      " updated_at = ? WHERE user_id = ? AND (error IS NULL OR error != ?)",
                                      (gen, stamp, uid, NOT_INDEXED)).rowcount
        return count


install(SQLiteBackend, ItemQueries, sync=True)
install(SQLiteBackend, KeyedQueries, sync=True)
install(SQLiteBackend, FactQueries, sync=True)
install(SQLiteBackend, SessionQueries, sync=True)
install(SQLiteBackend, PersonQueries, sync=True)
install(SQLiteBackend, EmbeddingQueries, sync=True)
install(SQLiteBackend, TransferQueries, sync=True)
install(SQLiteBackend, SearchReadQueries, sync=True)
translate_errors(SQLiteBackend)
