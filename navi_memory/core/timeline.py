"""Where a statement about a fact goes in the fact's timeline: by when it was said, not when it
was processed (both backends' ``upsert_fact`` apply the ``Placement`` this computes).

A fact is a timeline: its history (values valid in ``[valid_from, valid_to)``) and the current
value, said at ``observed_at``. A statement said at or after the current value's time replaces
it (or confirms it); an older one never does: it enters the history at its own time, cutting the
value in effect then short, and lasts until the next value was said.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Mapping, Sequence

# the columns a history row copies from the statement it records
STATEMENT_COLUMNS = ("value", "source", "confidence", "source_context", "source_session_id", "source_message_id")


@dataclass(frozen=True)
class Span:
    """A history row to insert: the statement's columns and its validity."""

    statement: Mapping[str, Any]
    valid_from: datetime
    valid_to: datetime


@dataclass
class Placement:
    """What a statement does to a fact.

    ``action``: ``unchanged`` (it confirms the value in effect at its time), ``updated`` (it is
    the newest: it becomes the current value) or ``history`` (older than the current value and
    different from the value in effect then: recorded in the history only). ``insert``: history
    rows to add; ``edits``: existing history rows to change ({id: {column: time}});
    ``current_since``: the current value's new statement time, when an older statement of the
    same value moves it earlier."""

    action: str
    insert: list[Span] = field(default_factory=list)
    edits: dict[Any, dict[str, datetime]] = field(default_factory=dict)
    current_since: datetime | None = None


def same_value(a: Any, b: Any) -> bool:
    return str(a) == str(b)


def place(current: Mapping[str, Any], history: Sequence[Mapping[str, Any]], statement: Mapping[str, Any],
          at: datetime) -> Placement:
    """The placement of ``statement`` (its ``value`` and columns) said at ``at`` in the fact whose
    current row is ``current`` (said at its ``observed_at``) and whose history rows are ``history``
    (with ``id``, ``value``, ``valid_from``, ``valid_to``)."""
    since = current["observed_at"]
    if at >= since:
        if same_value(statement["value"], current["value"]):
            return Placement("unchanged")
        return Placement("updated", insert=[Span(current, since, at)])
    rows = sorted(history, key=lambda h: h["valid_from"])
    before = [h for h in rows if h["valid_from"] <= at]
    after = [h for h in rows if h["valid_from"] > at]
    in_effect = before[-1] if before else None
    following: Mapping[str, Any] = after[0] if after else current
    next_start = following["valid_from"] if after else since
    if in_effect is not None and same_value(in_effect["value"], statement["value"]) and in_effect["valid_to"] > at:
        return Placement("unchanged")
    edits: dict[Any, dict[str, datetime]] = {}
    if in_effect is not None and in_effect["valid_to"] > at:
        edits[in_effect["id"]] = {"valid_to": at}
    if same_value(following["value"], statement["value"]):  # the next value was said earlier already
        if not after:
            return Placement("unchanged", edits=edits, current_since=at)
        edits[following["id"]] = {**edits.get(following["id"], {}), "valid_from": at}
        return Placement("history", edits=edits)
    return Placement("history", insert=[Span(statement, at, next_start)], edits=edits)
