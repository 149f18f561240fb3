"""What each page shows, as plain data: the HTML templates and the ``/api`` JSON read the same dicts.

Every builder takes the (blocking) store, the user and the query parameters, and asks the store
for one page of rows (LIMIT/OFFSET plus a count, or one row more than the page to know whether a
next page exists), so a user with 100k items costs the same as one with 100.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from ..core import validation as v
from ..errors import ValidationError
from ..models import FACT_CATEGORIES, FACT_SORT_FIELDS, ITEM_STATUSES, ITEM_TYPES, _jsonable

PAGE_SIZE, MAX_PAGE_SIZE = 50, 200
SEARCH_SIZE = 10
SUMMARY_VERSIONS = 20
SIGNALS = ("fts", "semantic", "substring", "context")


def jsonable(value: Any) -> Any:
    """Models, datetimes and containers as JSON-ready values."""
    if hasattr(value, "to_dict"):
        return value.to_dict()
    if isinstance(value, dict):
        return {k: jsonable(x) for k, x in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(x) for x in value]
    return _jsonable(value)


class Params:
    """Typed reads of query parameters; a bad value is a ``ValidationError`` naming it."""

    def __init__(self, query: Mapping[str, str]) -> None:
        self.query = query

    def text(self, name: str) -> str | None:
        value = (self.query.get(name) or "").strip()
        return value or None

    def integer(self, name: str, default: int, low: int, high: int) -> int:
        raw = self.text(name)
        if raw is None:
            return default
        value = v.integer_text(raw, name)  # int() would take "1_0" and other scripts' digits, and fail past 4,300
        if not low <= value <= high:
            raise ValidationError(f"{name} must be between {low} and {high}, got {value}")
        return value

    def share(self, name: str, default: float) -> float:
        """A number from 0 to 1 (``default`` when absent)."""
        raw = self.text(name)
        if raw is None:
            return default
        try:
            value = float(raw)
        except ValueError:
            value = -1.0
        if not 0.0 <= value <= 1.0:
            raise ValidationError(f"{name} must be a number from 0 to 1")
        return value

    def flag(self, name: str) -> bool:
        return (self.text(name) or "").lower() in ("1", "true", "on", "yes")

    def choice(self, name: str, allowed: tuple[str, ...], default: str | None = None) -> str | None:
        value = self.text(name)
        return default if value is None else v.choice(value, name, allowed)


@dataclass(frozen=True)
class Paging:
    limit: int
    offset: int
    shown: int
    total: int | None = None  # None: not counted; has_next says whether more rows exist
    has_next: bool = False

    @classmethod
    def read(cls, params: Params, default: int = PAGE_SIZE) -> tuple[int, int]:
        return params.integer("limit", default, 1, MAX_PAGE_SIZE), params.integer("offset", 0, 0, 10**12)

    def to_dict(self) -> dict[str, Any]:
        more = self.has_next if self.total is None else self.offset + self.shown < self.total
        return {"limit": self.limit, "offset": self.offset, "shown": self.shown, "total": self.total,
                "first": self.offset + 1 if self.shown else 0, "last": self.offset + self.shown,
                "previous_offset": max(self.offset - self.limit, 0) if self.offset else None,
                "next_offset": self.offset + self.limit if more else None}


def users_page(store: Any, params: Params) -> dict[str, Any]:
    limit, offset = Paging.read(params, default=MAX_PAGE_SIZE)
    rows = store.list_users(limit=limit + 1, offset=offset)
    users = rows[:limit]
    return {"users": users, "page": Paging(limit, offset, len(users), has_next=len(rows) > limit).to_dict()}


SCOPES = ("person", "agent_id", "run_id")  # exact filters passed on as given (person: a name or an alias)


def _item_filters(params: Params) -> dict[str, Any]:
    archived = params.flag("archived")
    status = params.choice("status", (*ITEM_STATUSES, "any"))
    kind = params.choice("type", ITEM_TYPES)
    return {"theme": params.text("theme"), "type": kind, "status": status, "archived": archived,
            "expired": params.flag("expired"), **{name: params.text(name) for name in SCOPES}}


def _scopes(filters: dict[str, Any]) -> dict[str, Any]:
    return {name: filters[name] for name in SCOPES}


def call_scope(params: Params) -> dict[str, str | None]:
    """The agent and run scopes a request by id acts in (``?agent_id=``, ``?run_id=``; unset: any):
    an item or fact outside them is unknown (404), as in the store."""
    return {name: params.text(name) for name in ("agent_id", "run_id")}


def _store_status(filters: dict[str, Any]) -> str:
    """An explicit status wins; otherwise "include archived" widens active to any."""
    return filters["status"] or ("any" if filters["archived"] else "active")


def items_page(store: Any, user: str, params: Params) -> dict[str, Any]:
    filters = _item_filters(params)
    limit, offset = Paging.read(params)
    query = {"user_id": user, "theme": filters["theme"], "status": _store_status(filters),
             "types": [filters["type"]] if filters["type"] else None, "include_expired": filters["expired"],
             **_scopes(filters)}
    items = store.list_items(**query, limit=limit, offset=offset)
    total = store.count_items(**query)
    return {"user": user, "themes": store.list_themes(user_id=user), "filters": filters, "items": items,
            "page": Paging(limit, offset, len(items), total=total).to_dict()}


def item_page(store: Any, user: str, item_id: int, scope: Mapping[str, str | None] | None = None) -> dict[str, Any]:
    return {"user": user, "item": store.get(item_id, user_id=user, **(scope or {}))}


def facts_page(store: Any, user: str, params: Params) -> dict[str, Any]:
    filters = {"category": params.choice("category", FACT_CATEGORIES), "q": params.text("q"),
               "sort": params.choice("sort", FACT_SORT_FIELDS, "category"),
               "order": params.choice("order", ("asc", "desc"), "asc"), "expired": params.flag("expired"),
               **call_scope(params)}
    limit, offset = Paging.read(params)
    rows = store.get_all_facts(user_id=user, limit=limit + 1, offset=offset, search=filters["q"],
                               sort_by=filters["sort"], sort_order=filters["order"], category=filters["category"],
                               include_history=True, include_expired=filters["expired"],
                               agent_id=filters["agent_id"], run_id=filters["run_id"])
    facts = rows[:limit]
    return {"user": user, "filters": filters, "facts": facts,
            "page": Paging(limit, offset, len(facts), has_next=len(rows) > limit).to_dict()}


def summary_page(store: Any, user: str, params: Params) -> dict[str, Any]:
    limit = params.integer("limit", SUMMARY_VERSIONS, 1, 1000)
    versions = store.summary_history(user_id=user, limit=limit)
    return {"user": user, "current": versions[0] if versions else None, "earlier": versions[1:]}


def search_page(store: Any, user: str, params: Params) -> dict[str, Any]:
    """Results at or above the relevance floor (``?min_score=``, default the store's
    ``Settings.min_score``, the floor of every surface); ``?all=1`` lists the weaker ones too, marked. ``hidden`` counts the
    weaker results among the top ``limit`` of the unfiltered search (a second search)."""
    filters = _item_filters(params)
    filters["recency_days"] = None if params.text("recency_days") is None else \
        params.integer("recency_days", 0, 1, 1_000_000)
    query = params.text("q")
    limit = params.integer("limit", SEARCH_SIZE, 1, v.MAX_LIMIT)
    floor, show_all = params.share("min_score", float(store.settings.min_score)), params.flag("all")
    results, weak = [], []
    if query is not None:
        def run(min_score: float) -> Any:
            return store.search(query, user_id=user, limit=limit, theme=filters["theme"],
                                types=[filters["type"]] if filters["type"] else None,
                                status=_store_status(filters), include_expired=filters["expired"],
                                recency_days=filters["recency_days"], min_score=min_score,
                                **_scopes(filters))

        results = run(floor)
        if floor > 0 and query not in ("*",):  # "*" (the newest items) has no floor to apply
            everything = run(0.0)
            kept = {(r.kind, r.id) for r in results}
            weak = [r for r in everything if (r.kind, r.id) not in kept]
            if show_all:
                results = everything
    return {"user": user, "q": query, "filters": filters, "limit": limit, "results": results,
            "signals": SIGNALS,
            "relevance": {"floor": floor, "show_all": show_all, "weaker": len(weak),
                          "hidden": 0 if show_all else len(weak), "below_floor": [r.id for r in weak]}}
