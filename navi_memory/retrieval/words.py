"""Word overlap without embeddings: content words, a light stemmer, and Jaccard similarity. Pure.

Used where two short texts must be recognised as the same statement without a vector: the
lexical promotion job ("I go climbing on Tuesday" ~ "Tuesday climbing session") and the merge of
a rule fact with the chat model's version of it. Content words are the lower-cased word tokens
minus stop words and filler verbs; each is stemmed by dropping a common English ending
(climbing -> climb, tuesdays -> tuesday, takes -> take), so inflections count as one word.
"""

from __future__ import annotations

import re
from typing import AbstractSet

from .query import STOP_WORDS

# Words that say little about what a note is about: filler verbs, times of repetition, and the
# assistant's usual third-person subject ("the user ...").
FILLER = frozenset(
    """
    again always usually often sometimes still another every each today tonight tomorrow
    go goes going went gone come comes coming came do doing done make makes made
    take takes taking took get gets getting like likes user users one
    """.split()
)
_WORD = re.compile(r"[^\W_]+", re.UNICODE)
_ENDINGS = ("ing", "ies", "ied", "es", "ed", "ly", "s")


def stem(word: str) -> str:
    """``word`` without a common English ending, keeping at least three letters."""
    for ending in _ENDINGS:
        if word.endswith(ending) and len(word) - len(ending) >= 3:
            base = word[: -len(ending)]
            if ending in ("ies", "ied"):
                return base + "y"
            if ending == "es" and not base.endswith(("s", "x", "z", "ch", "sh")):
                continue  # lattes, takes: only the "s" is an ending
            if ending == "s" and base.endswith(("s", "u", "i")):  # class, bus, analysis: not plurals
                return word
            if ending in ("ing", "ed") and len(base) > 3 and base[-1] == base[-2] and base[-1] not in "lsz":
                return base[:-1]  # running -> run, planned -> plan
            return base
    return word


def content_words(text: str) -> frozenset[str]:
    """The stems of the words of ``text`` that carry its meaning (stop words and fillers dropped;
    digits kept: "8:15" gives ``8`` and ``15``)."""
    words = (w.lower() for w in _WORD.findall(text.replace("'s ", " ").replace("’s ", " ")))
    return frozenset(stem(w) for w in words if w not in STOP_WORDS and w not in FILLER)


def jaccard(a: AbstractSet[str], b: AbstractSet[str]) -> float:
    """Shared words over all words of the two sets (0 when either is empty)."""
    if not a or not b:
        return 0.0
    return len(a & b) / len(a | b)
