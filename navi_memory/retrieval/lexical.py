"""Lexical evidence of one row: pure functions.

BM25 with one user's statistics (``rarity``, ``Bm25``): what SQLite's per-user lexical index ranks
with (``backends.sqlite.lexicon``), FTS5's ``bm25()`` formula (column weights title 2, content 1,
previous-turn context 0.3; the rarity always positive; k1 0.9 and b 0.9 where FTS5 has 1.2 and
0.75) over the rows of the searching user only, so other users' rows change neither a user's
lexical candidates nor their order.

``query_share``: the share of a query's content words found in a text (light stemming,
``words.stem``), the lexical match strength a result's relevance reads when there is no vector.
``excerpt``: the part of a long text that holds most of them, a result's snippet; ``around``: a
window of a long text centred on it, what a reranking model reads.
"""

from __future__ import annotations

import functools
import math
import unicodedata
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

from ..passages import passages
from .query import STOP_WORDS, tokenize
from .words import stem


# Chosen leave one conversation out on LoCoMo dev among the settings that leave no question category
# lower (FTS5's 1.2 and 0.75 until 2026-11-28; benchmarks/locomo_bm25_params.py, docs/benchmarks.md)
K1, B = 0.9, 0.9
COLUMN_WEIGHTS = {"title": 2.0, "content": 1.0, "context": 0.3}


def rarity(holding: int, rows: int) -> float:
    """BM25's inverse document frequency of a word ``holding`` of ``rows`` rows hold, always positive
    (Lucene's form; FTS5's ``bm25()`` drops to 1e-6 for a word in half the rows or more: with one
    user's statistics that form ranked LoCoMo dev's evidence lower, docs/benchmarks-history.md)."""
    return math.log(1.0 + (rows - holding + 0.5) / (holding + 0.5))


@dataclass(frozen=True)
class Bm25:
    """One query's BM25 over one user's rows: ``rows`` rows of ``tokens`` words in all.

    A row's score is ``sum(weight[w] * f / (f + base + slope * length))`` over the query's words
    ``w`` it holds, ``f`` the word's column-weighted count in the row, ``length`` the row's words:
    a form a database can sum row by row (``base``, ``slope``, ``weights`` are its parameters)."""

    weights: Mapping[str, float]
    base: float
    slope: float

    @classmethod
    def create(cls, asked: Mapping[str, int], holding: Mapping[str, int], rows: int, tokens: int) -> "Bm25":
        """``asked``: ``{word: how many query terms have it}``; ``holding``: how many of the rows
        hold each word (absent: none, the word scores nothing)."""
        average = tokens / rows if rows > 0 and tokens > 0 else 1.0
        weights = {w: n * rarity(holding[w], rows) * (K1 + 1) for w, n in asked.items() if holding.get(w)}
        return cls(weights, K1 * (1 - B), K1 * B / average)

    def score(self, counts: Mapping[str, float], length: int) -> float:
        """A row's score from its column-weighted word counts and length."""
        norm = self.base + self.slope * length
        return sum(self.weights[w] * f / (f + norm) for w, f in counts.items() if w in self.weights and f > 0)

    def row_scores(self, found: Mapping[str, "Occurrences"]) -> tuple[np.ndarray, np.ndarray]:
        """Every row holding a weighted word (ascending) and its score: ``score`` of each row, from
        the words' occurrences."""
        rows: list[np.ndarray] = []
        parts: list[np.ndarray] = []
        for word, weight in self.weights.items():
            occurrences = found.get(word)
            if occurrences is None or not len(occurrences.rows):
                continue
            held, first, which = np.unique(occurrences.rows, return_index=True, return_inverse=True)
            counts = np.bincount(which, weights=occurrences.weights)
            rows.append(held)
            parts.append(weight * counts / (counts + self.base + self.slope * occurrences.lengths[first]))
        if not rows:
            return np.zeros(0, dtype=np.int64), np.zeros(0)
        held, which = np.unique(np.concatenate(rows), return_inverse=True)
        return held, np.bincount(which, weights=np.concatenate(parts))


