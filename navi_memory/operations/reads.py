"""What a read acts on, checked: the filters of a listing or search, the scopes of a call by
id, the time zone kept for a user. Pure: shared by the operations and the adapters."""

from __future__ import annotations

from datetime import datetime, tzinfo
from typing import Any

from ..backends.base import Filters
from ..core import keyed
from ..core import validation as v
from ..core.filters import conditions
from ..core.timeutil import zone
from ..errors import ConfigurationError
from ..models import ITEM_TYPES, SEARCH_STATUSES


def user_zone(name: str) -> tzinfo:
    """The time zone kept for a user (checked when it was kept; unknown here only on a machine
    without that zone in its time zone database)."""
    try:
        return zone(name)
    except ValueError as exc:
        raise ConfigurationError(f"the time zone kept for the user: {exc}") from exc


def read_filters(now: datetime, user_id: Any, all_users: bool, status: str = "active", theme: Any = None,
                 types: Any = None, recency_days: Any = None, person: Any = None, include_expired: bool = False,
                 namespace_prefix: Any = None, agent_id: Any = None, run_id: Any = None,
                 metadata: Any = None) -> Filters:
    """The checked filters of a read (``ValidationError`` naming the bad one)."""
    uid = None if (all_users and user_id is None) else v.user_id(user_id)
    return Filters(
        user_id=uid, now=now,
        status=v.choice(status or "active", "status", SEARCH_STATUSES),
        theme=None if theme in (None, "") else v.slug(theme),
        types=tuple(v.choice(t, "type", ITEM_TYPES) for t in v.names(types, "types")) or None,
        since=v.days_from(now, recency_days, "recency_days", back=True),
        person=v.optional_text(person, "person", v.MAX_KEY),
        include_expired=bool(include_expired),
        namespace_prefix=keyed.prefix_filter(namespace_prefix),
        agent_id=v.scope_id(agent_id, "agent_id"),
        run_id=v.scope_id(run_id, "run_id"),
        metadata=conditions(metadata),
    )


def item_scope(agent_id: Any, run_id: Any) -> dict[str, str]:
    """The checked scopes a call by id acts in, only those set (none: every item of the user)."""
    scope = {"agent_id": v.scope_id(agent_id, "agent_id"), "run_id": v.scope_id(run_id, "run_id")}
    return {name: value for name, value in scope.items() if value is not None}
