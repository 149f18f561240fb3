"""SQLite rows: the item SELECT (with its embedding state) and rows to the typed rows of ``backends.base``."""

from __future__ import annotations

import json
import sqlite3
from typing import Any, Callable, cast

from ...core.contract import PERSON_LIST_COLUMNS, embed_text_sql
from ...core.timeutil import from_db
from ..base import ItemRow

ITEM_SELECT = """SELECT i.*, e.state AS emb_state, e.model AS emb_model, e.dimensions AS emb_dims,
    e.error AS emb_error, e.updated_at AS emb_updated
    FROM items i LEFT JOIN embeddings e ON e.item_id = i.id"""
# Lookups by a list of ids must go through the rowid. Otherwise the planner may pick a user_id index,
# scan every row of the user and test each against the list: O(items of the user) per search.
ITEM_SELECT_BY_IDS = ITEM_SELECT.replace("FROM items i", "FROM items i NOT INDEXED", 1)
EMBED_TEXT = embed_text_sql("char(10)")  # the text an item is embedded from (contract)
ITEM_COLUMNS = ("type", "title", "content", "theme", "tags", "status", "pinned", "source", "source_ref",
                "person", "confidence", "observed_at", "expires_at", "metadata", "context")


def to_json(value: Any) -> str | None:
    return None if value is None else json.dumps(value, ensure_ascii=False, sort_keys=True)


# Columns read by name (``typed``): a timestamp is named ``*_at`` or one of these; JSON and flags.
_TIMES = frozenset({"valid_from", "valid_to", "emb_updated", "memory_off_since"})
_READERS: dict[str, Callable[[Any], Any]] = {
    "tags": lambda v: json.loads(v or "[]"), "metadata": lambda v: json.loads(v or "{}"),
    "source_ref": lambda v: json.loads(v) if v else None, "pinned": lambda v: None if v is None else bool(v)}
_READERS.update(dict.fromkeys(PERSON_LIST_COLUMNS, _READERS["tags"]))  # a person's aliases, devices


def typed(row: sqlite3.Row) -> dict[str, Any]:
    """A row with the types psycopg reads PostgreSQL's as, by column name: timestamps aware UTC
    datetimes, JSON columns (tags, metadata, source_ref) Python values, ``pinned`` a bool."""
    d = dict(row)
    for key, value in d.items():
        if key.endswith("_at") or key in _TIMES:
            d[key] = from_db(value)
        elif key in _READERS:
            d[key] = _READERS[key](value)
    return d


def item_from_row(row: sqlite3.Row) -> ItemRow:
    return cast(ItemRow, typed(row))  # the columns of ITEM_SELECT, checked on both backends by the tests
