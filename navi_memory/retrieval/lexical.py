"""Lexical evidence of one row: pure functions.

``query_share``: the share of a query's content words found in a text (light stemming,
``words.stem``), the lexical match strength a result's relevance reads when there is no vector.
"""

from __future__ import annotations

import unicodedata
from typing import Sequence

from .query import STOP_WORDS, tokenize
from .words import stem


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
