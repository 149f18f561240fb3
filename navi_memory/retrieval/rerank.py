"""Heuristic adjustments on top of the fused score, then the final order.

* pinned: +0.20, and exempt from recency decay;
* matched person hint: +0.15;
* recency decay: -0.10 x min(1, age_days / 90), age from ``observed_at`` else ``created_at``;
* a query asking *when*, and a row holding a time expression: +0.20 (``dates``);
* a query naming a date, month or year, and a row observed then (or shortly after): +0.75.

Ties are broken by newer ``created_at`` first, then by id, so the order is stable.
"""

from __future__ import annotations

from datetime import datetime
from typing import Collection, Hashable, NamedTuple

from .dates import QueryTime

PINNED_BOOST = 0.20
PERSON_BOOST = 0.15
RECENCY_PENALTY = 0.10
RECENCY_HORIZON_DAYS = 90.0
# Chosen leave one conversation out on LoCoMo dev (MiniLM), every fold the same: docs/benchmarks-history.md.
WHEN_BOOST = 0.20
DATE_BOOST = 0.75


class RankInput(NamedTuple):  # tuples: built for every candidate of every search, and cheaper than dataclasses
    id: Hashable
    fused: float
    created_at: datetime
    observed_at: datetime | None = None
    pinned: bool = False
    person: str | None = None
    mentions_time: bool = False


class Ranked(NamedTuple):
    id: Hashable
    score: float
    adjustments: dict[str, float]


def adjustments(
    row: RankInput,
    now: datetime,
    person_hints: Collection[str] = (),
    recency_decay: bool = True,
    when: QueryTime | None = None,
) -> dict[str, float]:
    """The non-zero adjustments that apply to one row."""
    out: dict[str, float] = {}
    if when is not None and when.asks_when and row.mentions_time:
        out["when"] = WHEN_BOOST
    if when is not None and when.covers(row.observed_at):
        out["date"] = DATE_BOOST
    if row.pinned:
        out["pinned"] = PINNED_BOOST
    if row.person is not None and row.person in person_hints:
        out["person"] = PERSON_BOOST
    if recency_decay and not row.pinned:
        seen = row.observed_at or row.created_at
        age_days = max(0.0, (now - seen).total_seconds() / 86400.0)
        penalty = RECENCY_PENALTY * min(1.0, age_days / RECENCY_HORIZON_DAYS)
        if penalty > 0:
            out["recency"] = -penalty
    return out


def rerank(
    rows: list[RankInput],
    now: datetime,
    person_hints: Collection[str] = (),
    recency_decay: bool = True,
    when: QueryTime | None = None,
) -> list[Ranked]:
    """Apply the adjustments and return rows best first."""
    scored = []
    for row in rows:
        adj = adjustments(row, now, person_hints, recency_decay, when)
        scored.append((row, Ranked(row.id, row.fused + sum(adj.values()), adj)))
    scored.sort(key=lambda pair: (-pair[1].score, -pair[0].created_at.timestamp(), _id_key(pair[0].id)))
    return [ranked for _, ranked in scored]


def _id_key(value: Hashable) -> tuple[int, str]:
    return (0, f"{value:020d}") if isinstance(value, int) else (1, str(value))
