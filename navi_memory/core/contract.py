"""Rules the operations and both backends must apply identically, written once here.

* the text an item is embedded from (``embedding_text``; its SQL twin ``embed_text_sql`` lets a
  backend recompute it to see whether a stored vector is still current),
* the searchable item of a fact (``fact_item_content``), the confidence a fact's source earns,
* the person columns both schemas store, the fields facts can be sorted by,
* metadata as both databases give it back (``stored_json``).
"""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

from ..models import FACT_SORT_FIELDS

__all__ = ["DEFAULT_CONFIDENCE", "FACT_SORT_FIELDS", "PERSON_COLUMNS", "PERSON_LIST_COLUMNS", "SOURCE_CONFIDENCE", "embed_text_sql",
           "embedding_text", "fact_item_content", "stored_json", "theme_display_name"]

SOURCE_CONFIDENCE = {"tool_call": 95, "auto_discovery": 95, "user_explicit": 90}
DEFAULT_CONFIDENCE = 70
# The embedding row of an item stored with embed=False (put_keyed): state 'error' with this error
# keeps its vector out of semantic search, and backfill / rebuild leave it alone. Reported as
# state 'skipped' (convert.item, embedding_stats), never as a failure.
NOT_INDEXED = "not indexed (embed=False)"
PERSON_COLUMNS = ("display_name", "pronouns", "role", "aliases", "birth_date", "notes", "devices")
PERSON_LIST_COLUMNS = ("aliases", "devices")  # JSON lists of text


def theme_display_name(slug: str) -> str:
    """The display name a theme is created with: ``home-office`` -> ``Home Office``."""
    return slug.replace("-", " ").replace("_", " ").title()


def embedding_text(title: str | None, content: str, context: str | None = None) -> str:
    """The text a row is embedded from: its context (e.g. the previous turn of a conversation),
    title and content, one per line, the empty ones left out."""
    return "".join(f"{part}\n" for part in (context, title) if part) + content


def embed_text_sql(newline: str) -> str:
    """``embedding_text`` of the items row ``i`` as an SQL expression; ``newline`` is the dialect's
    newline character (SQLite ``char(10)``, PostgreSQL ``chr(10)``)."""
    return (f"coalesce(nullif(i.context, '') || {newline}, '') || coalesce(nullif(i.title, '') || {newline}, '')"
            " || i.content")


def fact_item_content(key: str, value: str) -> str:
    """The content of a fact's searchable item: ``home city: Oslo``."""
    return f"{key.replace('_', ' ')}: {value}"


def stored_json(value: Any) -> str:
    """``value`` as JSON text the way either database gives it back, to compare metadata written
    with metadata read: PostgreSQL's jsonb keeps a number's digits, not its Python type, so a float
    of 1e16 or more (always whole) reads back as an int and -0.0 as 0.0; SQLite keeps both."""
    def plain(node: Any) -> Any:
        if isinstance(node, float):
            # jsonb reads the digits json.dumps wrote (repr's), not the float's binary value
            return int(Decimal(repr(node))) if abs(node) >= 1e16 else node + 0.0  # -0.0 + 0.0 is 0.0
        if isinstance(node, dict):
            return {key: plain(child) for key, child in node.items()}
        if isinstance(node, (list, tuple)):
            return [plain(child) for child in node]
        return node
    return json.dumps(plain(value), sort_keys=True)
