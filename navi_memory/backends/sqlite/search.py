"""SQLite retrieval candidates: FTS5 (bm25), LIKE substrings, conversation neighbours, persons
named in a query, and cosine over the per-user in-memory vector index.

A mixin of ``SQLiteBackend`` (its ``_transaction`` and ``vectors`` cache); reads only.
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any, Callable, ContextManager, Sequence

import numpy as np

from ...retrieval.lexical import Bm25, Occurrences, best_first
from ...retrieval.query import fts5_or_expression, fts5_quote, like_pattern, select_matching_terms
from ...vectors import VectorIndex, from_blob
from ..base import Beside, Filters, Hits
from . import lexicon
from ..shared.items import where
from .runner import SQLITE
from .vectors import VectorCache


def filter_sql(f: Filters) -> tuple[str, list[Any]]:
    """The WHERE conditions on items ``i`` for a filter set (``shared.items.where``), as SQLite's text."""
    text, params = where(SQLITE, f)
    return SQLITE.render(text), params


_RANKED = "SELECT rowid, bm25(items_fts, 2.0, 1.0, 0.3) AS rank FROM items_fts WHERE items_fts MATCH ?"


def _passing(conn: sqlite3.Connection, where: str, params: list[Any], ids: list[int], k: int) -> set[int]:
    """Which of ``ids`` pass the filters; CROSS JOIN keeps ``ids``' order as the outer loop, so LIMIT
    stops at the first k that pass: usually k row lookups, not all of ``ids``."""
    return {r[0] for r in conn.execute(
        "SELECT i.id FROM json_each(?) j CROSS JOIN items i NOT INDEXED ON i.id = j.value"
        f" WHERE {where} LIMIT ?", [json.dumps(ids), *params, k])}


def _rare_rows(found: dict[str, Occurrences], holding: dict[str, int], budget: int | None) -> np.ndarray | None:
    """``_rare_terms`` on the per-user index: the rows (ascending) a ranked row must be one of, those
    holding one of the rarest words (or, over the budget, all of them, else the rarest); None with no
    budget. ``holding``: the user's rows per word."""
    if not budget or len(holding) < 2:
        return None
    chosen, every = select_matching_terms(list(holding), {w: float(n) for w, n in holding.items()}, budget)
    if not every:
        return None if len(chosen) == len(holding) else np.unique(np.concatenate([found[w].rows for w in chosen]))
    rows = np.unique(found[chosen[0]].rows)
    for word in chosen[1:]:
        rows = np.intersect1d(rows, found[word].rows)
    return rows if len(rows) else np.unique(found[min(holding, key=lambda w: holding[w])].rows)


