"""Fuse per-signal candidate scores into one ranking. Pure functions over ``{id: score}`` maps.

Two fusions from the seeds:

* ``weighted_fusion``: each signal min-max normalised over the union of candidates, then a
  weighted sum (default 0.7 semantic + 0.3 lexical). A candidate a signal did not score gets 0
  for that signal.
* ``rrf_fusion``: reciprocal rank fusion, ``sum(weight / (k + rank))`` over each signal's ranked
  list (k = 60).
"""

from __future__ import annotations

from typing import Hashable, Mapping, Sequence

DEFAULT_WEIGHTS = {"semantic": 0.7, "fts": 0.3}  # seed 002's weighting, the default of weighted_fusion
# What the store uses unless told otherwise: with the contextual full-text index, lexical evidence
# deserves more weight than seed 002 gave it (LoCoMo dev, MiniLM: R@10 0.717 at 0.7, 0.749 at 0.6).
STORE_SEMANTIC_WEIGHT = 0.6
RRF_K = 60


def min_max(scores: Mapping[Hashable, float]) -> dict[Hashable, float]:
    """Scale to [0, 1]; when all scores are equal every candidate gets 1.0."""
    if not scores:
        return {}
    lo, hi = min(scores.values()), max(scores.values())
    if hi - lo <= 1e-12:
        return {key: 1.0 for key in scores}
    span = hi - lo
    return {key: (value - lo) / span for key, value in scores.items()}


def weighted_fusion(
    signals: Mapping[str, Mapping[Hashable, float]],
    weights: Mapping[str, float] = DEFAULT_WEIGHTS,
) -> dict[Hashable, tuple[float, dict[str, float]]]:
    """``{id: (fused, {signal: normalised})}`` over the union of all signals' candidates.

    Signals without a weight are ignored. When only one weighted signal has candidates, its
    normalised score is the fused score (the weights are renormalised over the signals present).
    """
    active = {name: s for name, s in signals.items() if s and weights.get(name, 0) > 0}
    total_weight = sum(weights[name] for name in active) or 1.0
    normalised = {name: min_max(s) for name, s in active.items()}
    union: dict[Hashable, None] = {}
    for s in active.values():
        union.update(dict.fromkeys(s))
    fused: dict[Hashable, tuple[float, dict[str, float]]] = {}
    for key in union:
        parts = {name: normalised[name].get(key, 0.0) for name in active}
        score = sum(weights[name] * parts[name] for name in active) / total_weight
        fused[key] = (score, parts)
    return fused


def rrf_fusion(
    rankings: Mapping[str, Sequence[Hashable]],
    k: int = RRF_K,
    weights: Mapping[str, float] | None = None,
) -> dict[Hashable, tuple[float, dict[str, float]]]:
    """``{id: (fused, {signal: 1/(k+rank)})}`` with rank starting at 1."""
    fused: dict[Hashable, tuple[float, dict[str, float]]] = {}
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


def ranked_ids(scores: Mapping[Hashable, float], limit: int | None = None) -> list[Hashable]:
    """Ids by descending score (ties keep insertion order)."""
    ordered = sorted(scores, key=lambda key: -scores[key])
    return ordered if limit is None else ordered[:limit]
