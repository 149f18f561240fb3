"""Metadata filters (``core.filters``) compiled for SQLite: JSON1 ``json_type`` /
``json_extract`` with the path and the values as parameters. Pure: no connection."""

from __future__ import annotations

from typing import Any, Sequence

from ...core.filters import Condition, json_type

_TYPES = {"number": "IN ('integer', 'real')", "string": "= 'text'"}
_COMPARE = {"gt": ">", "gte": ">=", "lt": "<", "lte": "<="}


def json_path(path: Sequence[str]) -> str:
    """``$."a"."b"``: quoted labels (the filter keys hold no quote or backslash)."""
    return "$" + "".join(f'."{part}"' for part in path)


def _equal(path: str, value: Any) -> tuple[str, list[Any]]:
    kind = json_type(value)
    if kind == "boolean":  # json_extract gives 1/0 for true/false: the type tells them from numbers
        return "json_type(i.metadata, ?) = ?", [path, "true" if value else "false"]
    return (f"(json_type(i.metadata, ?) {_TYPES[kind]} AND json_extract(i.metadata, ?) = ?)",
            [path, path, value])


def condition_sql(c: Condition) -> tuple[str, list[Any]]:
    """One condition as an SQL boolean on items ``i`` (never NULL), with its parameters."""
    path = json_path(c.path)
    if c.op == "exists":
        return f"json_type(i.metadata, ?) IS {'NOT ' if c.value else ''}NULL", [path]
    if c.op in ("eq", "ne", "in", "nin"):
        parts = [_equal(path, w) for w in (c.value if c.op in ("in", "nin") else (c.value,))]
        text = " OR ".join(p for p, _ in parts)
        params = [x for _, ps in parts for x in ps]
        return (f"coalesce(({text}), 0)" if c.op in ("eq", "in") else f"NOT coalesce(({text}), 0)"), params
    kind = json_type(c.value)
    return (f"coalesce(json_type(i.metadata, ?) {_TYPES[kind]} AND json_extract(i.metadata, ?) {_COMPARE[c.op]} ?, 0)",
            [path, path, c.value])


def metadata_sql(conditions: Sequence[Condition]) -> tuple[list[str], list[Any]]:
    """The clauses of every condition; facts (no metadata of their own) never pass a filter."""
    if not conditions:
        return [], []
    clauses, params = ["i.fact_id IS NULL"], []
    for c in conditions:
        text, values = condition_sql(c)
        clauses.append(text)
        params.extend(values)
    return clauses, params
