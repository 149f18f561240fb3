"""How NaviStore reads LangGraph's ops, as pure functions: the index paths and the texts at them,
a namespace listing's conditions, a filter split into the store's metadata filter and what is
checked on the results (list equality), and when two reads are the same read."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any, Optional

from langgraph.store.base import (GetOp, ListNamespacesOp, MatchCondition, Op, SearchOp, get_text_at_path,
                                  tokenize_path)

from ..errors import ValidationError


def paths(fields: Iterable[str]) -> list[tuple[str, Any]]:
    return [(field, "$" if field == "$" else tokenize_path(field)) for field in fields]


def indexed_texts(value: Mapping[str, Any], paths: list[tuple[str, Any]]) -> list[str]:
    """The texts LangGraph would embed for ``value`` at ``paths`` (the item's content: joined)."""
    texts: list[str] = []
    for _, tokens in paths:
        texts.extend(get_text_at_path(value, tokens))
    return [t for t in texts if t]


def conditions(conditions: Optional[tuple[MatchCondition, ...]]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    prefix: tuple[str, ...] = ()
    suffix: tuple[str, ...] = ()
    for condition in conditions or ():
        if condition.match_type == "prefix":
            prefix = tuple(condition.path)
        elif condition.match_type == "suffix":
            suffix = tuple(condition.path)
        else:
            raise ValidationError(f"unknown namespace match type {condition.match_type!r}")
    return prefix, suffix


def filters(flt: dict[str, Any], path: tuple[str, ...] = ()) -> tuple[dict[Any, Any],
                                                                     list[tuple[tuple[str, ...], Any]]]:
    """A LangGraph filter as the store's metadata filters, plus the conditions the store cannot
    express (equality with a list or an object), checked on the items it returns.

    LangGraph: ``{"k": {"$op": v}}`` is an operator (kept), ``{"k": {"a": v}}`` matches a stored
    object containing it (the path ``("k", "a")`` for the store), ``{"k": [..]}`` list equality."""
    native: dict[Any, Any] = {}
    local: list[tuple[tuple[str, ...], Any]] = []
    for key, wanted in flt.items():
        at = path + (str(key),)
        if isinstance(wanted, dict) and wanted and not any(str(k).startswith("$") for k in wanted):
            inner, more = filters(wanted, at)
            native.update(inner)
            local += more
        elif isinstance(wanted, (list, tuple)):
            local.append((at, list(wanted)))
        else:
            # a dotted key names the key itself and the nested path (the store's meaning: LangGraph's
            # InMemoryStore and PostgresStore read the first, its SqliteStore the second)
            native[".".join(at) if len(at) == 1 else at] = wanted
    return native, local


def read_key(op: Op, uid: str) -> Any:
    """What makes two reads the same read: hashable whatever the caller passed (a namespace as a
    list, a filter's dict by its JSON text)."""
    if isinstance(op, SearchOp):
        return ("search", uid, tuple(op.namespace_prefix), json.dumps(op.filter, sort_keys=True, default=repr),
                op.limit, op.offset, op.query, op.refresh_ttl)
    if isinstance(op, GetOp):
        return ("get", uid, tuple(op.namespace), op.key, op.refresh_ttl)
    if isinstance(op, ListNamespacesOp):
        conditions = tuple((c.match_type, tuple(c.path)) for c in op.match_conditions or ())
        return ("namespaces", uid, conditions, op.max_depth, op.limit, op.offset)
    raise ValidationError(f"not a read: {type(op).__name__}")


def lookup(value: Any, path: tuple[str, ...]) -> Any:
    for part in path:
        if not isinstance(value, dict):
            return None
        value = value.get(part)
    return value
