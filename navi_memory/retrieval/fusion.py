"""Fuse per-signal candidate scores into one ranking. Pure functions over ``{id: score}`` maps.

Two fusions:

* ``weighted_fusion``: each signal scaled to [0, 1] over the union of candidates, then a
  weighted sum (0.7 semantic + 0.3 lexical when called alone; a search passes its
  ``semantic_weight``, 0.6 by default: ``NAVI_MEMORY_SEMANTIC_WEIGHT``). A candidate a signal did not score gets 0
  for that signal. Lexical scores are min-max scaled (``min_max``), cosine similarities by
  ``scale_similarity``.
* ``rrf_fusion``: reciprocal rank fusion, ``sum(weight / (k + rank))`` over each signal's ranked
  list (k = 60).

Min-max scaling gives the best candidate 1.0 whatever its score. That is right when candidates
differ, but a set without spread (one candidate, or all equal) would then be "perfect" by
construction: a single unrelated note at cosine 0.0 would score like an exact match. Such sets
keep an absolute value instead: cosine its own (clipped to [0, 1]), a lexical score 1.0 when it
matched (positive) and 0.0 when not.
"""

from __future__ import annotations

import math
from typing import Callable, Hashable, Mapping, Sequence, TypeVar

K = TypeVar("K", bound=Hashable)

DEFAULT_WEIGHTS = {"semantic": 0.7, "fts": 0.3}  # the default of weighted_fusion when called alone
# What the store uses unless told otherwise: with the contextual full-text index, lexical evidence
# deserves more weight than 0.3 (LoCoMo dev, MiniLM: R@10 0.717 at 0.7, 0.749 at 0.6).
STORE_SEMANTIC_WEIGHT = 0.6
RRF_K = 60
# Cosine spread from which candidate similarities are min-max scaled in full; below it the
# relative scaling is trusted in proportion to the spread and the absolute cosine fills the rest
# (near-equal similarities are not blown up to 0..1). On LoCoMo dev the semantic candidates of a
# question always spread wider (docs/benchmarks-history.md), so ranking there is plain min-max.
SIMILARITY_SPREAD = 0.1


def _finite(value: float) -> float:
    """NaN (e.g. a cosine with a zero vector) counts as no evidence; infinities are clipped."""
    if -1e300 <= value <= 1e300:  # the common case, first (NaN fails every comparison)
        return value
    if math.isnan(value):
        return 0.0
    return max(-1e300, min(1e300, value))


def _matched(value: float) -> float:
    return 1.0 if value > 0 else 0.0


def min_max(scores: Mapping[K, float], flat: Callable[[float], float] = _matched) -> dict[K, float]:
    """Scale to [0, 1] by the set's own range. A set without range (one candidate, all equal)
    says nothing about how its candidates compare, so each gets ``flat(score)``: by default 1.0
    for a positive score (a full-text match) and 0.0 otherwise, never 1.0 by construction."""
    if not scores:
        return {}
    values = {key: _finite(value) for key, value in scores.items()}
    lo, hi = min(values.values()), max(values.values())
    span = hi - lo
    if not span > 1e-12 * max(1.0, abs(hi), abs(lo)):
        return {key: flat(value) for key, value in values.items()}
    return {key: min(1.0, max(0.0, (value - lo) / span)) for key, value in values.items()}


def scale_similarity(scores: Mapping[K, float], full_spread: float = SIMILARITY_SPREAD) -> dict[K, float]:
    """Cosine similarities to [0, 1], order kept: min-max in proportion ``min(1, spread /
    full_spread)`` of the set's spread, the absolute cosine (clipped to [0, 1]) for the rest.
    A set without spread keeps its absolute similarities; a wide one is plain min-max."""
    if not scores:
        return {}
    values = {key: _finite(value) for key, value in scores.items()}
    lo, hi = min(values.values()), max(values.values())
    spread = hi - lo
    share = 1.0 if full_spread <= 0 else min(1.0, spread / full_spread)
    relative = min_max(values, flat=lambda value: 0.0)
    return {key: share * relative[key] + (1.0 - share) * min(1.0, max(0.0, value))
            for key, value in values.items()}


def weighted_fusion(
    signals: Mapping[str, Mapping[K, float]],
    weights: Mapping[str, float] = DEFAULT_WEIGHTS,
) -> dict[K, tuple[float, dict[str, float]]]:
    """``{id: (fused, {signal: normalised})}`` over the union of all signals' candidates.

    Signals without a weight are ignored. When only one weighted signal has candidates, its
    normalised score is the fused score (the weights are renormalised over the signals present).
    ``semantic`` holds cosine similarities (``scale_similarity``); the others are min-max scaled.
    """
    active = {name: s for name, s in signals.items() if s and weights.get(name, 0) > 0}
    total_weight = sum(weights[name] for name in active) or 1.0
    normalised = {name: (scale_similarity if name == "semantic" else min_max)(s) for name, s in active.items()}
    union: dict[K, None] = {}
    for s in active.values():
        union.update(dict.fromkeys(s))
    terms = [(name, weights[name], normalised[name]) for name in active]
    fused: dict[K, tuple[float, dict[str, float]]] = {}
    for key in union:  # a plain loop: a search fuses about 100 candidates, and it is on its path
        parts: dict[str, float] = {}
        score = 0.0
        for name, weight, scaled in terms:
            parts[name] = part = scaled.get(key, 0.0)
            score += weight * part
        fused[key] = (score / total_weight, parts)
    return fused


def rrf_fusion(
    rankings: Mapping[str, Sequence[K]],
    k: int = RRF_K,
    weights: Mapping[str, float] | None = None,
) -> dict[K, tuple[float, dict[str, float]]]:
    """``{id: (fused, {signal: 1/(k+rank)})}`` with rank starting at 1."""
    fused: dict[K, tuple[float, dict[str, float]]] = {}
    for name, ranked in rankings.items():
        weight = 1.0 if weights is None else weights.get(name, 0.0)
        if weight <= 0:
            continue
        for rank, key in enumerate(ranked, start=1):
            part = 1.0 / (k + rank)
            score, parts = fused.get(key, (0.0, {}))
            parts[name] = part
            fused[key] = (score + weight * part, parts)
    return fused


def ranked_ids(scores: Mapping[K, float], limit: int | None = None) -> list[K]:
    """Ids by descending score (ties keep insertion order)."""
    ordered = sorted(scores, key=lambda key: -scores[key])
    return ordered if limit is None else ordered[:limit]
