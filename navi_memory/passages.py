"""A long text's vector from its passages, as pure functions.

Embedding models read a window of tokens and drop the rest (all-MiniLM-L6-v2: 256 word pieces,
about 1,000 characters of English), so a long note was searchable by its opening only. A text
longer than ``limit`` characters is cut into passages at paragraph, line, sentence or word ends,
each passage is embedded, and the text's vector is their mean, each weighted by its length: every
part of the text now moves its vector. Texts within the limit are embedded whole, as before.
"""

from __future__ import annotations

import re
from typing import Sequence

import numpy as np

PASSAGE_CHARS = 1000  # about what all-MiniLM-L6-v2 reads; LoCoMo's longest turn with its context is 843
PASSAGES_PER_REQUEST = 64  # a provider request's passages when long texts split (at least the texts given)
# zero-width, so that the units of a split join back into the text: paragraphs, lines, sentences, words
_BREAKS = tuple(re.compile(p) for p in (r"(?<=\n\n)", r"(?<=\n)", r"(?<=[.!?])(?=\s)", r"(?=\s)"))


def passages(text: str, limit: int = PASSAGE_CHARS) -> list[str]:
    """``text`` in pieces of at most ``limit`` characters (its whitespace between pieces dropped),
    cut at the coarsest break that fits: paragraphs, then lines, sentences, words; a word longer
    than ``limit`` is cut where it reaches it. ``[text]`` when it fits."""
    if limit < 1:
        raise ValueError("a passage holds at least one character")
    if len(text) <= limit:
        return [text]
    return [piece for piece in (p.strip() for p in _split(text, limit, 0)) if piece] or [text[:limit]]


def _split(text: str, limit: int, level: int) -> list[str]:
    if len(text) <= limit:
        return [text]
    if level == len(_BREAKS):
        return [text[start:start + limit] for start in range(0, len(text), limit)]
    out: list[str] = []
    current = ""  # never starting with whitespace: a passage is measured as it is kept
    for unit in _BREAKS[level].split(text):
        if len(current) + len(unit) <= limit:
            current = (current + unit).lstrip()
            continue
        if current:
            out.append(current)
        current = ""
        unit = unit.lstrip()
        if len(unit) <= limit:
            current = unit
        else:
            out.extend(_split(unit, limit, level + 1))
    if current:
        out.append(current)
    return out


def pooled(vectors: Sequence[Sequence[float]] | Sequence[np.ndarray], weights: Sequence[float]) -> np.ndarray:
    """One vector for the passages': the ``weights``-weighted mean of their directions, as long as
    their weighted mean length (unit vectors stay unit; a zero vector adds nothing)."""
    if len(vectors) != len(weights) or not vectors:
        raise ValueError("one weight per passage vector, and at least one")
    matrix = np.asarray(vectors, dtype=np.float64)
    share = np.asarray(weights, dtype=np.float64) / float(sum(weights))
    norms = np.linalg.norm(matrix, axis=1)
    directions = np.divide(matrix, norms[:, None], out=np.zeros_like(matrix), where=norms[:, None] > 0)
    mean = share @ directions
    size = float(np.linalg.norm(mean))
    if size == 0.0:
        return np.zeros(matrix.shape[1], dtype=np.float32)
    out: np.ndarray = (mean / size * float(share @ norms)).astype(np.float32)
    return out
