"""The search plan between candidate lists and final results: pure, no I/O."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, Mapping, NamedTuple, Sequence

from ..core import convert
from ..models import SearchResult
from .dates import QueryTime, mentions_time, read_query
from . import lexical
from .fusion import STORE_SEMANTIC_WEIGHT, rrf_fusion, weighted_fusion
from .query import STOP_WORDS, query_terms
from .rerank import RankInput, Ranked, rerank
from .stage import blend, reorder

WEIGHTED_K = 50  # per-signal candidates before weighted fusion
RRF_K_CANDIDATES = 40  # per-signal candidates before RRF
SIGNALS = ("fts", "semantic", "substring")  # candidate lists; "context" marks a borrowed neighbour score
# How much cosine similarity a full-text match of a content word is worth toward a result's
# relevance: common words match many unrelated rows, so a match alone is not enough, but it lowers
# the similarity a row needs (LoCoMo dev, MiniLM: docs/benchmarks-history.md, "Relevance floor").
LEXICAL_CREDIT = 0.1
# A row holding every content word of the query is relevant on that alone (0.5 >= the default
# floor 0.25, whatever the vector says: "cafe creme" finds "Café crème" with any embedder); one
# holding half of them is worth 0.125. Squared: a share of the words is weak evidence.
LEXICAL_FULL_MATCH = 0.5


class Fused(NamedTuple):  # a tuple: built for every candidate of every search
    score: float  # what ranks (relative to this query's candidates)
    raw: dict[str, float]
    parts: dict[str, float]
    signals: dict[str, bool]
    relevance: float = 0.0  # what the result's score says (absolute, ``SearchPlan.relevance``)


@dataclass(frozen=True)
class SearchPlan:
    terms: list[str]
    fusion: str
    k: int
    semantic_weight: float = STORE_SEMANTIC_WEIGHT
    when: QueryTime = QueryTime()

    @classmethod
    def create(cls, query: str, fusion: str, semantic_weight: float = STORE_SEMANTIC_WEIGHT,
               now: datetime | None = None) -> "SearchPlan":
        """``now``: the time of the search, from which relative periods ("last week") are read."""
        k = WEIGHTED_K if fusion == "weighted" else RRF_K_CANDIDATES
        return cls(query_terms(query), fusion, k, semantic_weight, read_query(query, now))

    @property
    def has_content_terms(self) -> bool:
        """Whether the query has a word that is not a stop word (only such words are evidence)."""
        return any(term not in STOP_WORDS for term in self.terms)

    def matched(self, fused: "Fused") -> bool:
        """Whether a full-text or substring match of a query word that is not a stop word found it."""
        return self.has_content_terms and bool(fused.signals.get("fts") or fused.signals.get("substring"))

    def relevance(self, fused: "Fused", text: str) -> float:
        """How relevant a candidate is, from its own evidence only, in [0, 1], comparable across
        queries and users: its cosine similarity to the query (clipped at 0), plus
        ``LEXICAL_CREDIT`` when it matched a content word of the query, and at least
        ``LEXICAL_FULL_MATCH`` x the squared share of the query's content words ``text`` (the
        row's title and content) holds; without a vector to judge by (lexical-only, embedding
        pending), that share. Only a row the full-text (or substring) search found has a share.
        Never the spread of this query's candidates: an unrelated row scores low however few
        candidates there are."""
        matched = self.matched(fused)
        share = lexical.query_share(self.terms, text, substrings=not fused.signals.get("fts")) if matched else 0.0
        similarity = fused.raw.get("semantic")
        if similarity is None or math.isnan(similarity):
            return share
        return _unit(max(similarity + (LEXICAL_CREDIT if matched else 0.0), LEXICAL_FULL_MATCH * share * share))

    def judged(self, fused: dict[int, "Fused"], texts: Mapping[int, str]) -> dict[int, "Fused"]:
        """``fused`` with each candidate's ``relevance`` (``texts``: its title and content)."""
        return {i: f._replace(relevance=self.relevance(f, texts.get(i, ""))) for i, f in fused.items()}

    def missing_semantic(self, lexical: Sequence[tuple[int, float]], semantic: Sequence[tuple[int, float]],
                         floor: bool = False) -> list[int]:
        """Lexical candidates whose cosine is worth looking up (weighted fusion normalises real
        values; a relevance ``floor`` judges by them)."""
        if self.fusion != "weighted" and not floor:
            return []
        seen = {i for i, _ in semantic}
        return [i for i, _ in lexical if i not in seen]

    def fuse(self, lexical: Sequence[tuple[int, float]], semantic: Sequence[tuple[int, float]],
             substring: Sequence[tuple[int, float]], extra_semantic: dict[int, float]) -> dict[int, Fused]:
        lists = {"fts": dict(lexical), "semantic": dict(semantic), "substring": dict(substring)}
        raw = {**lists, "semantic": {**extra_semantic, **lists["semantic"]}}
        if self.fusion == "weighted":
            weights = {"semantic": self.semantic_weight, "fts": 1.0 - self.semantic_weight,
                       "substring": 1.0 if not lexical and not semantic else 0.0}
            fused = weighted_fusion(raw, weights)
        else:
            fused = rrf_fusion({name: [i for i, _ in pairs] for name, pairs in
                                (("fts", lexical), ("semantic", semantic), ("substring", substring))})
        raw_of, listed = [(name, raw[name]) for name in SIGNALS], [(name, lists[name]) for name in SIGNALS]
        out: dict[int, Fused] = {}
        for item_id, (score, parts) in fused.items():
            signals = {name: item_id in found for name, found in listed}
            signals["context"] = False
            out[item_id] = Fused(score, {name: values[item_id] for name, values in raw_of if item_id in values},
                                 parts, signals)
        return out


