"""When the pipeline runs: stale sessions, every N user messages, and "remember that ...". Pure.

A session is **stale** when it has been idle for ``stale_minutes`` (default 30) and has activity
that was not processed yet: never extracted, extracted before its last activity, or holding
messages past the last extracted (or stored as a chunk) one. Stale sessions are processed when the user starts a new
session and by ``navi-memory extract``. The backends' ``stale_sessions`` query is the same rule
in SQL; ``is_stale`` states it for one session.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, Mapping, Sequence

from . import rules

EVERY_N = "every_n"
REMEMBER = "remember"


def cutoff(now: datetime, minutes: float) -> datetime:
    return now - timedelta(minutes=minutes)


def is_stale(session: Mapping[str, Any], now: datetime, minutes: float) -> bool:
    last = session.get("last_active")
    if last is None or last >= cutoff(now, minutes) or not session.get("message_count"):
        return False
    extracted = session.get("extracted_at")
    return (extracted is None or extracted < last or session.get("extracted_seq", 0) < session["message_count"]
            or session.get("chunked_seq", 0) < session["message_count"])


def in_conversation(session: Mapping[str, Any], new_messages: Sequence[Mapping[str, Any]], every: int) -> list[str]:
    """Why the messages just added call for an extraction now (empty: they do not)."""
    reasons = []
    if every > 0 and session["user_messages"] - session.get("extracted_user_messages", 0) >= every:
        reasons.append(EVERY_N)
    if any(m["role"] == "user" and rules.asks_to_remember(m["content"]) for m in new_messages):
        reasons.append(REMEMBER)
    return reasons