class SQLiteSearch:
    """Candidate queries of hybrid search (mixed into ``SQLiteBackend``)."""

    _transaction: Callable[..., ContextManager[sqlite3.Connection]]  # (write): a transaction, or a savepoint in one
    _statement: Callable[[], ContextManager[sqlite3.Connection]]  # the connection for a read of one statement
    vectors: VectorCache
    lexical_row_budget: int | None = None
    _narrow_rate = 1.0  # recent share of searches whose best k FTS rows all passed the filters

    def _lexical(self, filters: Filters, terms: Sequence[str], k: int) -> list[tuple[int, float]]:
        """The best ``k`` rows passing the filters that hold a query word, best first. For one user,
        scored from that user's rows alone (``_user_candidates``); across users, FTS5's ``bm25()``."""
        if filters.user_id is not None:
            return self._user_candidates(filters, terms, k)
        return self._shared_candidates(filters, terms, k)

    def _shared_candidates(self, filters: Filters, terms: Sequence[str], k: int) -> list[tuple[int, float]]:
        """Ranked by FTS5's ``bm25()`` on ``items_fts``, with the statistics of every row it holds."""
        expression = fts5_or_expression(list(terms))
        if not expression:
            return []
        where, params = filter_sql(filters)
        with self._transaction(write=False) as conn:
            ranked, args = _RANKED, [expression]
            restrict = self._rare_terms(conn, terms)
            if restrict:
                ranked, args = ranked + " AND +rowid IN (SELECT rowid FROM items_fts WHERE items_fts MATCH ?)", \
                    [expression, restrict]
            if self._narrow_rate > 0.5:
                # The best k of the whole index, when they all pass the filters, are the answer: a smaller
                # sort than the wide query below (measured ~0.8 ms CPU of ~4.6 at 100k), same rows and order
                rows = conn.execute(ranked + " ORDER BY rank LIMIT ?", [*args, k]).fetchall()
                passing = _passing(conn, where, params, [r[0] for r in rows], k)
                self._narrow_rate = 0.9 * self._narrow_rate + 0.1 * (len(passing) == len(rows))
                if len(passing) == len(rows):
                    return [(r[0], -float(r[1])) for r in rows]
            else:  # wide after misses (filters reject many of the best rows); try narrow again later
                self._narrow_rate = min(1.0, self._narrow_rate + 0.02)
            # Rank inside FTS5 first and join items only for the best matches; when the filters reject
            # too many of those, rank them all (as before), so the result does not change.
            sql = (f"SELECT i.id, f.rank FROM ({ranked} ORDER BY rank LIMIT ?) f JOIN items i ON i.id = f.rowid"
                   f" WHERE {where} ORDER BY f.rank LIMIT ?")
            rows = conn.execute(sql, [*args, max(4 * k, 200), *params, k]).fetchall()
            if len(rows) < k:
                rows = conn.execute(sql, [*args, -1, *params, k]).fetchall()
        return [(r[0], -float(r[1])) for r in rows]

    def _user_candidates(self, filters: Filters, terms: Sequence[str], k: int) -> list[tuple[int, float]]:
        """BM25 with the user's statistics over the user's rows holding a query word: their
        occurrences read from ``lex_fts`` and scored in numpy (``Bm25.row_scores``), then the best
        that pass the filters."""
        asked = lexicon.query_stems(terms)
        if not asked:
            return []
        where, params = filter_sql(filters)
        with self._transaction(write=False) as conn:
            user = conn.execute("SELECT u.pk, l.rows, l.tokens FROM users u JOIN lex_users l ON l.user_pk = u.pk"
                                " WHERE u.id = ?", [filters.user_id]).fetchone()
            if user is None:
                return []
            token = {lexicon.token(user[0], stem): stem for stem in asked}
            holding = {token[t]: n for t, n in conn.execute(
                "SELECT term, doc FROM lex_terms WHERE term IN (SELECT value FROM json_each(?))", [json.dumps(list(token))])}
            bm25 = Bm25.create(asked, holding, user[1], user[2])
            if not bm25.weights:
                return []
            found = {stem: lexicon.occurrences(conn, lexicon.token(user[0], stem)) for stem in bm25.weights}
            rows, scores = bm25.row_scores(found)
            only = _rare_rows(found, {stem: holding[stem] for stem in bm25.weights}, self.lexical_row_budget)
            if only is not None:
                kept = np.isin(rows, only)
                rows, scores = rows[kept], scores[kept]
            ranked = best_first(rows, scores, max(4 * k, 200))
            passing = _passing(conn, where, params, [r for r, _ in ranked], k)
            if len(passing) < k and len(ranked) < len(rows):  # the filters rejected too many of the best
                ranked = best_first(rows, scores)
                passing = _passing(conn, where, params, [r for r, _ in ranked], k)
        return [(row, score) for row, score in ranked if row in passing][:k]

    def lexical_hits(self, filters: Filters, terms: Sequence[str], k: int, beside: Beside | None = None) -> Hits:
        """The full-text candidates alone, whatever ``beside`` asks: the reads beside them cost no
        round trip in process (search reads them after)."""
        return Hits(self._lexical(filters, terms, k))

    def semantic_hits(self, filters: Filters, model: str, query: np.ndarray, k: int,
                      beside: Beside | None = None) -> Hits:
        """The vector candidates alone (as ``lexical_hits``)."""
        return Hits(self._semantic(filters, model, query, k))

    def _rare_terms(self, conn: sqlite3.Connection, terms: Sequence[str]) -> str:
        """With ``lexical_row_budget`` set (approximate, off by default): an FTS5 expression of the rarest
        terms whose rows (in the whole index, every user) fit the budget; only rows holding one of them
        are ranked, still on every term. Over budget: rows holding all terms, else the rarest term
        (as PostgreSQL's option). Empty when every row is ranked."""
        if not self.lexical_row_budget or len(terms) < 2:
            return ""
        counts = {t: float(conn.execute("SELECT count(*) FROM items_fts WHERE items_fts MATCH ?",
                                        [fts5_quote(t)]).fetchone()[0]) for t in terms}
        chosen, match_all = select_matching_terms(list(terms), counts, self.lexical_row_budget)
        if not match_all:
            return "" if len(chosen) == len(terms) else fts5_or_expression(chosen)
        every = " AND ".join(fts5_quote(t) for t in chosen)  # even the rarest is over the budget
        if conn.execute("SELECT 1 FROM items_fts WHERE items_fts MATCH ? LIMIT 1", [every]).fetchone():
            return every
        return fts5_quote(min(terms, key=lambda t: counts[t]))  # no row holds them all: the rarest

    def substring_candidates(self, filters: Filters, terms: Sequence[str], k: int) -> list[tuple[int, float]]:
        if not terms:
            return []
        where, params = filter_sql(filters)
        # SQLite's LIKE folds the case of ASCII letters only: a term with other letters compares
        # both sides lowered by Python (as PostgreSQL's ILIKE does), the rest keep the plain LIKE
        ascii_hit = "(i.content LIKE ? ESCAPE '\\' OR coalesce(i.title, '') LIKE ? ESCAPE '\\')"
        other_hit = ("(navi_lower(i.content) LIKE ? ESCAPE '\\'"
                     " OR navi_lower(coalesce(i.title, '')) LIKE ? ESCAPE '\\')")
        hits = " + ".join(ascii_hit if t.isascii() else other_hit for t in terms)
        hit_params = [p for t in terms for p in [like_pattern(t if t.isascii() else t.lower())] * 2]
        sql = (f"SELECT id, hits FROM (SELECT i.id, i.created_at, ({hits}) AS hits FROM items i WHERE {where})"
               " WHERE hits > 0 ORDER BY hits DESC, created_at DESC LIMIT ?")
        with self._transaction(write=False) as conn:
            rows = conn.execute(sql, [*hit_params, *params, k]).fetchall()
        return [(r[0], float(r[1])) for r in rows]

    def neighbours(self, filters: Filters, ids: Sequence[int]) -> dict[int, list[int]]:
        """For each id, the items stored right before and after it in the same conversation session
        (same user and ``source_ref.session_id``; by id, ``items_user_session``), of those that pass
        the filters."""
        where, params = filter_sql(filters)
        out: dict[int, list[int]] = {}
        session = "json_extract({}.source_ref, '$.session_id')"
        adjacent = (f"SELECT s.id FROM items s WHERE s.user_id = c.user_id AND {session.format('s')} = "
                    f"{session.format('c')} AND s.id {{}} c.id ORDER BY s.id {{}} LIMIT 1")
        with self._statement() as conn:
            rows = conn.execute(
                f"SELECT c.id, i.id FROM items c JOIN items i ON i.id IN (({adjacent.format('<', 'DESC')}),"
                f" ({adjacent.format('>', 'ASC')})) WHERE c.id IN (SELECT value FROM json_each(?))"
                f" AND {session.format('c')} IS NOT NULL AND {where}",
                [json.dumps([int(i) for i in ids]), *params]).fetchall()
        for centre, neighbour in rows:
            out.setdefault(centre, []).append(neighbour)
        return out

    def _index(self, conn: sqlite3.Connection, filters: Filters, model: str, dimensions: int) -> VectorIndex | None:
        if filters.user_id is not None:
            return self.vectors.index_for(conn, filters.user_id, model, dimensions)
        rows = conn.execute("SELECT item_id, vector FROM embeddings WHERE model = ? AND state = 'ready'"
                            " AND dimensions = ? AND vector IS NOT NULL", (model, dimensions)).fetchall()
        if not rows:
            return None
        index = VectorIndex(dimensions, capacity=len(rows))
        index.upsert_many([r[0] for r in rows], np.vstack([from_blob(r[1]) for r in rows]))
        return index

    def _semantic(self, filters: Filters, model: str, query: np.ndarray, k: int) -> list[tuple[int, float]]:
        where, params = filter_sql(filters)
        with self._transaction(write=False) as conn:
            index = self._index(conn, filters, model, int(query.size))
            if index is None or len(index) == 0:
                return []
            wanted = max(4 * k, 256)
            while True:
                ids, sims = index.top(query, wanted)
                chunk = ids.tolist()
                allowed = _passing(conn, where, params, chunk, k)
                out = [(i, s) for i, s in zip(chunk, sims.tolist()) if i in allowed][:k]
                if len(out) >= k or len(chunk) < wanted:
                    return out
                wanted *= 8

    def semantic_scores(self, filters: Filters, model: str, query: np.ndarray, ids: Sequence[int]) -> dict[int, float]:
        with self._transaction(write=False) as conn:
            index = self._index(conn, filters, model, int(query.size))
        if index is None:
            return {}
        return index.scores(query, ids)
