"""Superseded statements: a retrieved conversation turn that said a value a newer fact replaced.

A fact's history row records the session and message its value was said in. A turn stored from
that session (``source_ref``: ``session_id``, ``first_seq`` .. ``last_seq``) that holds the
message said something that is no longer true: "I live in Berlin" after ``location`` became
Munich. Search keeps such a turn (it may answer "where did I live before?") but ranks it below
the current fact and marks it, so every prompt block shows it as past. Pure functions.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Mapping, Sequence

from ..models import SearchResult

# the share of its score a superseded turn keeps; it also ends below the fact that replaced it
SUPERSEDED_FACTOR = 0.5
BELOW = 0.999  # a superseded turn scores at most this share of the current fact's result


def _seq(value: Any) -> int | None:
    try:
        return int(str(value))
    except ValueError:
        return None


def _same(a: Any, b: Any) -> bool:
    return " ".join(str(a).casefold().split()) == " ".join(str(b).casefold().split())


def replaced_by(row: Mapping[str, Any], past: Sequence[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The history row (with its fact's ``key``, ``current_value`` and ``item_id``) of a value the
    turn ``row`` said that a newer one replaced, or None. A value said again since (history A, B,
    then A again) is current, not past."""
    ref = row.get("source_ref") or {}
    first, last = _seq(ref.get("first_seq")), _seq(ref.get("last_seq"))
    if row.get("fact_id") is not None or first is None or last is None:
        return None
    for said in past:
        seq = _seq(said.get("message_id"))
        if said.get("session_id") == ref.get("session_id") and said.get("user_id") == row.get("user_id") \
                and seq is not None and first <= seq <= last and not _same(said["value"], said["current_value"]):
            return said
    return None


def replaced_turns(rows: Sequence[Mapping[str, Any]], past: Sequence[Mapping[str, Any]]) -> dict[int, Mapping[str, Any]]:
    """Of the item ``rows``, the turns that said a value a newer one replaced: row id -> the
    history row of that value (``replaced_by``)."""
    out: dict[int, Mapping[str, Any]] = {}
    for row in rows if past else ():
        said = replaced_by(row, past)
        if said is not None:
            out[row["id"]] = said
    return out


def order_key(result: SearchResult) -> float:
    """What orders ``result`` in its list: the blend with a reranking model's score when one ran,
    else the first stage's rank key."""
    return result.scores.get("rerank_blend", result.scores.get("rank", result.score))


def demote(results: Sequence[SearchResult], replaced: Mapping[int, Mapping[str, Any]]) -> list[SearchResult]:
    """``results`` with each superseded turn (``replaced``: result id -> ``replaced_by``) marked
    (``superseded_by``: ``key: current value``), its relevance score and its order key scaled by
    ``SUPERSEDED_FACTOR`` (the change of score as signal ``superseded`` in ``scores``) and each kept
    below the result of the fact that replaced it; then re-ordered by the order key (stable: the
    others keep their order)."""
    if not replaced:
        return list(results)
    facts = {r.id: r for r in results if r.kind == "fact"}
    keyed = []
    for r in results:
        key, said = order_key(r), replaced.get(r.id)
        if said is None:
            keyed.append((key, r))
            continue
        score, key = r.score * SUPERSEDED_FACTOR, key * SUPERSEDED_FACTOR
        current = facts.get(said.get("item_id"))  # type: ignore[arg-type]
        if current is not None:
            score, key = min(score, current.score * BELOW), min(key, order_key(current) * BELOW)
        scores = {**r.scores, "superseded": score - r.score}
        scores["rerank_blend" if "rerank_blend" in r.scores else "rank"] = key
        keyed.append((key, replace(r, score=score, superseded_by=f"{said['key']}: {said['current_value']}",
                                   scores=scores)))
    # a model reranks only the first results, the others follow them: each part keeps its own scale
    return [r for _, r in sorted(keyed, key=lambda pair: ("rerank_blend" not in pair[1].scores, -pair[0]))]
