"""Metadata filters (``core.filters``) compiled for PostgreSQL, composed with ``psycopg.sql``.

Equality is jsonb containment (``metadata @> '{"a": {"b": 1}}'``) so the GIN index on
``items.metadata`` serves it, plus a type check (containment alone lets 1 match 1.0, which is
wanted, but also a list holding the value); ranges compare typed values (``numeric``, text in
code point order: ``COLLATE "C"``); ``exists`` is ``?`` at the top level. Pure: no connection."""

from __future__ import annotations

from decimal import Decimal
from typing import Any, Sequence

from psycopg.types.json import Jsonb

from ...core.filters import Condition, at_each_path_sql, json_type

_COMPARE = {"gt": ">", "gte": ">=", "lt": "<", "lte": "<="}


def _nested(path: Sequence[str], value: Any) -> Any:
    for part in reversed(path):
        value = {part: value}
    return value


def _objects(path: Sequence[str]) -> tuple[list[str], list[Any]]:
    """``#>`` reads a list element for a numeric label; the filters go through objects only."""
    if not any(part.lstrip("-").isdigit() for part in path):
        return [], []
    return (["jsonb_typeof(i.metadata #> %s) = 'object'"] * (len(path) - 1),
            [list(path[:n]) for n in range(1, len(path))])


def _equal(path: Sequence[str], value: Any) -> tuple[str, list[Any]]:
    return "(i.metadata @> %s AND jsonb_typeof(i.metadata #> %s) = %s)", [Jsonb(_nested(path, value)), list(path),
                                                                          json_type(value)]


def _number(value: Any) -> Any:
    # a float as its shortest decimal: float8 -> numeric would keep 15 digits only
    return Decimal(repr(value)) if isinstance(value, float) else value


def condition_sql(c: Condition) -> tuple[str, list[Any]]:
    """One condition as an SQL boolean on items ``i`` with its parameters: NULL only where it
    counts as false (a positive condition of the WHERE's AND), never under NOT. At each path its
    key names (``Condition.also``): all of them for a negated one, else any."""
    return at_each_path_sql(c, _one_path)


def _one_path(c: Condition) -> tuple[str, list[Any]]:
    if c.op in ("eq", "ne", "in", "nin"):
        parts = [_equal(c.path, w) for w in (c.value if c.op in ("in", "nin") else (c.value,))]
        text = " OR ".join(p for p, _ in parts)
        params = [x for _, ps in parts for x in ps]
        # bare when positive (NULL rejects a row like false; the planner must see the @> to use the index)
        return (f"({text})" if c.op in ("eq", "in") else f"NOT coalesce(({text}), false)"), params
    guards, guard_params = _objects(c.path)
    if c.op == "exists":
        if len(c.path) == 1:
            test, params = "i.metadata ? %s", [c.path[0]]
        else:
            test, params = "(i.metadata #> %s) IS NOT NULL", [list(c.path)]
        text = " AND ".join([*guards, test])
        return (f"({text})" if c.value else f"NOT coalesce(({text}), false)"), [*guard_params, *params]
    if json_type(c.value) == "number":
        test = f"CASE WHEN jsonb_typeof(i.metadata #> %s) = 'number' THEN (i.metadata #> %s)::numeric {_COMPARE[c.op]} %s"
        params = [list(c.path), list(c.path), _number(c.value)]
    else:
        test = (f"CASE WHEN jsonb_typeof(i.metadata #> %s) = 'string' THEN (i.metadata #>> %s) COLLATE \"C\""
                f" {_COMPARE[c.op]} %s")
        params = [list(c.path), list(c.path), c.value]
    text = " AND ".join([*guards, f"{test} ELSE false END"])
    return f"coalesce(({text}), false)", [*guard_params, *params]
