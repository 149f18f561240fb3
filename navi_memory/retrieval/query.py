"""Turn user text into terms a lexical index can match without ever raising a syntax error.

Query text is split into word tokens (so FTS operators such as ``NOT``, ``NEAR``, ``"``, ``*``, ``-``
and ``:`` lose their meaning), common English function words are dropped, and the remaining
terms are OR-ed: any term may match, and the index's ranking (BM25) rewards documents matching
more and rarer terms. Stemming is done by the index itself (FTS5 ``porter``, Postgres ``english``).
"""

from __future__ import annotations

import re

MAX_TERMS = 32
_TOKEN = re.compile(r"\w+", re.UNICODE)

STOP_WORDS = frozenset(
    """
    a about above after again against all am an and any are as at be because been before being
    below between both but by can could did do does doing down during each few for from further
    had has have having he her here hers herself him himself his how i if in into is it its itself
    just me more most my myself no nor not now of off on once only or other our ours ourselves out
    over own same she should so some such than that the their theirs them themselves then there
    these they this those through to too under until up very was we were what when where which
    while who whom why will with would you your yours yourself yourselves s t d ll m re ve
    also did does ever get got let may might must shall us
    """.split()
)


def is_match_all(query: str | None) -> bool:
    """An empty query or ``*`` means "the newest items" rather than a text search."""
    return query is None or query.strip() in ("", "*")


def tokenize(text: str) -> list[str]:
    """Lower-cased word tokens, in order, duplicates kept."""
    return [t.lower() for t in _TOKEN.findall(text)]


def query_terms(text: str, max_terms: int = MAX_TERMS) -> list[str]:
    """Distinct search terms of ``text``: stop words dropped unless nothing else is left."""
    seen: dict[str, None] = {}
    for token in tokenize(text):
        seen.setdefault(token, None)
    tokens = list(seen)
    content = [t for t in tokens if t not in STOP_WORDS]
    return (content or tokens)[:max_terms]


def select_matching_terms(terms: list[str], estimated_rows: dict[str, float],
                          row_budget: float) -> tuple[list[str], bool]:
    """Which terms select lexical candidates, and whether a row needs all of them.

    Terms are taken rarest first while the rows they are expected to match add up to at most
    ``row_budget``; the others (common words, which would make the index rank every row holding
    them while adding little to any score) still count in the ranking of the selected rows. When
    even the rarest term exceeds the budget, rows must contain all the terms. Terms without an
    estimate count as matching no rows.
    """
    chosen: set[str] = set()
    total = 0.0
    for term in sorted(terms, key=lambda t: estimated_rows.get(t, 0.0)):
        total += estimated_rows.get(term, 0.0)
        if total > row_budget:
            break
        chosen.add(term)
    if chosen:
        return [t for t in terms if t in chosen], False
    return list(terms), len(terms) > 1


def fts5_quote(text: str) -> str:
    """One FTS5 string literal: the text is matched as a phrase, never parsed as syntax."""
    return '"' + text.replace('"', '""') + '"'


def fts5_or_expression(terms: list[str]) -> str:
    """``"a" OR "b" OR ...``; empty when there are no terms."""
    return " OR ".join(fts5_quote(t) for t in terms)


def like_pattern(term: str, escape: str = "\\") -> str:
    """A ``LIKE '%term%'`` pattern with the wildcards of ``term`` escaped."""
    escaped = term.replace(escape, escape * 2).replace("%", escape + "%").replace("_", escape + "_")
    return f"%{escaped}%"
