"""SQLite's runner for the storage generators shared with PostgreSQL (``backends/shared``), its
``Dialect``, and the steps those generators call that SQLite writes its own way.

A call runs in one ``BEGIN IMMEDIATE`` transaction (SQLite's write lock, taken at the start: the
row and advisory locks PostgreSQL takes are not needed), or, marked ``reads``, each statement on
its own (SQLite gives one statement a consistent snapshot). Rows go back into the generator typed
as PostgreSQL's driver reads them (``rows.typed``). sqlite3 errors leave as ``StorageError``
(``translate_errors``, on every public method).
"""

from __future__ import annotations

import functools
import json
import sqlite3
from datetime import datetime, timedelta
from typing import Any, Callable, ContextManager, Sequence

from ...core.contract import NOT_INDEXED
from ...core.timeutil import from_db, to_db
from ...errors import BackendUnavailableError, StorageError
from ...vectors import to_blob
from ...sansio import Op, advance
from ..base import NewItem
from ..shared.dialect import Dialect, Native, Q, Row
from .metadata import condition_sql
from .rows import EMBED_TEXT, to_json, typed
from .vectors import VectorCache


def add_minutes(stamp: str | None, minutes: float | None) -> str | None:
    """A stored time plus ``minutes``, stored: SQLite's ``navi_add_minutes`` (its own date
    functions write another text form than ``to_db``)."""
    if stamp is None or minutes is None:
        return None
    moment = from_db(stamp)
    return None if moment is None else to_db(moment + timedelta(minutes=minutes))


def register(conn: sqlite3.Connection) -> None:
    """The functions SQLITE's statements call, on a new connection."""
    conn.create_function("navi_add_minutes", 2, add_minutes, deterministic=True)
    # SQLite's LIKE and lower() fold ASCII letters only: "école" never matched "ÉCOLE" (PostgreSQL's ILIKE does)
    conn.create_function("navi_lower", 1, lambda text: text.lower() if isinstance(text, str) else text,
                         deterministic=True)


SQLITE = Dialect(
    name="sqlite", placeholder="?", time=to_db, json=to_json, ids=lambda ids: json.dumps([int(i) for i in ids]),
    in_ids="{column} IN (SELECT value FROM json_each(%s))", plus_minutes="navi_add_minutes({time}, {minutes})",
    embed_text=EMBED_TEXT, for_update="", key_lock=None,
    null_safe_eq="{column} IS %s", like_any_case="navi_lower({column}) LIKE navi_lower(%s)", greatest="max",
    # a list of ids through the rowid: an index on user_id would test every row of the user
    item_key="i.id", item_row_key="item_id", by_id=" NOT INDEXED", metadata=condition_sql,
    first_word="substr({text}, 1, instr({text} || ' ', ' ') - 1)", json_list="json_each({column}) AS a",
    # substr, not LIKE: SQLite's LIKE ignores ASCII case
    under_namespace=lambda prefix: ("(i.namespace = %s OR substr(i.namespace, 1, %s) = %s)",
                                    [prefix, len(prefix) + 1, prefix + "."]))


def _execute(conn: sqlite3.Connection, step: Q | Native) -> Any:
    if isinstance(step, Native):
        return step.call(conn)
    if step.own_tx or step.local:
        raise TypeError("own_tx and local statements are PostgreSQL's")
    text = SQLITE.render(step.text)
    if step.many:
        return conn.executemany(text, step.params or []).rowcount
    cur = conn.execute(text, step.params or ())
    return [typed(row) for row in cur.fetchall()] if cur.description is not None else cur.rowcount


