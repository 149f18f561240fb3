"""Search: hybrid retrieval over a user's items and facts.

The pure parts (fusion, re-ranking, smoothing, the time of a query) live in ``retrieval``; this
operation validates the call, yields the candidate queries to the backend and assembles the page.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from datetime import datetime, timezone as tz
from typing import Any, Mapping, Sequence, cast

from ..backends.base import Beside, Hits, RankRow
from ..calls import EmbedQuery, Rerank, at_once, db, together
from ..core import convert
from ..core import validation as v
from ..errors import EmbeddingError, ValidationError
from ..models import FUSIONS, SearchResults
from ..retrieval import context, stage, superseded
from ..retrieval import search as ranking
from ..core.filters import MetadataFilter
from ..core.timeutil import zone
from ..retrieval.query import is_match_all, query_terms
from ..sansio import Op, operation
from .memory import MemoryOperations
from .reads import read_filters
from .shared import Shared

log = logging.getLogger("navi_memory")


class SearchOperations:
    """``search``: the memory's retrieval, built on the item helpers of ``MemoryOperations``."""

    def __init__(self, shared: Shared, memory: MemoryOperations) -> None:
        self._shared = shared
        self._memory = memory

    @operation
    def search(self, query: str | None, *, user_id: str | None = None, all_users: bool = False, limit: int = 10,
               theme: str | None = None, types: Sequence[str] | None = None, recency_days: float | None = None,
               status: str = "active", person: str | None = None, person_hints: Sequence[str] = (),
               fusion: str | None = None, recency: str = "decay", query_embedding: Any = None,
               include_expired: bool = False, context_weight: float = context.NEIGHBOUR_WEIGHT,
               semantic_weight: float | None = None, min_score: float | None = None,
               min_similarity: float | None = None, namespace_prefix: Sequence[str] | None = None, agent_id: str | None = None,
               run_id: str | None = None, filters: MetadataFilter | None = None,
               timezone: str | None = None) -> Op[SearchResults]:
        """Hybrid search over items and facts. ``''`` or ``'*'`` returns the newest items.

        ``namespace_prefix``: only keyed items (``put_keyed``) whose namespace equals it or starts
        with its labels. ``agent_id`` / ``run_id``: only rows written with that agent / run (exact).
        ``filters``: conditions on item ``metadata``, all of which must hold: ``{"k": value}`` or
        ``{"k": {"$op": value}}`` with eq, ne, in, nin, gt, gte, lt, lte, exists (``$`` optional);
        ``"a.b"`` holds at the nested path or the key ``a.b`` itself, a tuple key at that one path
        (``("a.b",)``: the key ``a.b``; meaning: ``core/filters.py``). Facts have no metadata of
        their own: with a metadata filter, no fact is returned.

        Each result's ``score`` is its relevance, from its own evidence, in [0, 1] and comparable
        across queries: the cosine similarity of its vector to the query's, plus 0.1 when a full-text
        match of a query word that is not a stop word found it (without a vector: the share of the
        query's content words it holds, if matched); a conversation neighbour brought in beside a
        relevant result scores ``context_weight`` x that result's. ``scores["rank"]`` is what orders
        the results (fused, re-ranked; relative to this query's candidates).

        ``min_score``: the relevance floor (default: the store's, ``NAVI_MEMORY_MIN_SCORE``, 0.25;
        0 = off): only results whose score reaches it are kept, and the conversation neighbours of
        kept results; so an unrelated query finds nothing (``''`` and ``'*'`` still list the newest
        items). ``SearchResults.hidden`` says how many of the ``limit`` best candidates it hid.
        ``min_similarity``: the same floor under its former name (``min_score`` wins).

        ``semantic_weight``: share of the semantic signal in weighted fusion (default: the
        store's, 0.6 unless ``NAVI_MEMORY_SEMANTIC_WEIGHT`` says otherwise; 0.7 found fewer of
        the right turns on the LoCoMo dev set).
        ``context_weight``: share of the best adjacent turn's score (same conversation session,
        ``source_ref.session_id``) that a row borrows; 0 turns neighbour smoothing off. Persons on
        the user's items that the query names are added to ``person_hints``; when the store embeds
        the query, a query naming a hint is embedded also without the names, and the semantic
        signal compares a mix of both vectors (``retrieval.context.PERSON_FOCUS``).
        ``timezone``: the IANA time zone whose days "yesterday", "last week" or "on 3 June" in the
        query mean (default: the user's, ``set_user_timezone``, else the store's,
        ``NAVI_MEMORY_TIMEZONE``, UTC)."""
        f = self._memory.filters(user_id, all_users, status, theme, types, recency_days, person, include_expired,
                          namespace_prefix, agent_id, run_id, filters)
        if f.person is not None and f.user_id is not None:  # the name items carry: writes store the display
            f = replace(f, person=(yield from self._memory.person_name(f.user_id, f.person)))  # name an alias names
        limit = v.limit(limit)
        hints = v.names(person_hints, "person_hints")
        weight = self._shared.settings.semantic_weight if semantic_weight is None else semantic_weight
        floor = min_score if min_score is not None else min_similarity
        _check_ranking(context_weight, weight, floor, "min_score" if min_score is not None else "min_similarity")
        floor = self._shared.settings.min_similarity if floor is None else float(floor)
        fusion = v.choice(fusion or self._shared.fusion, "fusion", FUSIONS)
        decay = v.choice(recency, "recency", ("decay", "neutral")) == "decay"
        zone_name = self._shared.settings.timezone if timezone is None else v.timezone_name(timezone)
        if query is not None and not isinstance(query, str):
            raise ValidationError("query must be a string")
        if query is not None:
            v.text(query, "query", self._shared.max_content_bytes, allow_empty=True)
        if is_match_all(query):
            rows = yield db.list_items(filters=f, limit=limit, offset=0)
            return SearchResults(convert.match_all_result(r) for r in rows)
        plan = ranking.SearchPlan.create(query or "", fusion, float(weight), f.now.astimezone(zone(zone_name)))
        if timezone is None and f.user_id is not None and plan.when.start is not None:
            # the query names a day, month or year: the user's own time zone, if set, says which
            local_now = f.now.astimezone((yield from self._memory.zone_of(f.user_id)))
            plan = ranking.SearchPlan.create(query or "", fusion, float(weight), local_now)
        qvec = None if query_embedding is None else self._memory.vector(query_embedding)
        # one model per search: while the store moves to a new one, the user's until they are moved
        model = yield from self._memory.serving_model(f.user_id)
        embedder = self._shared.embedder_of(model)
        embed = qvec is None and bool(query) and embedder is not None and embedder.available and bool(model)
        persons = None
        if f.user_id is not None:  # people the query names become person hints (hints by alias or first
            # name resolve to the display name the items carry)
            names = context.name_grams(query or "") + [" ".join(h.lower().split()) for h in hints]
            persons = db.persons_named(user_id=f.user_id, names=names)
        if embed:
            if persons is not None:  # first: the names shape the query vector (person focus)
                hints += tuple((yield persons))
                persons = None
            qvec = yield from self._query_vector(cast(str, query), hints, model)
        # The candidate queries (and the persons lookup, when it did not come first) are independent:
        # on PostgreSQL they run at the same time, and each reads beside its hits what ranking needs
        # of them (``Beside``), so no round trip follows for it.
        beside = Beside(model=model, query=qvec, neighbours=context_weight > 0)
        semantic_call = db.semantic_hits(filters=f, model=model, query=qvec, k=plan.k, beside=beside) \
            if qvec is not None and model is not None else None
        calls: list[Any] = [c for c in (semantic_call, db.lexical_hits(filters=f, terms=plan.terms, k=plan.k,
                                                                          beside=beside), persons) if c is not None]
        outcomes = yield at_once(*calls)  # the semantic call first: the longest (``at_once``)
        semantic_outcome = outcomes.pop(0) if semantic_call is not None else None
        (lexical_hits, error), *rest = outcomes
        if error is not None:
            raise error
        if persons is not None:
            (named, error), = rest
            if error is not None:
                raise error
            hints += tuple(named)
        hits, lexical, semantic = [lexical_hits], lexical_hits.scored, []
        if semantic_outcome is not None:
            semantic_hits, error = semantic_outcome
            if isinstance(error, EmbeddingError):
                log.warning("semantic search skipped: %s", error)
                qvec, hits = None, [replace(lexical_hits, cosines={})]  # no cosines of an unusable vector
            elif error is not None:
                raise error
            else:
                hits.append(semantic_hits)
                semantic = semantic_hits.scored
        if not semantic and embed and qvec is not None and f.user_id is not None \
                and self._shared.previous_model is not None:
            # the user moved to the new model between reading which model and reading its vectors
            # (``reembed`` swaps them all at once): once more, with the model the vectors are now of
            moved = yield from self._memory.serving_model(f.user_id)
            if moved is not None and moved != model \
                    and (again := (yield from self._query_vector(cast(str, query), hints, moved))) is not None:
                model, qvec = moved, again
                hits.append((yield db.semantic_hits(filters=f, model=model, query=qvec, k=plan.k,
                                                    beside=Beside(model=model, query=qvec,
                                                                  neighbours=context_weight > 0))))
                semantic = hits[-1].scored
        substring = []
        if not lexical and not semantic:
            substring = yield db.substring_candidates(filters=f, terms=query_terms(query or "", 8), k=plan.k)
        # What the candidate queries did not read beside their hits (all of it on SQLite) is read
        # now, at once: the missing cosines, every candidate's neighbours and re-ranking columns
        # (fusion keeps candidates only; smoothing reads the neighbours of those it keeps).
        read = _Read.of(hits, substring)
        missing = plan.missing_semantic(lexical, semantic, floor=True)  # a result's relevance reads its cosine
        unread = [i for i in missing if i not in read.cosines]
        scores, neighbours, columns = yield from together(
            db.semantic_scores(filters=f, model=model, query=qvec, ids=unread)
            if qvec is not None and model is not None and unread else None,
            db.neighbours(filters=f, ids=read.without_neighbours)
            if context_weight > 0 and read.without_neighbours else None,
            db.rank_rows(user_id=f.user_id, ids=read.without_rows) if read.without_rows else None)
        scores = {**{i: read.cosines[i] for i in missing if i in read.cosines}, **(scores or {})}
        neighbours, columns = {**read.neighbours, **(neighbours or {})}, read.rows + (columns or [])
        texts = {row["id"]: f"{row.get('title') or ''}\n{row.get('content') or ''}" for row in columns}
        fused = plan.judged(plan.fuse(lexical, semantic, substring, scores), texts)
        # before smoothing: only relevant rows lend their score to neighbours
        fused, hidden = ranking.floored(fused, floor, limit)
        if not fused:
            return SearchResults(hidden=hidden)
        if context_weight > 0:
            fused = context.smooth(fused, neighbours, context_weight)
        second = self._shared.reranker
        depth = limit if second is None else stage.depth(limit, second.depth)
        # re-rank on a few columns of each candidate (and of the neighbours smoothing brought in);
        # whole rows only for the page shown
        asked = set(read.candidates) | {row["id"] for row in read.rows}
        if brought := [i for i in fused if i not in asked]:
            columns = columns + (yield db.rank_rows(user_id=f.user_id, ids=brought))
        ranked = ranking.order(fused, columns, depth, f.now, hints, decay, plan.when)
        # the page, and beside it (no extra round trip) the values newer ones replaced, to mark the
        # turns that said them (the re-ranking signal ``superseded``); across users, those of the
        # page's users, read after it
        rows, past = (yield from together(
            db.fetch_items(user_id=f.user_id, ids=[cast(int, r.id) for r in ranked]) if ranked else None,
            db.past_statements(user_ids=[f.user_id]) if ranked and f.user_id is not None else None))
        rows = rows or []
        if rows and f.user_id is None:
            past = yield db.past_statements(user_ids=sorted({r["user_id"] for r in rows}))
        replaced = superseded.replaced_turns(rows, past or [])
        results = ranking.results(fused, ranked, rows, plan.terms)
        if second is None:
            return SearchResults(superseded.demote(results, replaced), hidden=hidden)
        for_model = [ranking.model_text(r) for r in results[:second.depth]]
        if second.first is None or second.enough is None or second.first >= len(for_model):
            scores = yield Rerank(query or "", for_model)
        else:  # the best few first; the rest only when the model finds none of them clearly relevant
            scores = yield Rerank(query or "", for_model[:second.first])
            if stage.reads_on(scores, second.enough):
                scores = [*scores, *(yield Rerank(query or "", for_model[second.first:]))]
        return SearchResults(superseded.demote(ranking.apply_model_scores(results, scores, second.weight)[:limit],
                                               replaced), hidden=hidden)

    def _query_vector(self, query: str, hints: Sequence[str], model: str | None) -> Op[Any]:
        """The query's vector; when it names one of the ``hints``, focused on the rest of its text
        (``context.focus``). None when the embedder fails (the search goes on lexically)."""
        try:
            whole = yield EmbedQuery(query, model)
        except EmbeddingError as exc:
            log.info("query embedding failed, searching lexically: %s", exc)
            return None
        rest = context.without_names(query, hints) if hints and context.PERSON_FOCUS > 0 else None
        if rest is None:
            return whole
        try:
            return context.focus(whole, (yield EmbedQuery(rest, model)), context.PERSON_FOCUS)
        except EmbeddingError as exc:
            log.info("embedding the query without its names failed, using the whole query: %s", exc)
            return whole