MODEL_CHARS = 1500  # of a long result, what a reranking model reads: ~350 tokens, room for the query in 512


def _unit(value: float) -> float:
    """Clipped to [0, 1], and never -0.0."""
    return min(1.0, max(0.0, value)) + 0.0


def floored(fused: dict[int, Fused], min_score: float, limit: int) -> tuple[dict[int, Fused], int]:
    """The candidates whose relevance reaches ``min_score``, and how many of the ``limit`` best
    candidates (by fused score) fell below it: what the floor hid from the page."""
    if min_score <= 0:
        return fused, 0
    kept = {i: f for i, f in fused.items() if f.relevance >= min_score}
    best = sorted(fused.values(), key=lambda f: -f.score)[:limit]
    return kept, sum(f.relevance < min_score for f in best)


def finish(fused: dict[int, Fused], rows: list[dict[str, Any]], limit: int, now: datetime,
           person_hints: tuple[str, ...], recency_decay: bool, when: QueryTime | None = None) -> list[SearchResult]:
    """Re-rank the fused candidates that still exist and build the results, best first."""
    return results(fused, order(fused, rows, limit, now, person_hints, recency_decay, when), rows)


def order(fused: dict[int, Fused], rank_rows: list[dict[str, Any]], limit: int, now: datetime,
          person_hints: tuple[str, ...], recency_decay: bool, when: QueryTime | None = None) -> list[Ranked]:
    """The best ``limit`` of the fused candidates that still exist, re-ranked. ``rank_rows`` need
    only id, content, created_at, observed_at, pinned and person (``Backend.rank_rows``)."""
    by_id = {row["id"]: row for row in rank_rows}
    timed = when is not None and when.asks_when
    inputs = [
        RankInput(i, f.score, row["created_at"], row.get("observed_at"), bool(row.get("pinned")), row.get("person"),
                  timed and mentions_time(row.get("content") or ""))
        for i, f in fused.items() if (row := by_id.get(i)) is not None
    ]
    return rerank(inputs, now, person_hints, recency_decay, when)[:limit]


def results(fused: dict[int, Fused], ranked: list[Ranked], rows: list[dict[str, Any]],
            terms: Sequence[str] = ()) -> list[SearchResult]:
    """The results of ``order`` from the full rows (one deleted meanwhile is left out); a long
    result's snippet is its part holding most of the query ``terms`` (``lexical.excerpt``)."""
    by_id = {row["id"]: row for row in rows}
    out = []
    for r in ranked:
        if r.id not in by_id:
            continue
        f = fused[r.id]  # type: ignore[index]
        scores = {**f.raw, **{f"{name}_part": value for name, value in f.parts.items()},
                  "fused": f.score, **r.adjustments, "rank": r.score}
        result = convert.search_result(by_id[r.id], f.relevance, f.signals, scores)
        part = lexical.excerpt(result.content, terms, convert.SNIPPET_CHARS)
        out.append(result if part is None else replace(result, snippet=part))
    return out


def model_text(result: SearchResult) -> str:
    """What a reranking model reads of a result: its title and content; of a long content, the
    ``MODEL_CHARS`` around its snippet when that is the part the query matched (``lexical.around``),
    else its opening: a cross-encoder reads 512 tokens, so it judged a long note by its opening."""
    text = lexical.around(result.content, result.snippet, MODEL_CHARS)
    return f"{result.title}\n{text}" if result.title else text


def apply_model_scores(results: list[SearchResult], scores: Sequence[float], weight: float = 1.0) -> list[SearchResult]:
    """``results`` re-ordered by ``stage.blend`` of their scores and a model's ``scores`` of the
    first ``len(scores)`` of them (``weight`` 1: the model's order alone); each scored result keeps
    the model's score as ``rerank`` and the blend as ``rerank_blend``. The others follow in order."""
    blended = blend([r.scores.get("rank", r.score) for r in results[:len(scores)]], scores, weight)
    by_position = dict(enumerate(blended))
    return [replace(results[i], scores={**results[i].scores, "rerank": scores[i], "rerank_blend": by_position[i]})
            if i in by_position else results[i] for i in reorder(range(len(results)), by_position)]
