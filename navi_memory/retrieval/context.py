"""Conversation context in ranking: pure functions.

A conversation turn often answers a question only together with its neighbours ("Where did you
go?" / "Lisbon, last May"). ``smooth`` lets a turn borrow part of the score of the adjacent turns
of the same session, and brings a strong candidate's neighbours into the ranking. ``name_grams``
lists the word n-grams of a query that may name a person, for automatic person hints.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Mapping, Sequence

from .query import tokenize
from .search import Fused

NEIGHBOUR_WEIGHT = 0.2
MAX_NAME_WORDS = 3


def smooth(fused: Mapping[int, Fused], neighbours: Mapping[int, Sequence[int]],
           weight: float = NEIGHBOUR_WEIGHT) -> dict[int, Fused]:
    """Add ``weight x`` the best fused score among each row's session neighbours.

    Neighbours that were not candidates enter with that borrowed score alone (signal ``context``).
    """
    borrowed: dict[int, float] = {}
    for centre, adjacent in neighbours.items():
        if centre not in fused:
            continue
        for other in adjacent:
            borrowed[other] = max(borrowed.get(other, 0.0), fused[centre].score)
    out = dict(fused)
    for item_id, best in borrowed.items():
        gain = weight * best
        if gain <= 0:
            continue
        base = fused.get(item_id)
        if base is None:
            signals = {name: False for name in ("fts", "semantic", "substring")}
            out[item_id] = Fused(score=gain, raw={}, parts={"context": gain}, signals={**signals, "context": True})
        else:
            out[item_id] = replace(base, score=base.score + gain, parts={**base.parts, "context": gain},
                                   signals={**base.signals, "context": True})
    return out


def name_grams(query: str, max_words: int = MAX_NAME_WORDS) -> list[str]:
    """Lower-cased runs of 1..``max_words`` words of the query (candidate person names)."""
    words = tokenize(query)
    grams: dict[str, None] = {}
    for size in range(1, max_words + 1):
        for start in range(len(words) - size + 1):
            grams.setdefault(" ".join(words[start:start + size]), None)
    return list(grams)[:200]