class SQLiteRunner:
    """``_run`` for the shared generators installed on ``SQLiteBackend``, and SQLite's own steps."""

    dialect = SQLITE
    _transaction: Callable[..., ContextManager[sqlite3.Connection]]  # (write): a transaction, or a savepoint in one
    _statement: Callable[[], ContextManager[sqlite3.Connection]]  # the connection for a read of one statement
    vectors: VectorCache

    def _run(self, make: Callable[[], Op[Any]], reads: bool = False) -> Any:
        with self._statement() if reads else self._transaction(write=True) as conn:
            gen = make()
            done, step = advance(gen, None)
            while not done:
                done, step = advance(gen, _execute(conn, step))
            return step

    def _reserve_item_ids(self, count: int) -> Op[list[int]]:
        """The ids AUTOINCREMENT would give the next ``count`` items (after the highest id ever
        used): no other writer inserts before them under the call's ``BEGIN IMMEDIATE``."""
        rows: list[Row] = yield Q("SELECT max(coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'items'), 0),"
                                  " (SELECT coalesce(max(id), 0) FROM items)) AS last")
        return list(range(rows[0]["last"] + 1, rows[0]["last"] + 1 + count))

    def _next_gen(self, user_id: str) -> Op[int]:
        """The user's next vector generation: rows stamped with it are what the in-memory indexes
        of every process load next (``vectors.VectorCache``)."""
        rows: list[Row] = yield Q("UPDATE users SET vec_gen = vec_gen + 1 WHERE id = %s RETURNING vec_gen", [user_id])
        gen: int = rows[0]["vec_gen"]
        return gen

    def _insert_vectors(self, ids: Sequence[int], items: Sequence[NewItem], model: str, now: datetime) -> Op[None]:
        """Each new item's vector (ready, under a new generation of its user's) or its pending row."""
        gens: dict[str, int] = {}
        for user_id in sorted({it.user_id for it in items if it.vector is not None}):
            gens[user_id] = yield from self._next_gen(user_id)
        yield Q("INSERT INTO embeddings (item_id, user_id, model, dimensions, state, vector, gen, updated_at)"
                " VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
                [(i, it.user_id, model, None if it.vector is None else int(it.vector.size),
                  "pending" if it.vector is None else "ready", None if it.vector is None else to_blob(it.vector),
                  gens.get(it.user_id, 0), to_db(now)) for i, it in zip(ids, items)], many=True)

    def _mark_stale(self, user_id: str, item_id: int, model: str | None, now: datetime) -> Op[None]:
        """Content changed: any stored vector is wrong now, whatever model made it."""
        gen, stamp = (yield from self._next_gen(user_id)), to_db(now)
        yield Q("UPDATE embeddings SET state = 'pending', vector = NULL, error = NULL, gen = %s, updated_at = %s"
                " WHERE item_id = %s", [gen, stamp, item_id])
        yield Q("DELETE FROM next_embeddings WHERE item_id = %s", [item_id])
        if model is not None:
            yield Q("INSERT INTO embeddings (item_id, user_id, model, state, gen, updated_at)"
                    " VALUES (%s, %s, %s, 'pending', %s, %s) ON CONFLICT DO NOTHING", [item_id, user_id, model, gen, stamp])

    _next_column = "vector"

    @staticmethod
    def _next_vector(vector: Any) -> bytes:
        return to_blob(vector)

    def _adopt_next(self, user_id: str, model: str, now: datetime) -> Op[None]:
        """The waiting vectors replace the user's, under a new generation (``vectors.VectorCache``)."""
        gen = yield from self._next_gen(user_id)
        yield Q("INSERT INTO embeddings (item_id, user_id, model, dimensions, state, error, vector, gen, updated_at)"
                " SELECT n.item_id, n.user_id, n.model, n.dimensions, 'ready', NULL, n.vector, %s, %s"
                " FROM next_embeddings n WHERE n.user_id = %s AND n.model = %s ON CONFLICT (item_id) DO UPDATE"
                " SET model = excluded.model, dimensions = excluded.dimensions, state = 'ready', error = NULL,"
                " vector = excluded.vector, gen = excluded.gen, updated_at = excluded.updated_at"
                " WHERE embeddings.error IS NULL OR embeddings.error <> %s",
                [gen, to_db(now), user_id, model, NOT_INDEXED])

    def _forget_vectors(self, user_id: str) -> Op[None]:
        """Drop the user's in-memory vectors. Before the commit: a search that loads them again meanwhile
        keys them by the deleted user's ``pk``, which AUTOINCREMENT never gives another user."""
        yield Native(lambda conn: self._drop_cached(conn, user_id))

    def _drop_cached(self, conn: sqlite3.Connection, user_id: str) -> None:
        row = conn.execute("SELECT pk FROM users WHERE id = ?", (user_id,)).fetchone()
        if row is not None:
            self.vectors.drop_user(row[0])

    def _not_indexed(self, user_id: str, item_id: int, model: str, now: datetime) -> Op[None]:
        """No vector for this item (a new generation: cached vectors of it are dropped)."""
        gen = yield from self._next_gen(user_id)
        yield Q("DELETE FROM next_embeddings WHERE item_id = %s", [item_id])
        yield Q("INSERT INTO embeddings (item_id, user_id, model, state, error, gen, updated_at)"
                " VALUES (%s, %s, %s, 'error', %s, %s, %s) ON CONFLICT (item_id) DO UPDATE SET state = 'error',"
                " error = excluded.error, vector = NULL, dimensions = NULL, gen = excluded.gen,"
                " updated_at = excluded.updated_at", [item_id, user_id, model, NOT_INDEXED, gen, to_db(now)])


def translate_errors(cls: type) -> type:
    """Wrap every public method so sqlite3 errors leave as StorageError (original chained)."""

    def wrap(fn: Any) -> Any:
        @functools.wraps(fn)
        def method(self: Any, *args: Any, **kwargs: Any) -> Any:
            try:
                return fn(self, *args, **kwargs)
            except sqlite3.OperationalError as exc:
                if "unable to open" in str(exc) or "disk I/O" in str(exc):
                    raise BackendUnavailableError(f"cannot open SQLite database {self.path}: {exc}") from exc
                raise StorageError(f"SQLite error: {exc}") from exc
            except sqlite3.Error as exc:
                raise StorageError(f"SQLite error: {type(exc).__name__}: {exc}") from exc

        return method

    methods: dict[str, Any] = {}
    for klass in reversed(cls.__mro__[:-1]):  # the mixins' methods too; the class's own win
        methods.update((n, f) for n, f in vars(klass).items() if callable(f) and not n.startswith("_"))
    for name, fn in methods.items():
        setattr(cls, name, wrap(fn))
    return cls
