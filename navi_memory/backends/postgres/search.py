"""PostgreSQL retrieval candidates: full-text (tsvector GIN, rarest words first), vector (HNSW or
an exact scan for small users), substring, conversation neighbours and person names. Generator
methods mixed into ``PostgresQueries``; the ranking of what they return is ``retrieval``'s."""

from __future__ import annotations

import json
import math
import time
from dataclasses import replace
from typing import Any, Callable, Iterable, Sequence, cast

import numpy as np
from psycopg import sql

from ...errors import EmbeddingError
from ...retrieval.query import select_matching_terms
from ...sansio import Op, operation, reads
from ..base import Beside, Filters, Hits, RankRow
from . import schema, sql as q
from ..shared.dialect import Count, Q, Row, row_times
from ..shared.items import RANK_COLUMNS


def _similarity(value: Any) -> float:
    """1 - cosine distance; pgvector's distance with a zero vector is NaN, which is no similarity
    (as on SQLite, whose index scores a zero vector 0)."""
    score = float(value)
    return 0.0 if math.isnan(score) else score


def _statement(query: Callable[[bool], tuple[Any, list[Any]]], f: Filters,
               beside: Beside | None) -> tuple[Any, list[Any]]:
    """A candidate query (``query(wide)``) as it is, or wide and wrapped to read what ``beside``
    asks in the same statement."""
    return query(False) if beside is None else q.hits_beside(*query(True), f, beside)


def _hit_count(rows: Sequence[Row]) -> int:
    return sum(r["score"] is not None for r in rows)  # the other rows of a wrapped query are neighbours


def _best_first(pairs: Iterable[tuple[int, float]]) -> list[tuple[int, float]]:
    """By score, best first; ties by id (the order of the full-text query; equal distances, which
    the vector index returns in any order, the same way every time)."""
    return sorted(pairs, key=lambda pair: (-pair[1], pair[0]))


def _hits(rows: Sequence[Row], score: Callable[[Any], float]) -> Hits:
    """``Hits`` from the rows of ``sql.hits_beside``, best first as the unwrapped query orders them."""
    scored = _best_first((r["id"], score(r["score"])) for r in rows if r["score"] is not None)
    # RANK_COLUMNS are the columns of a RankRow
    return Hits(scored, rows=[row_times(cast(RankRow, {c: r[c] for c in RANK_COLUMNS})) for r in rows],
                neighbours={r["id"]: list(r["adjacent"]) for r in rows if r["adjacent"]}
                if any(r["adjacent"] is not None for r in rows) else None,
                cosines={r["id"]: _similarity(r["cosine"]) for r in rows if r["cosine"] is not None})


PIN_SECONDS = 60.0  # how long a read of the planner's statistics (and a user's shortfall) is trusted
PIN_MARGIN = 3  # HNSW must be expected to yield this many times k of the user's vectors


class Pins:
    """Which users the plan-fixed HNSW statement (``sql.semantic_candidates`` with ``index_depth``)
    serves. Planned afresh for each search, the plain statement lets the planner pick, by the
    user's share of the table, the HNSW index (large users) or the user's btree and an exact sort
    (small ones); fixed to HNSW it can keep one generic plan. A user is pinned when the index
    exists and the nearest ``depth`` vectors of the index (all an HNSW scan yields) are expected
    to hold ``PIN_MARGIN`` x k of theirs: ``depth`` x their share of the table (the planner's
    statistics: a user too small to be listed is never pinned). A pinned search that falls short of k hits is
    searched again exactly, whatever the user's size, and unpins the user for ``PIN_SECONDS``: a
    stale read costs speed only, never results (the two statements return the same rows where
    the HNSW plan is taken). Thread-safe enough: single dict stores, a bounded size."""

    most = 10_000  # users remembered as fallen short, per process

    def __init__(self) -> None:
        self._tables: dict[tuple[str, int], tuple[float, bool, dict[str, float]]] = {}
        self._short: dict[tuple[str, str, int], float] = {}

    def stale(self, model: str, dims: int) -> bool:
        read = self._tables.get((model, dims))
        return read is None or time.monotonic() - read[0] > PIN_SECONDS

    def read(self, model: str, dims: int, indexed: bool, users: Sequence[str], shares: Sequence[float]) -> None:
        self._tables[(model, dims)] = (time.monotonic(), bool(indexed), dict(zip(users, map(float, shares))))

    def fell_short(self, user_id: str, model: str, dims: int) -> None:
        if len(self._short) >= self.most:
            self._short = {}
        self._short[(user_id, model, dims)] = time.monotonic()

    def serves(self, user_id: str, model: str, dims: int, depth: int, k: int, margin: float = PIN_MARGIN) -> bool:
        read = self._tables.get((model, dims))
        if read is None or not read[1]:
            return False
        short = self._short.get((user_id, model, dims))
        if short is not None and time.monotonic() - short <= PIN_SECONDS:
            return False
        return depth * read[2].get(user_id, 0.0) >= margin * k


