"""Metadata filters (``core.filters``) compiled for SQLite: JSON1 ``json_type`` /
``json_extract`` with the path and the values as parameters (``%s`` placeholders, as the shared
generators write them). Pure: no connection."""

from __future__ import annotations

from typing import Any, Sequence

from ...core.filters import Condition, at_each_path_sql, json_type

_TYPES = {"number": "IN ('integer', 'real')", "string": "= 'text'"}
_COMPARE = {"gt": ">", "gte": ">=", "lt": "<", "lte": "<="}


def json_path(path: Sequence[str]) -> str:
    """``$."a"."b"``: quoted labels (the filter keys hold no quote or backslash)."""
    return "$" + "".join(f'."{part}"' for part in path)


def _equal(path: str, value: Any) -> tuple[str, list[Any]]:
    kind = json_type(value)
    if kind == "boolean":  # json_extract gives 1/0 for true/false: the type tells them from numbers
        return "json_type(i.metadata, %s) = %s", [path, "true" if value else "false"]
    return (f"(json_type(i.metadata, %s) {_TYPES[kind]} AND json_extract(i.metadata, %s) = %s)",
            [path, path, value])


def condition_sql(c: Condition) -> tuple[str, list[Any]]:
    """One condition as an SQL boolean on items ``i`` (never NULL), with its parameters; at each
    path its key names (``Condition.also``): all of them for a negated one, else any."""
    return at_each_path_sql(c, _one_path)


def _one_path(c: Condition) -> tuple[str, list[Any]]:
    path = json_path(c.path)
    if c.op == "exists":
        return f"json_type(i.metadata, %s) IS {'NOT ' if c.value else ''}NULL", [path]
    if c.op in ("eq", "ne", "in", "nin"):
        parts = [_equal(path, w) for w in (c.value if c.op in ("in", "nin") else (c.value,))]
        text = " OR ".join(p for p, _ in parts)
        params = [x for _, ps in parts for x in ps]
        return (f"coalesce(({text}), 0)" if c.op in ("eq", "in") else f"NOT coalesce(({text}), 0)"), params
    kind = json_type(c.value)
    return (f"coalesce(json_type(i.metadata, %s) {_TYPES[kind]} AND json_extract(i.metadata, %s) {_COMPARE[c.op]} %s, 0)",
            [path, path, c.value])
