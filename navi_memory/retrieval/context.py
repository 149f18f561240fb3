"""Conversation context in ranking: pure functions.

A conversation turn often answers a question only together with its neighbours ("Where did you
go?" / "Lisbon, last May"). ``smooth`` lets a turn borrow part of the score of the adjacent turns
of the same session, and brings a strong candidate's neighbours into the ranking. ``name_grams``
lists the word n-grams of a query that may name a person, for automatic person hints.

A query that names a person ("What does Melanie do to relax?") is matched on the person by the
person hint (``rerank``) and by full-text; in the query's embedding the name pulls toward every
item about that person, whatever its topic. ``without_names`` gives the query's text without the
names, and ``focus`` the query vector that mixes in that text's vector (``PERSON_FOCUS``).
"""

from __future__ import annotations

import re
from typing import Iterable, Mapping, Sequence

import numpy as np

from .query import tokenize
from .search import Fused

NEIGHBOUR_WEIGHT = 0.2
MAX_NAME_WORDS = 3
# Share of the name-less query's vector in the query vector of semantic search when the query
# names a known person; chosen leave one conversation out on LoCoMo dev (docs/benchmarks-history.md).
PERSON_FOCUS = 0.7


def smooth(fused: Mapping[int, Fused], neighbours: Mapping[int, Sequence[int]],
           weight: float = NEIGHBOUR_WEIGHT) -> dict[int, Fused]:
    """Add ``weight x`` the best fused score among each row's session neighbours.

    Neighbours that were not candidates enter with that borrowed score alone (signal ``context``).
    A row's relevance becomes at least ``weight x`` its best neighbour's: a turn brought in as
    the context of a relevant one is worth that share of it, never more than its own evidence
    otherwise.
    """
    borrowed: dict[int, tuple[float, float]] = {}
    for centre, adjacent in neighbours.items():
        if centre not in fused:
            continue
        for other in adjacent:
            score, relevance = borrowed.get(other, (0.0, 0.0))
            borrowed[other] = (max(score, fused[centre].score), max(relevance, fused[centre].relevance))
    out = dict(fused)
    for item_id, (best, best_relevance) in borrowed.items():
        gain = weight * best
        if gain <= 0:
            continue
        base = fused.get(item_id)
        if base is None:
            signals = {name: False for name in ("fts", "semantic", "substring")}
            out[item_id] = Fused(score=gain, raw={}, parts={"context": gain}, signals={**signals, "context": True},
                                 relevance=weight * best_relevance)
        else:
            out[item_id] = base._replace(score=base.score + gain, parts={**base.parts, "context": gain},
                                         signals={**base.signals, "context": True},
                                         relevance=max(base.relevance, weight * best_relevance))
    return out


def name_grams(query: str, max_words: int = MAX_NAME_WORDS) -> list[str]:
    """Lower-cased runs of 1..``max_words`` words of the query (candidate person names)."""
    words = tokenize(query)
    grams: dict[str, None] = {}
    for size in range(1, max_words + 1):
        for start in range(len(words) - size + 1):
            grams.setdefault(" ".join(words[start:start + size]), None)
    return list(grams)[:200]


def without_names(query: str, names: Iterable[str]) -> str | None:
    """``query`` without the ``names`` it contains (whole words, any case, with a possessive
    ``'s``); a name of several words also by its first word. None when no name occurs, or when
    nothing but names (and punctuation) would be left."""
    forms = {" ".join(n.split()) for name in names for n in (name, name.split()[0] if name.split() else "")}
    forms.discard("")
    if not forms:
        return None
    alternatives = "|".join(re.escape(f) for f in sorted(forms, key=len, reverse=True))
    pattern = re.compile(rf"(?<!\w)(?:{alternatives})(?:['\u2019]s)?(?!\w)", re.IGNORECASE)
    rest, count = pattern.subn(" ", query)
    rest = " ".join(rest.split())
    if not count or not tokenize(rest):
        return None
    return rest


def focus(whole: np.ndarray, rest: np.ndarray, share: float = PERSON_FOCUS) -> np.ndarray:
    """The unit vector ``(1 - share) x whole + share x rest`` (each scaled to unit length first);
    ``whole`` when the mix has no length."""
    def unit(v: np.ndarray) -> np.ndarray:
        norm = float(np.linalg.norm(v))
        return v / norm if norm > 0 and np.isfinite(norm) else np.zeros_like(v)

    mixed = (1.0 - share) * unit(np.asarray(whole, dtype=np.float32)) + share * unit(np.asarray(rest, dtype=np.float32))
    norm = float(np.linalg.norm(mixed))
    return whole if not norm > 0 or not np.isfinite(norm) else (mixed / norm).astype(np.float32)
