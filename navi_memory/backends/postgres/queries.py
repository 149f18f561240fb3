"""PostgreSQL backend: psycopg 3 pools, pgvector HNSW, tsvector GIN, optional pg_trgm.

Each method is written once as a generator that yields ``Q`` (a query) and receives its rows;
``PostgresBackend`` runs them on a ``ConnectionPool`` and ``AsyncPostgresBackend`` on an
``AsyncConnectionPool`` — one transaction per method call (each statement on its own for the few marked
``reads``), native async on the async side.
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any, Sequence

import numpy as np
from psycopg import sql

from ...config import DatabaseURL
from ...core.contract import NOT_INDEXED
from ...errors import ValidationError
from ...sansio import Op, operation
from ..base import NewItem
from ..shared.dialect import Count, Q, Row
from ..shared.facts import FactQueries
from ..shared.embeddings import EmbeddingQueries, moving_condition
from ..shared.items import ItemQueries
from ..shared.keyed import KeyedQueries
from ..shared.search import SearchReadQueries
from ..shared.persons import PersonQueries
from ..shared.sessions import SessionQueries
from ..shared.transfer import TransferQueries
from . import citus
from . import schema as schema
from . import sql as q
from .persons import PostgresPromotionQueries
from .search import Pins, PostgresSearchQueries
from .transfer import PostgresTransferQueries

log = logging.getLogger(__name__)


TUNING = ("ef_search", "exact_below", "lexical_row_budget", "index_method", "ivfflat_probes", "ivfflat_min_rows")


# The type of the current schema's embeddings.embedding column (None: no such column), from the
# catalogue itself: the information_schema.columns view made every open of a store slower (an
# existing one's open 23 -> 16 ms at the median: benchmarks/store_open.py)
VECTOR_TYPE = ("(SELECT t.typname FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid"
               " WHERE a.attrelid = to_regclass(quote_ident(current_schema()) || '.embeddings')"
               " AND a.attname = 'embedding' AND NOT a.attisdropped)")


class PostgresQueries(PostgresSearchQueries, PostgresPromotionQueries, PostgresTransferQueries,
                      ItemQueries, KeyedQueries, FactQueries, SessionQueries, PersonQueries, EmbeddingQueries,
                      SearchReadQueries, TransferQueries):
    """The backend's logic. Subclasses provide ``_run``."""

    schema_latest = schema.LATEST_VERSION  # the version migrate() brings a database to
    dialect = q.POSTGRES
    has_vector: bool = False
    has_trgm: bool = False
    fold_text: bool = False  # the full-text column reads folded text (schema.FOLD_TEXT): searches fold theirs
    vector_error: str | None = None  # why pgvector could not be enabled
    distributed: bool = False  # a Citus coordinator with nodes for shards (known once migrate ran): tables by user
    ef_search: int = 300  # hnsw.ef_search floor per semantic query (raised to k when k is larger)
    exact_below: int = 20_000  # a user with fewer vectors than this is searched exactly when HNSW falls short
    # The full-text query selects rows by the rarest query words whose expected matches in the
    # user's items add up to at most this; the other words only score (0: no limit). 300 ranks a
    # third of the rows 1,000 did, with the same LoCoMo recall, plain and padded (docs/scaling.md).
    lexical_row_budget: int = 300
    index_method: str = "auto"  # "hnsw", "ivfflat" (pgvector < 0.5) or "auto": decided at migrate
    ivfflat_probes: int = 10  # lists searched per IVFFlat query
    ivfflat_min_rows: int = 10_000  # a model's IVFFlat index is built once it has this many vectors

    def _init_state(self, url: DatabaseURL, defer_vector_index: bool = False, **tuning: Any) -> None:
        """``tuning``: any of ``TUNING`` (``backend_options`` of ``MemoryStore.open``)."""
        unknown = sorted(set(tuning) - set(TUNING))
        if unknown:
            raise ValidationError(f"unknown PostgreSQL backend options {unknown}; known: {list(TUNING)}")
        self.url = url
        self._indexed: set[tuple[str, int]] = set()
        self.pins = Pins()
        self.defer_vector_index = defer_vector_index  # bulk loads: build_vector_index() after the load
        for name, value in tuning.items():
            if value is None:
                continue
            if name != "index_method" and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
                raise ValidationError(f"{name} must be a whole number (0 or more), not {value!r}")
            setattr(self, name, value)
        if self.index_method not in ("auto", "hnsw", "ivfflat"):
            raise ValidationError(f"index_method must be auto, hnsw or ivfflat, not {self.index_method!r}")

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.url.safe!r})"

    # -- schema -----------------------------------------------------------------------------

    @operation
    def migrate(self) -> Op[int]:
        """Create or upgrade the schema. A current schema is recognised by reads alone (no DDL, no
        lock: opening a store beside busy writers never blocks them); otherwise the steps run in
        this one transaction under an advisory lock, so concurrent openers upgrade once."""
        names = yield from self._extensions()
        if "vector" not in names:
            error = yield Q("CREATE EXTENSION IF NOT EXISTS vector", own_tx=True)
            if isinstance(error, Exception):
                self.vector_error = str(error).splitlines()[0]
            names = yield from self._extensions()
        self.has_vector, self.has_trgm = "vector" in names, "pg_trgm" in names
        if self.has_vector and self.index_method == "auto":
            rows: list[Row] = yield Q("SELECT amname FROM pg_am WHERE amname = 'hnsw'")
            self.index_method = "hnsw" if rows else "ivfflat"  # pgvector < 0.5 has IVFFlat only
        self.distributed = yield from citus.distributes(names)
        if (yield from self._schema_is_current()):
            yield from self._read_fold_text()
            return schema.LATEST_VERSION
        yield Q("SELECT pg_advisory_xact_lock(hashtext('navi_memory_migrate'))")
        yield Q("CREATE TABLE IF NOT EXISTS navi_schema_migrations (version integer PRIMARY KEY,"
                " applied_at timestamptz NOT NULL DEFAULT now())")
        recorded: list[Row] = yield Q("SELECT coalesce(max(version), 0) AS v FROM navi_schema_migrations")
        done: int = recorded[0]["v"]
        pending = [(version, statements) for version, statements in schema.MIGRATIONS if version > done]
        steps = [statement for _, statements in pending for statement in statements]
        if pending:
            recorded_versions = ", ".join(f"({int(version)})" for version, _ in pending)
            steps.append(f"INSERT INTO navi_schema_migrations (version) VALUES {recorded_versions} ON CONFLICT DO NOTHING")
        if self.distributed:  # Citus sends some DDL to its workers as the whole text it came in: one by one
            for statement in steps:
                yield Q(statement)
        elif steps:
            # all in one round trip (the simple query protocol takes several statements; with
            # VECTOR_TYPE an open on a new schema went from 130-134 to 99-100 ms at the median)
            yield Q(";\n".join(steps), script=True)
        if self.has_vector and (yield from self._vector_column()) != "vector":
            yield Q(schema.VECTOR_COLUMN)
        for statement in schema.TRIGRAM_INDEXES if self.has_trgm else []:
            yield Q(statement)
        if self.distributed:
            yield from citus.distribute((yield from citus.undistributed()))
        yield from self._read_fold_text()
        return schema.LATEST_VERSION

    def _vector_column(self) -> Op[str | None]:
        rows: list[Row] = yield Q(f"SELECT {VECTOR_TYPE} AS vector_type")
        column_type: str | None = rows[0]["vector_type"]
        return column_type

    def _read_features(self) -> Op[None]:
        """What the server offers this backend (opening without ``migrate``): the extensions, and
        whether the full-text column folds its text."""
        names = yield from self._extensions()
        self.has_vector, self.has_trgm = "vector" in names, "pg_trgm" in names
        yield from self._read_fold_text()

    def _read_fold_text(self) -> Op[None]:
        rows: list[Row] = yield Q(f"SELECT {schema.FOLD_TEXT} AS folded")
        self.fold_text = bool(rows[0]["folded"])

    def _extensions(self) -> Op[set[str]]:
        rows: list[Row] = yield Q("SELECT extname FROM pg_extension WHERE extname IN ('vector', 'pg_trgm', 'citus')")
        return {r["extname"] for r in rows}

    def _schema_is_current(self) -> Op[bool]:
        """Whether every step of ``migrate`` is already done, read from the catalogue: the latest
        version recorded, the vector column typed once pgvector is there, the trigram indexes
        built once pg_trgm is there, every table distributed on a Citus coordinator."""
        catalogue: list[Row] = yield Q(
            "SELECT to_regclass('navi_schema_migrations') IS NOT NULL AS versioned,"
            " to_regclass('items_content_trgm') IS NOT NULL AS trigram_indexed,"
            f" {VECTOR_TYPE} AS vector_type")
        state = catalogue[0]
        if not state["versioned"] or (self.has_vector and state["vector_type"] != "vector") \
                or (self.has_trgm and not state["trigram_indexed"]):
            return False
        rows: list[Row] = yield Q("SELECT coalesce(max(version), 0) AS version FROM navi_schema_migrations")
        return bool(rows[0]["version"] >= schema.LATEST_VERSION) and not (
            self.distributed and (yield from citus.undistributed()))

    @operation
    def schema_version(self) -> Op[int]:
        rows: list[Row] = yield Q("SELECT to_regclass('navi_schema_migrations') IS NOT NULL AS present")
        if not rows[0]["present"]:
            return 0
        rows = yield Q("SELECT coalesce(max(version), 0) AS v FROM navi_schema_migrations")
        version: int = rows[0]["v"]
        return version

    def _ensure_vector_index(self, model: str, dimensions: int) -> Op[None]:
        if (model, dimensions) in self._indexed or not self.has_vector or self.defer_vector_index:
            return
        if dimensions > q.HNSW_MAX_DIMENSIONS:
            self._indexed.add((model, dimensions))
            return
        if self.index_method == "ivfflat":
            # IVFFlat learns its lists from the rows present: wait until the model has enough.
            count: list[Count] = yield Q(sql.SQL("SELECT count(*) AS n FROM (SELECT 1 FROM embeddings WHERE model = %s"
                                    " AND dimensions = %s AND state = 'ready' LIMIT %s) s"),
                                         [model, dimensions, self.ivfflat_min_rows])
            if count[0]["n"] < self.ivfflat_min_rows:
                return
            statement = q.create_ivfflat_index(model, dimensions, q.ivfflat_lists(count[0]["n"]))
        else:
            statement = q.create_vector_index(model, dimensions)
        # CREATE INDEX IF NOT EXISTS takes its table lock before it finds the index: look first
        exists: list[Row] = yield Q(
            "SELECT to_regclass(%s) IS NOT NULL AS found", [q.vector_index_text(model, dimensions)])
        if exists[0]["found"]:
            self._indexed.add((model, dimensions))
            return
        error = yield Q(statement, own_tx=True)
        if isinstance(error, Exception):
            log.warning("could not create the %s index for %s (%s); searches scan exactly",
                        self.index_method, model, error)
        self._indexed.add((model, dimensions))

    @operation
    def build_vector_index(self, model: str, dimensions: int, m: int = 16, ef_construction: int = 64,
                           maintenance_work_mem: str | None = None) -> Op[bool]:
        """Build the model's vector index now (``CREATE INDEX IF NOT EXISTS``, so a no-op when it
        exists). For bulk loads: open with ``defer_vector_index=True``, load, then call this once,
        which is much faster than maintaining the index row by row. HNSW with ``m`` and
        ``ef_construction``, or IVFFlat sized to the rows present where HNSW is unavailable. False
        without pgvector or above 2,000 dimensions (searches then scan exactly)."""
        if not self.has_vector or dimensions > q.HNSW_MAX_DIMENSIONS:
            return False
        if maintenance_work_mem:
            yield Q(sql.SQL("SET LOCAL maintenance_work_mem = {}").format(sql.Literal(maintenance_work_mem)))
        if self.index_method == "ivfflat":
            count: list[Count] = yield Q("SELECT count(*) AS n FROM embeddings WHERE model = %s AND dimensions = %s"
                                         " AND state = 'ready'", [model, dimensions])
            yield Q(q.create_ivfflat_index(model, dimensions, q.ivfflat_lists(count[0]["n"])))
        else:
            yield Q(q.create_vector_index(model, dimensions, m, ef_construction))
        self._indexed.add((model, dimensions))
        return True

    # -- items ------------------------------------------------------------------------------

    def _reserve_item_ids(self, count: int) -> Op[list[int]]:
        """``count`` ids from the items sequence, in order."""
        rows: list[Row] = yield Q(
            "SELECT nextval(pg_get_serial_sequence('items', 'id')) AS id FROM generate_series(1, %s)",
            [count])
        return [r["id"] for r in rows]

    def _insert_vectors(self, ids: Sequence[int], items: Sequence[NewItem], model: str, now: datetime) -> Op[None]:
        """Each new item's vector (with its model's index) or its pending row; none without pgvector."""
        if not self.has_vector:
            return
        for dims in {int(it.vector.size) for it in items if it.vector is not None}:
            yield from self._ensure_vector_index(model, dims)
        yield Q("INSERT INTO embeddings (user_id, item_id, model, dimensions, state, embedding, updated_at)"
                " VALUES (%s, %s, %s, %s, %s, %s::vector, %s)",
                [(it.user_id, i, model, None if it.vector is None else int(it.vector.size),
                  "pending" if it.vector is None else "ready", it.vector, now)
                 for i, it in zip(ids, items)], many=True)

    def _mark_stale(self, user_id: str, item_id: int, model: str | None, now: datetime) -> Op[None]:
        yield Q("UPDATE embeddings SET state = 'pending', embedding = NULL, error = NULL, updated_at = %s"
                " WHERE user_id = %s AND item_id = %s", [now, user_id, item_id])
        yield Q("DELETE FROM next_embeddings WHERE user_id = %s AND item_id = %s", [user_id, item_id])
        if model is not None and self.has_vector:
            yield Q("INSERT INTO embeddings (user_id, item_id, model, state, updated_at) VALUES (%s, %s, %s, 'pending', %s)"
                    " ON CONFLICT DO NOTHING", [user_id, item_id, model, now])

    def _not_indexed(self, user_id: str, item_id: int, model: str, now: datetime) -> Op[None]:
        yield Q("DELETE FROM next_embeddings WHERE user_id = %s AND item_id = %s", [user_id, item_id])
        yield Q("INSERT INTO embeddings (user_id, item_id, model, state, error, updated_at)"
                " VALUES (%s, %s, %s, 'error', %s, %s) ON CONFLICT (user_id, item_id) DO UPDATE SET state = 'error',"
                " error = excluded.error, embedding = NULL, dimensions = NULL, updated_at = excluded.updated_at",
                [user_id, item_id, model, NOT_INDEXED, now])

    _next_column = "embedding"

    @staticmethod
    def _next_vector(vector: np.ndarray) -> list[float]:
        return [float(x) for x in vector]  # real[]: the waiting vectors are never searched

    def _adopt_next(self, user_id: str, model: str, now: datetime) -> Op[None]:
        """The waiting vectors replace the user's (with the model's index, made by the first move)."""
        sizes: list[Row] = yield Q("SELECT DISTINCT dimensions FROM next_embeddings WHERE user_id = %s AND model = %s",
                                   [user_id, model])
        for row in sizes:
            yield from self._ensure_vector_index(model, row["dimensions"])
        yield Q("INSERT INTO embeddings (user_id, item_id, model, dimensions, state, error, embedding, updated_at)"
                " SELECT n.user_id, n.item_id, n.model, n.dimensions, 'ready', NULL, n.embedding::vector, %s"
                " FROM next_embeddings n WHERE n.user_id = %s AND n.model = %s"
                " ON CONFLICT (user_id, item_id) DO UPDATE SET model = excluded.model, dimensions = excluded.dimensions,"
                " state = 'ready', error = NULL, embedding = excluded.embedding, updated_at = excluded.updated_at"
                " WHERE embeddings.error IS DISTINCT FROM %s", [now, user_id, model, NOT_INDEXED])

    # -- users ---------------------------------------------------------------------------

    def _forget_vectors(self, user_id: str) -> Op[None]:
        """Nothing to drop: the vectors live in the table only."""
        return None
        yield  # a generator

    # -- embeddings -------------------------------------------------------------------------

    @operation
    def store_embeddings(self, model: str, results: Sequence[tuple[int, str, str, np.ndarray | None, str | None]],
                         now: datetime, moving_to: str | None = None) -> Op[int]:
        if not self.has_vector or not results:
            return 0
        moving, moving_params = moving_condition(model, moving_to)
        for dims in {int(r[3].size) for r in results if r[3] is not None}:
            yield from self._ensure_vector_index(model, dims)
        stored = 0
        for item_id, user_id, text, vector, error in results:
            written: int = yield Q(
                sql.SQL("INSERT INTO embeddings (user_id, item_id, model, dimensions, state, error, embedding, updated_at)"
                        " SELECT i.user_id, i.id, %s, %s, %s, %s, %s::vector, %s FROM items i"
                        " WHERE i.user_id = %s AND i.id = %s AND {t} = %s{moving}"
                        " ON CONFLICT (user_id, item_id) DO UPDATE SET model = excluded.model,"
                        " dimensions = excluded.dimensions, state = excluded.state, error = excluded.error,"
                        " embedding = excluded.embedding, updated_at = excluded.updated_at").format(
                            t=q.EMBED_TEXT, moving=sql.SQL(moving)),  # moving: a constant
                [model, None if vector is None else int(vector.size), "error" if vector is None else "ready", error,
                 vector, now, user_id, item_id, text, *moving_params])
            stored += written
        return stored

    @operation
    def reset_embeddings(self, user_id: str | None, now: datetime) -> Op[int]:
        user = sql.SQL("") if user_id is None else sql.SQL(" AND user_id = %s")
        reset: int = yield Q(sql.SQL("UPDATE embeddings SET state = 'pending', embedding = NULL, error = NULL,"
                                     " updated_at = %s WHERE (error IS NULL OR error <> %s)") + user,
                             [now, NOT_INDEXED] + ([] if user_id is None else [user_id]))
        return reset
