"""The optional model stage after ranking: pure, no I/O (the model's scores come in as numbers)."""

from __future__ import annotations

from typing import Hashable, Mapping, Sequence, TypeVar

K = TypeVar("K", bound=Hashable)


def depth(limit: int, model_depth: int) -> int:
    """How many ranked results to fetch when a model re-orders the best ``model_depth`` of them."""
    return max(limit, model_depth)


def reorder(ranked: Sequence[K], scores: Mapping[K, float]) -> list[K]:
    """The ids the model scored, best score first (ties keep their earlier order), then the
    others in their earlier order."""
    position = {key: i for i, key in enumerate(ranked)}
    scored = sorted((key for key in ranked if key in scores), key=lambda key: (-scores[key], position[key]))
    return scored + [key for key in ranked if key not in scores]