class PostgresSearchQueries:
    """Candidate queries (mixed into ``PostgresQueries``, which holds the tuning they read)."""

    has_vector: bool
    index_method: str
    ivfflat_probes: int
    ef_search: int
    exact_below: int
    lexical_row_budget: int
    distributed: bool
    fold_text: bool
    pins: Pins

    @operation
    @reads
    def lexical_hits(self, filters: Filters, terms: Sequence[str], k: int, beside: Beside | None = None) -> Op[Hits]:
        rows = yield from self._lexical(filters, terms, k, beside)
        return Hits([(r["id"], float(r["score"])) for r in rows]) if beside is None else _hits(rows, float)

    def _lexical(self, filters: Filters, terms: Sequence[str], k: int, beside: Beside | None) -> Op[list[Row]]:
        if self.fold_text:  # as the full-text column reads its text: a term that folds to another one is one
            terms = list(dict.fromkeys(schema.fold_words(t) for t in terms))
        if not terms:
            return []
        terms = list(terms)
        match, match_all = terms, False
        if len(terms) > 1 and filters.user_id is not None and self.lexical_row_budget > 0:
            estimates: list[Row] = yield Q(*q.term_row_estimates(filters.user_id, terms))
            if estimates and estimates[0]["user_rows"] > self.lexical_row_budget:  # else all rows fit anyway
                rows_of = {r["term"]: float(r["rows"]) for r in estimates}
                match, match_all = select_matching_terms(terms, rows_of, self.lexical_row_budget)
        rows: list[Row] = yield Q(*_statement(
            lambda wide: q.lexical_candidates(filters, terms, k, match, match_all, wide), filters, beside))
        if not rows and match_all:  # no row has all the common words: the rarest one alone selects
            rarest = min(terms, key=lambda t: rows_of.get(t, 0.0))
            rows = yield Q(*_statement(lambda wide: q.lexical_candidates(filters, terms, k, [rarest], wide=wide),
                                       filters, beside))
        return rows

    @operation
    @reads
    def substring_candidates(self, filters: Filters, terms: Sequence[str], k: int) -> Op[list[tuple[int, float]]]:
        if not terms:
            return []
        cond, params = q.where(filters)
        hits, hit_params = q.substring_hits(list(terms))
        rows: list[Row] = yield Q(
            sql.SQL("SELECT id, hits FROM (SELECT i.id, i.created_at, {} AS hits FROM items i WHERE {}) s"
                    " WHERE hits > 0 ORDER BY hits DESC, created_at DESC LIMIT %s").format(hits, cond),
            [*hit_params, *params, k])
        return [(r["id"], float(r["hits"])) for r in rows]

    @operation
    @reads
    def neighbours(self, filters: Filters, ids: Sequence[int]) -> Op[dict[int, list[int]]]:
        """For each id, the items stored right before and after it in the same conversation session."""
        rows: list[Row] = yield Q(*q.session_neighbours(filters, *q.neighbour_centres(filters, list(ids))))
        out: dict[int, list[int]] = {}
        for row in rows:
            out.setdefault(row["centre"], []).append(row["id"])
        return out

    @operation
    @reads
    def semantic_hits(self, filters: Filters, model: str, query: np.ndarray, k: int,
                      beside: Beside | None = None) -> Op[Hits]:
        """``beside.query``'s cosines are not read again: a hit's score is its cosine to ``query``."""
        if beside is None:
            rows = yield from self._semantic(filters, model, query, k, None)
            return Hits(_best_first((r["id"], _similarity(r["score"])) for r in rows))
        rows = yield from self._semantic(filters, model, query, k, replace(beside, query=None))
        return _hits(rows, _similarity)

    def _semantic(self, filters: Filters, model: str, query: np.ndarray, k: int,
                  beside: Beside | None) -> Op[list[Row]]:
        if not self.has_vector:
            return []
        dims, vector, depth = int(query.size), query, max(self.ef_search, k)
        pinned = (yield from self._pinned(filters, model, dims, depth, k))

        def exact() -> Q:
            return Q(*_statement(lambda wide: q.semantic_candidates(filters, model, dims, vector, k, exact=True,
                                                                    wide=wide), filters, beside))

        rows: list[Row]
        if (yield from self._small_in_shard(filters, model, dims, depth, k)):
            rows = yield exact()
            short = False
        else:
            rows = yield Q(*_statement(lambda wide: q.semantic_candidates(
                filters, model, dims, vector, k, wide=wide, index_depth=depth if pinned else None), filters, beside),
                local=self._index_settings(depth, pinned))
            short = _hit_count(rows) < k and filters.user_id is not None
        if pinned and short:
            # The index's nearest vectors held too few of the user's (the share read was stale, or
            # theirs lie elsewhere): pinning was this backend's guess, so it must cost speed only.
            # The user's rows are compared exactly, whatever their number (the pinned rows alone
            # were returned for a user of exact_below vectors or more: 16 of 40 where exact search
            # has 40), and the user is unpinned for PIN_SECONDS.
            self.pins.fell_short(cast(str, filters.user_id), model, dims)
            rows = yield exact()
        elif short and self.exact_below > 0:
            # The HNSW scan yields the ef_search nearest of ALL users and filters them afterwards
            # (pgvector 0.6 has no iterative scan): for a user holding a small share of the index,
            # few or none survive. Such a user is small enough to compare all of its vectors.
            count: list[Count] = yield Q(*q.count_vectors(cast(str, filters.user_id), model, dims, self.exact_below))
            if count[0]["n"] < self.exact_below:
                rows = yield exact()
        if not _hit_count(rows) and filters.user_id is not None:
            other: list[Row] = yield Q(
                "SELECT dimensions FROM embeddings WHERE user_id = %s AND model = %s AND state = 'ready'"
                " AND dimensions <> %s LIMIT 1", [filters.user_id, model, int(query.size)])
            if other:
                raise EmbeddingError(f"query vector has {query.size} dimensions, stored vectors have "
                                     f"{other[0]['dimensions']}")
        return rows

    def _index_settings(self, depth: int, pinned: bool) -> tuple[tuple[str, int | str], ...]:
        """The SET LOCAL settings of a semantic statement. On Citus the worker runs the statement, and
        Citus sends it a SET LOCAL only under ``citus.propagate_set_commands = 'local'`` (its default,
        none, left every worker at pgvector's ``ef_search`` of 40: 40 candidates where 50 were asked)."""
        local: tuple[tuple[str, int | str], ...] = \
            (("ivfflat.probes", self.ivfflat_probes),) if self.index_method == "ivfflat" else \
            (("hnsw.ef_search", depth), *((("plan_cache_mode", "force_generic_plan"),) if pinned else ()))
        return (("citus.propagate_set_commands", "local"), *local) if self.distributed else local

    def _pinned(self, filters: Filters, model: str, dims: int, depth: int, k: int) -> Op[bool]:
        """Whether to search the user with the plan-fixed HNSW statement under a generic plan
        (``Pins``): no statement is planned again for each search of a large user, which saves
        more than half a millisecond on the path every search waits for. Never on Citus: the
        plan-fixed statement's nearest-vectors subquery names no user, so it would not route to the
        user's shard (the plain statement does; ``_small_in_shard`` sends a small user's exact statement)."""
        if filters.user_id is None or self.index_method != "hnsw" or dims > q.HNSW_MAX_DIMENSIONS \
                or not filters.plain or self.distributed:
            return False
        if self.pins.stale(model, dims):
            rows: list[Row] = yield Q(*q.user_shares(model, dims))
            self.pins.read(model, dims, rows[0]["indexed"], rows[0]["users"], rows[0]["shares"])
        return self.pins.serves(filters.user_id, model, dims, depth, k)

    def _small_in_shard(self, filters: Filters, model: str, dims: int, depth: int, k: int) -> Op[bool]:
        """On Citus: whether the user's vectors are too few a share of their shard for its HNSW scan
        to yield k of them, so the exact statement goes first. On a shard a user's rows are a
        larger share than of a whole table, and the worker's planner picks the HNSW scan, which
        then returns the shard's nearest vectors and none of the user's: a second statement
        counted them and a third compared them exactly. The shares are the shards' own statistics
        (``sql.shard_user_shares``), read again after ``PIN_SECONDS``; a user they do not list is small."""
        if not self.distributed or filters.user_id is None or self.index_method != "hnsw" \
                or dims > q.HNSW_MAX_DIMENSIONS:
            return False
        if self.pins.stale(model, dims):
            rows: list[Row] = yield Q(*q.shard_user_shares(model, dims))
            users: list[str] = []
            shares: list[float] = []
            for text in rows[0]["shards"]:
                shard = json.loads(text)
                users += shard.get("users") or []
                shares += shard.get("shares") or []
            self.pins.read(model, dims, rows[0]["indexed"], users, shares)
        return not self.pins.serves(filters.user_id, model, dims, depth, k, margin=1)

    @operation
    @reads
    def semantic_scores(self, filters: Filters, model: str, query: np.ndarray,
                        ids: Sequence[int]) -> Op[dict[int, float]]:
        if not self.has_vector or not ids:
            return {}
        dims = sql.Literal(int(query.size))
        user = sql.SQL("TRUE") if filters.user_id is None else sql.SQL("user_id = %s")
        rows: list[Row] = yield Q(sql.SQL("SELECT item_id, 1 - (embedding::vector({d}) <=> %s::vector({d})) AS score"
                               " FROM embeddings WHERE {u} AND model = %s AND dimensions = {d} AND state = 'ready'"
                               " AND item_id = ANY(%s)").format(d=dims, u=user),
                                  [query, *([] if filters.user_id is None else [filters.user_id]), model, list(ids)])
        return {r["item_id"]: _similarity(r["score"]) for r in rows}