@dataclass(frozen=True)
class Occurrences:
    """One word's occurrences in one user's rows, one entry each: the row, the row's length (words)
    and the weight of the column it is in (``COLUMN_WEIGHTS``)."""

    rows: np.ndarray
    lengths: np.ndarray
    weights: np.ndarray


def best_first(rows: np.ndarray, scores: np.ndarray, limit: int | None = None) -> list[tuple[int, float]]:
    """``(row, score)`` by score, highest first, ties by row; the first ``limit`` (None: all)."""
    if limit is not None and len(scores) > limit > 0:
        # only rows scoring at least the limit-th best can be among the first (ties included)
        kept = np.flatnonzero(scores >= np.partition(scores, len(scores) - limit)[len(scores) - limit])
        rows, scores = rows[kept], scores[kept]
    order = np.lexsort((rows, -scores))[:limit]
    return list(zip(rows[order].tolist(), scores[order].tolist()))


@functools.lru_cache(maxsize=1 << 15)  # a candidate's words come back search after search
def _folded(word: str) -> str:
    """Without diacritics (as SQLite's full-text index matches: café = cafe), lightly stemmed.
    Kept per word: relevance folds every word of each matched candidate (about 740 a search on
    100k items: p50 29.8 -> 27.5 ms, PostgreSQL: benchmarks/folded_words_ab.py)."""
    return stem("".join(c for c in unicodedata.normalize("NFKD", word) if not unicodedata.combining(c)))


def content_stems(terms: Sequence[str]) -> set[str]:
    """The folded stems of the query terms that are not stop words."""
    return {_folded(t) for t in terms if t not in STOP_WORDS}


def query_share(terms: Sequence[str], text: str, substrings: bool = False) -> float:
    """Share (0..1) of the query's content words that ``text`` holds (``_folded``); with
    ``substrings``, a word held anywhere in the text counts (the substring fallback's match)."""
    if substrings:
        wanted_words = {t for t in terms if t not in STOP_WORDS}
        folded = text.casefold()
        return sum(w in folded for w in wanted_words) / len(wanted_words) if wanted_words else 0.0
    wanted = content_stems(terms)
    if not wanted:
        return 0.0
    held = {_folded(w) for w in tokenize(text)}
    # a word the text holds, or begins, or a word of five letters or more the query word begins
    # with (the indexes' porter stemmer cuts deeper: "lattes" is "latt", "preference" "prefer")
    return sum(w in held or any(h.startswith(w) or (len(h) >= 5 and w.startswith(h)) for h in held)
               for w in wanted) / len(wanted)


def excerpt(text: str, terms: Sequence[str], size: int) -> str | None:
    """The passage of ``text`` (``passages.passages`` of ``size`` - 2 characters) holding the largest
    share of the query's content words, with an ellipsis on each side the text goes on: a long
    note found by its end shows its end, not its opening. None when ``text`` fits in ``size`` or
    no passage after the first holds more of the words than the first (the opening serves)."""
    if len(text) <= size or not content_stems(terms):
        return None
    pieces = passages(text, max(1, size - 2))
    shares = [query_share(terms, piece) for piece in pieces]
    best = max(range(len(pieces)), key=lambda i: (shares[i], -i))
    if best == 0 or shares[best] <= shares[0]:
        return None
    return "…" + pieces[best] + ("…" if best < len(pieces) - 1 else "")


def around(text: str, part: str, size: int) -> str:
    """``size`` characters of ``text`` centred on ``part`` (an ``excerpt``, its ellipses ignored),
    or its opening when ``part`` is not a later part of it; ``text`` itself when it fits."""
    if len(text) <= size:
        return text
    core = part.strip("…")
    at = text.find(core) if part.startswith("…") and core else -1
    if at <= 0:
        return text[:size]
    start = max(0, min(at - (size - len(core)) // 2, len(text) - size))
    return text[start:start + size]
