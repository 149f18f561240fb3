"""NaviStore's per-field vectors and LangGraph's similarity scores, as pure functions.

LangGraph's stores embed each text at an item's index paths on its own and score the item by its
best one, in the index's ``distance_type``. A navi-memory item has one vector (of its texts joined),
so NaviStore keeps the texts' own vectors beside it, in the item's private metadata, where that one
vector cannot give LangGraph's score: an item with several texts, or an index whose distance is not
the cosine. Each set names its model: vectors of another model (the store moved to a new one) are
not compared with the query's, and the item's own cosine scores it instead.
"""

from __future__ import annotations

import base64
import math
from typing import Any, Optional, Sequence

import numpy as np

DISTANCES = ("cosine", "l2", "inner_product")


def needs_own_vectors(texts: Sequence[str], distance: str) -> bool:
    """Whether the item's one vector cannot give LangGraph's score of these texts."""
    return len(texts) > 1 or (len(texts) == 1 and distance != "cosine")


def pack(model: str, vectors: Sequence[Sequence[float]]) -> dict[str, Any]:
    """The texts' vectors as JSON metadata: float32, little-endian, base64 (a quarter of the digits)."""
    return {"model": model,
            "vectors": [base64.b64encode(np.asarray(vec, dtype="<f4").tobytes()).decode("ascii") for vec in vectors]}


def unpack(packed: Any, model: Optional[str]) -> Optional[np.ndarray]:
    """The vectors kept by ``pack`` as a matrix, or None when there are none of ``model``."""
    if not isinstance(packed, dict) or model is None or packed.get("model") != model:
        return None
    rows = [np.frombuffer(base64.b64decode(text), dtype="<f4") for text in packed.get("vectors") or ()]
    if not rows or len({row.size for row in rows}) != 1:
        return None
    return np.vstack(rows).astype(np.float64)


def best_score(query: np.ndarray, vectors: np.ndarray, distance: str) -> float:
    """An item's score: its best text's similarity to the query, as LangGraph's stores report it
    (cosine similarity; inner product; l2: minus the euclidean distance)."""
    if vectors.shape[1] != query.size:
        raise ValueError("the item's vectors and the query's differ in size")
    if distance == "inner_product":
        return float((vectors @ query).max())
    if distance == "l2":
        return float(-np.sqrt(((vectors - query) ** 2).sum(axis=1)).min())
    norms = np.linalg.norm(vectors, axis=1) * np.linalg.norm(query)
    cosines = np.divide(vectors @ query, norms, out=np.zeros(len(vectors)), where=norms > 0)
    return float(cosines.max())


def from_cosine(cosine: float, distance: str) -> float:
    """The score in ``distance`` of an item known only by its cosine: exact for unit vectors (what
    most embedding models give), the cosine itself for the cosine."""
    if distance == "l2":
        return -math.sqrt(max(0.0, 2.0 - 2.0 * cosine))
    return cosine
