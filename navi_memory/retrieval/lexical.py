"""Lexical evidence from one user's memories alone: pure functions.

A full-text index ranks with statistics of everything it holds (FTS5's bm25: how many rows hold a
word, the average row length), so one user's order and scores moved when other users' memories
were loaded. Here a row's lexical score is a sum, over the query terms it holds, of the term's
rarity among the rows searched (the user's, after the filters) times the weight of the column it
is in. The backend only says which rows hold which term in which column.

``query_share``: the share of a query's content words found in a text (light stemming,
``words.stem``), the lexical match strength a result's relevance reads when there is no vector.
"""

from __future__ import annotations

import math
import unicodedata
from typing import Iterable, Mapping, Sequence

from .query import STOP_WORDS, tokenize
from .words import stem

# Title, content and the previous-turn context (as FTS5's bm25 weighted them before: 2, 1, 0.3).
COLUMN_WEIGHTS = (2.0, 1.0, 0.3)


def rarity(holding: int, rows: int) -> float:
    """BM25's inverse document frequency over ``rows`` rows of which ``holding`` hold the term;
    always positive (a word every row holds still counts a little)."""
    rows = max(rows, holding, 1)
    return math.log(1.0 + (rows - holding + 0.5) / (holding + 0.5))


def term_match_scores(matches: Iterable[tuple[int, int, int]], rows: int,
                      holding: Mapping[int, int] | None = None) -> dict[int, float]:
    """``{row id: score}`` from ``(term index, column index, row id)`` triples, one per column of
    a row holding the term; ``rows``: how many rows were searched. A term counts once per column.
    ``holding``: how many searched rows hold each term, when ``matches`` lists only some of them."""
    holders: dict[int, set[int]] = {}
    columns: dict[tuple[int, int], set[int]] = {}
    for term, column, row in matches:
        holders.setdefault(term, set()).add(row)
        columns.setdefault((term, row), set()).add(column)
    weight = {term: rarity(len(ids) if holding is None else holding.get(term, len(ids)), rows)
              for term, ids in holders.items()}
    scores: dict[int, float] = {}
    for (term, row), held in columns.items():
        scores[row] = scores.get(row, 0.0) + weight[term] * sum(COLUMN_WEIGHTS[c] for c in held)
    return scores


def best(scores: dict[int, float], k: int) -> list[tuple[int, float]]:
    """The ``k`` best ``(id, score)``, ties by id (so the order never depends on storage)."""
    return sorted(scores.items(), key=lambda pair: (-pair[1], pair[0]))[:k]


def _folded(word: str) -> str:
    """Without diacritics (as the full-text indexes match: café = cafe), lightly stemmed."""
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
