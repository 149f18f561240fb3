"""SQLite rows: values as stored (JSON text) and rows read back with the types psycopg gives PostgreSQL's."""

from __future__ import annotations

import json
import sqlite3
from typing import Any, Callable

from ...core.contract import PERSON_LIST_COLUMNS, embed_text_sql
from ...core.timeutil import from_db

EMBED_TEXT = embed_text_sql("char(10)")  # the text an item is embedded from (contract)


def to_json(value: Any) -> str | None:
    return None if value is None else json.dumps(value, ensure_ascii=False, sort_keys=True)


# Columns read by name (``typed``): a timestamp is named ``*_at`` or one of these; JSON and flags.
_TIMES = frozenset({"valid_from", "valid_to", "emb_updated", "memory_off_since", "last_active"})
_READERS: dict[str, Callable[[Any], Any]] = {
    "tags": lambda v: json.loads(v or "[]"), "metadata": lambda v: json.loads(v or "{}"),
    "source_ref": lambda v: json.loads(v) if v else None, "tool_calls": lambda v: json.loads(v) if v else None,
    "pinned": lambda v: None if v is None else bool(v)}
_READERS.update(dict.fromkeys(("ok", "estimated"), _READERS["pinned"]))  # an LLM call's flags
_READERS.update(dict.fromkeys(PERSON_LIST_COLUMNS, _READERS["tags"]))  # a person's aliases, devices


def typed(row: sqlite3.Row) -> dict[str, Any]:
    """A row with the types psycopg reads PostgreSQL's as, by column name: timestamps aware UTC
    datetimes, JSON columns (tags, metadata, source_ref, tool_calls) Python values, flags (``pinned``,
    an LLM call's ``ok`` and ``estimated``) bools."""
    d = dict(row)
    for key, value in d.items():
        if key.endswith("_at") or key in _TIMES:
            d[key] = from_db(value)
        elif key in _READERS:
            d[key] = _READERS[key](value)
    return d

