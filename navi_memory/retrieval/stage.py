"""The optional model stage after ranking: pure, no I/O (the model's scores come in as numbers)."""

from __future__ import annotations

import math
from typing import Hashable, Mapping, Sequence, TypeVar

K = TypeVar("K", bound=Hashable)


def depth(limit: int, model_depth: int) -> int:
    """How many ranked results to fetch when a model re-orders the best ``model_depth`` of them."""
    return max(limit, model_depth)


def reads_on(first_scores: Sequence[float], enough: float) -> bool:
    """Whether a model that read the best few candidates should read the rest of its depth: when
    none of them scored ``enough`` (the first stage put nothing it finds clearly relevant on top).
    On LoCoMo dev (ms-marco-MiniLM-L-12, first 8 of 30, ``enough`` 2) 3 searches in 4 stop after
    8: R@5 0.758 against 0.757 reading all 30, R@10 0.815 against 0.823 (docs/benchmarks.md)."""
    return not any(score >= enough for score in first_scores)


def reorder(ranked: Sequence[K], scores: Mapping[K, float]) -> list[K]:
    """The ids the model scored, best score first (ties keep their earlier order), then the
    others in their earlier order."""
    position = {key: i for i, key in enumerate(ranked)}
    scored = sorted((key for key in ranked if key in scores), key=lambda key: (-scores[key], position[key]))
    return scored + [key for key in ranked if key not in scores]


def blend(first: Sequence[float], model: Sequence[float], weight: float) -> list[float]:
    """``(1 - weight) x`` the first stage's score ``+ weight x`` the model's, each scaled to 0..1
    over the candidates the model read. A cross-encoder alone forgets what the first stage knew
    (dates, persons, the turn before); the blend keeps both. A model score of -inf (a text the
    model dropped, or NaN) stays -inf, so that candidate ranks after the others."""
    if len(first) != len(model):
        raise ValueError("one first-stage score per model score")
    if not 0 <= weight <= 1:
        raise ValueError("the model's weight is between 0 and 1")
    return [-math.inf if m == -math.inf else (1 - weight) * f + weight * h
            for f, m, h in zip(_scaled(first), model, _scaled(model))]


def _scaled(values: Sequence[float]) -> list[float]:
    """Min-max over the finite values; -inf -> 0, +inf -> 1; all equal -> 1."""
    finite = [v for v in values if math.isfinite(v)]
    lo, hi = (min(finite), max(finite)) if finite else (0.0, 0.0)
    return [(1.0 if v > 0 else 0.0) if not math.isfinite(v) else 1.0 if hi <= lo else (v - lo) / (hi - lo)
            for v in values]
