"""What the storage generators shared by SQLite and PostgreSQL yield, and how the two dialects differ.

A shared generator (``backends/shared/``) yields ``Q`` statements whose text uses ``%s``
placeholders (psycopg's style: ``%%`` is a literal ``%``) and binds every value through the
backend's ``Dialect``: a time, a JSON value, a list of ids. Where the SQL itself differs it
takes a fragment of the ``Dialect`` (the embedded text, ``FOR UPDATE``, adding minutes to a
time) or calls a step of the backend's own (a thin generator per backend, e.g. ``_not_indexed``).
Each runner executes the statements of one call in one transaction and sends back rows as dicts
(timestamps aware datetimes, JSON columns as Python values, as psycopg reads them) or, for a
statement without rows, the row count.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Callable, Mapping, NamedTuple, Sequence, TypedDict, TypeVar, cast

from ...core.contract import theme_display_name
from ...core.timeutil import to_utc


class Q(NamedTuple):
    """A statement for the runner. ``many``: executemany. ``own_tx``: run apart, in a transaction
    of its own, returning the error instead of raising (for optional DDL such as extensions); never
    while the call's transaction is open (the call is rolled back and run again after it). ``local``: the
    (setting, value) pairs the statement runs under, SET LOCAL in a transaction of its own that
    the runner sends with it in one round trip (a session SET would not survive a
    transaction-mode pooler such as PgBouncer). ``script``: several statements in one text, without
    parameters, sent in one round trip and never prepared (a prepared statement holds one).
    ``own_tx``, ``local`` and ``script``: PostgreSQL only."""

    text: Any
    params: Sequence[Any] | None = None
    many: bool = False
    own_tx: bool = False
    local: tuple[tuple[str, int | str], ...] = ()
    script: bool = False


class Native(NamedTuple):
    """A step only the SQLite runner takes: ``call(connection)`` inside the call's transaction, its
    result sent back: what reaches past the tables (the in-memory vectors) or calls SQLite's plain
    methods inside the call's transaction (a plan's calls, ``in_one_transaction``)."""

    call: Callable[[Any], Any]


_PLACEHOLDER = re.compile(r"%[s%]")


@dataclass(frozen=True)
class Dialect:
    """How one SQL dialect binds values and spells what the two write differently."""

    name: str
    placeholder: str  # what ``%s`` becomes in the text sent to the driver
    time: Callable[[datetime | None], Any]  # a time as bound (and stored)
    json: Callable[[Any], Any]  # a JSON value as bound
    ids: Callable[[Sequence[int]], Any]  # a list of ids as bound for ``in_ids``
    in_ids: str  # "{column} is one of the bound ids", one %s
    plus_minutes: str  # "{time} plus {minutes} minutes", a time as stored
    embed_text: str  # the text an item ``i`` is embedded from (``core.contract``)
    for_update: str  # the row lock a SELECT of rows about to change takes ("" where BEGIN locked all)
    key_lock: str | None  # a statement taking a transaction lock on one text key (%s), if needed
    null_safe_eq: str  # "{column} equals the bound value, NULL equal to NULL", one %s
    like_any_case: str  # "{column}" LIKE a %s pattern, ignoring the case of every letter (not only ASCII's)
    greatest: str  # the scalar function of the larger of two values
    item_key: str  # the columns naming an item in ``IN (SELECT ...)``: what the database finds rows by
    item_row_key: str  # the key of a table with a row per item (``ON CONFLICT``): item_id, with user_id on PostgreSQL
    by_id: str  # what follows ``items i`` in a lookup by a list of ids (an index hint, or "")
    # ``(clause, params)``: items ``i`` whose namespace is the bound one or lies under it
    under_namespace: Callable[[str], tuple[str, list[Any]]]
    first_word: str  # "the first word of {text}" (up to its first space)
    json_list: str  # a FROM item of the text elements of the JSON list {column}, as ``a.value``
    # ``(clause, params)``: one metadata condition (``core.filters.Condition``) on items ``i``
    metadata: Callable[[Any], tuple[str, list[Any]]]

    def render(self, text: str) -> str:
        """``text`` with this dialect's placeholders."""
        return text if self.placeholder == "%s" else _render(text, self.placeholder)


@functools.lru_cache(maxsize=512)
def _render(text: str, placeholder: str) -> str:
    return _PLACEHOLDER.sub(lambda m: placeholder if m.group() == "%s" else "%", text)


def ensure_theme(d: Dialect, user_id: str, slug: str, now: datetime) -> Q:
    """The statement creating the user's theme ``slug`` unless it exists."""
    stamp = d.time(now)
    return Q("INSERT INTO themes (user_id, slug, display_name, created_at, updated_at) VALUES (%s, %s, %s, %s, %s)"
             " ON CONFLICT DO NOTHING", [user_id, slug, theme_display_name(slug), stamp, stamp])


# A row as a runner sends it back: a dict of column name -> value. A generator names the shape a
# statement reads where it is sent back (``rows: list[ItemRow] = yield Q(ITEM_SELECT ...)``).
Row = dict[str, Any]
RowT = TypeVar("RowT", bound=Mapping[str, Any])


class Count(TypedDict):
    """The row of ``SELECT count(*) AS n`` (or another number named ``n``)."""

    n: int


def row_times(row: RowT) -> RowT:
    """The row with every timestamp as an aware UTC datetime (changed in place)."""
    columns = cast("Row", row)  # every row is a plain dict (a TypedDict only names its columns)
    for key, value in columns.items():
        if isinstance(value, datetime):
            columns[key] = to_utc(value)
    return row


# An item with the state of its embedding (``backends.base.ItemRow``), as both dialects read it.
ITEM_SELECT = (
    "SELECT i.user_id, i.id, i.theme, i.type, i.title, i.content, i.tags, i.status, i.pinned, i.source,"
    " i.source_ref, i.person, i.confidence, i.observed_at, i.expires_at, i.metadata, i.context, i.fact_id, i.created_at,"
    " i.updated_at, i.agent_id, i.run_id, i.namespace, i.ext_key, i.ttl_minutes, e.state AS emb_state, e.model AS emb_model, e.dimensions AS emb_dims, e.error AS emb_error,"
    " e.updated_at AS emb_updated FROM items i"
    " LEFT JOIN embeddings e ON e.user_id = i.user_id AND e.item_id = i.id"
)