def _check_ranking(context_weight: Any, semantic_weight: Any, floor: Any, floor_name: str = "min_score") -> None:
    for name, value in (("context_weight", context_weight), ("semantic_weight", semantic_weight), (floor_name, floor)):
        if value is None and name == floor_name:  # the store's floor
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
            raise ValidationError(f"{name} must be a number from 0 to 1")


# the arguments of ``search`` that a caller may fix in advance (an adapter's ``search_kwargs``);
# the query, the user, the page size and the query vector belong to each call
PRESET_ARGUMENTS = ("theme", "types", "recency_days", "status", "person", "person_hints", "fusion", "recency",
                    "include_expired", "context_weight", "semantic_weight", "min_score", "min_similarity", "namespace_prefix",
                    "agent_id", "run_id", "filters", "timezone")


def check_preset(arguments: Mapping[str, Any]) -> None:
    """``ValidationError`` for a name that is not one of ``PRESET_ARGUMENTS`` or a value every
    store refuses, so that a configuration error shows when an adapter is set up, not as memory
    missing from every prompt later."""
    unknown = sorted(set(arguments) - set(PRESET_ARGUMENTS))
    if unknown:
        raise ValidationError(f"not a search argument: {', '.join(map(repr, unknown))}"
                              f" (one of {', '.join(PRESET_ARGUMENTS)})")
    a = dict(arguments)
    read_filters(datetime.now(tz.utc), "preset", False, a.get("status", "active"), a.get("theme"),
                 a.get("types"), a.get("recency_days"), a.get("person"), a.get("include_expired", False),
                 a.get("namespace_prefix"), a.get("agent_id"), a.get("run_id"), a.get("filters"))
    v.names(a.get("person_hints", ()), "person_hints")
    _check_ranking(a.get("context_weight", 0), a.get("semantic_weight", 0), a.get("min_similarity"), "min_similarity")
    _check_ranking(0, 0, a.get("min_score"))
    if a.get("fusion") is not None:
        v.choice(a["fusion"], "fusion", FUSIONS)
    v.choice(a.get("recency", "decay"), "recency", ("decay", "neutral"))
    if a.get("timezone") is not None:
        v.timezone_name(a["timezone"])


@dataclass(frozen=True)
class _Read:
    """What the candidate queries read beside their hits (``Beside``), merged, and which
    candidates they left without re-ranking columns or without looked-up neighbours."""

    candidates: list[int]
    rows: list[RankRow]
    neighbours: dict[int, list[int]]
    cosines: dict[int, float]
    without_rows: list[int]
    without_neighbours: list[int]

    @classmethod
    def of(cls, hits: Sequence[Hits], substring: Sequence[tuple[int, float]]) -> "_Read":
        candidates = list(dict.fromkeys(i for pairs in [*(h.scored for h in hits), substring] for i, _ in pairs))
        rows = list({row["id"]: row for h in hits for row in h.rows or ()}.values())
        looked_up = {i for h in hits if h.neighbours is not None for i, _ in h.scored}
        neighbours = {centre: adjacent for h in hits for centre, adjacent in (h.neighbours or {}).items()}
        have_rows = {row["id"] for row in rows}
        return cls(candidates, rows, neighbours, {i: c for h in hits for i, c in h.cosines.items()},
                   [i for i in candidates if i not in have_rows], [i for i in candidates if i not in looked_up])
