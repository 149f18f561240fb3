"""The pages about a user's life around the memory: the household, the conversation sessions the
pipeline reads, and what its LLM calls cost. Plain data, like ``pages``: a template and the
``/api`` JSON twin read the same dict.

Also ``has_memory``: whether the store holds anything for a user, so the browser can answer an
unknown (or mistyped) user with a 404 instead of empty pages that look like a real user.
"""

from __future__ import annotations

from typing import Any

from ..errors import NotFoundError, ValidationError
from ..models import SESSION_STATES
from .pages import Paging, Params

COSTLIEST = 20  # sessions listed on the usage page by default


def has_memory(store: Any, user: str) -> bool:
    """Anything stored for ``user``: an item (archived or expired too), a fact, a session, a
    person or a summary. Cheapest first; one query for a user with items."""
    return bool(store.list_items(user_id=user, status="any", include_expired=True, limit=1)
                or store.get_all_facts(user_id=user, limit=1, include_expired=True)
                or store.list_sessions(user_id=user, limit=1)
                or store.list_persons(user_id=user)
                or store.summary_history(user_id=user, limit=1))


def require_memory(store: Any, user: str) -> None:
    if not has_memory(store, user):
        raise NotFoundError(f"no memory stored for user {user}")


def household_page(store: Any, user: str, params: Params) -> dict[str, Any]:
    household = store.household(user_id=user)
    return {"user": user, "display_name": household["display_name"], "locale": household["locale"],
            "mode": household["mode"], "timezone": household["timezone"],
            "in_effect": household["timezone"] or store.settings.timezone, "persons": household["persons"],
            "memory_enabled": household["memory_enabled"]}


def sessions_page(store: Any, user: str, params: Params) -> dict[str, Any]:
    state = params.choice("state", SESSION_STATES)
    limit, offset = Paging.read(params)
    rows = store.list_sessions(user_id=user, state=state, limit=limit + 1, offset=offset)
    sessions = rows[:limit]
    return {"user": user, "filters": {"state": state}, "sessions": sessions,
            "page": Paging(limit, offset, len(sessions), has_next=len(rows) > limit).to_dict()}


def session_page(store: Any, user: str, params: Params) -> dict[str, Any]:
    # the id travels as ?id=: session ids are free text ("/" included), a path segment would be ambiguous
    session_id = params.query.get("id")
    if not session_id:
        raise ValidationError("give the session: ?id=...")
    return {"user": user, "session": store.get_session(session_id, user_id=user)}


def usage_page(store: Any, user: str, params: Params) -> dict[str, Any]:
    limit = params.integer("limit", COSTLIEST, 1, 1000)
    stats = store.usage_stats(user_id=user, limit=limit)
    return {"user": user, "limit": limit, **stats}
