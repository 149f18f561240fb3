"""Keyed items: the storage model of LangGraph's ``BaseStore`` (a namespace tuple plus a key),
on top of ordinary items, so a keyed item is found by ``search`` like any other.

A namespace is a non-empty tuple of labels without '.', stored joined by '.'; a key is a
non-empty string. ``(user_id, namespace, key)`` is unique: ``put_keyed`` inserts or replaces.
Listing a namespace's items without a query: ``list_items(namespace_prefix=..., order="updated")``.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any, Sequence

from ..backends.base import ItemRow
from ..calls import db
from ..core import convert, keyed
from ..core import validation as v
from ..core.contract import embedding_text
from ..errors import ValidationError
from ..models import Item
from ..sansio import Op, operation
from .memory import MemoryOperations
from .shared import Shared


MAX_TTL_MINUTES = 100 * 365 * 24 * 60  # a century: past it a TTL is a mistake, not a lifetime


def _ttl(value: Any) -> float | None:
    """A TTL in minutes: None (none), or a number > 0 (fractions allowed, as LangGraph's)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= MAX_TTL_MINUTES:
        raise ValidationError(f"ttl_minutes must be a number of minutes above 0 and at most {MAX_TTL_MINUTES}")
    return float(value)


def _ids(ids: Any) -> list[int]:
    if isinstance(ids, (str, bytes)) or not isinstance(ids, Sequence):
        raise ValidationError("ids must be a list of item ids")
    return [v.item_id(i) for i in ids]


def _key(value: Any) -> str:
    """A key is kept exactly (never stripped): 1-256 UTF-8 bytes, no NUL."""
    return v.text(value, "key", v.MAX_KEY, strip=False)


class KeyedOperations:
    """put / get / delete by (namespace, key), TTL refresh, and the namespaces of a user."""

    def __init__(self, shared: Shared, memory: MemoryOperations) -> None:
        self._shared = shared
        self._memory = memory

    @operation
    def put_keyed(self, *, user_id: str, namespace: Sequence[str], key: str, content: str,
                  metadata: dict[str, Any] | None = None, expires_at: Any = None, embed: bool = True,
                  agent_id: str | None = None, run_id: str | None = None,
                  ttl_minutes: float | None = None, embedding: Any = None) -> Op[Item]:
        """Store ``content`` under (``namespace``, ``key``): a new item, or the replacement of the
        one already there, in one transaction. A replacement keeps its id and ``created_at``, takes
        everything else from this call (``updated_at`` = now) and is re-embedded when its text
        changed. ``embed=False`` keeps no vector: the item is found by full-text search and by
        filters, never by similarity, and backfill leaves it alone. ``namespace``: a non-empty
        tuple of labels, each non-empty and without '.'; ``key``: a non-empty string (kept exactly).
        ``ttl_minutes``: the item expires that long after now, and a read with ``refresh_ttl``
        (``get_keyed``, ``refresh_ttl``) moves its expiry to that long after the read (LangGraph's
        TTL); give it or ``expires_at`` (a fixed expiry, never refreshed), not both.
        ``embedding``: a precomputed vector of ``content`` by the store's model (as ``add`` takes),
        kept instead of embedding the text when the item needs a vector."""
        ttl, now = _ttl(ttl_minutes), self._shared.now()
        if ttl is not None and expires_at is not None:
            raise ValidationError("give ttl_minutes or expires_at, not both")
        if ttl is not None:
            expires_at = now + timedelta(minutes=ttl)
        item = self._memory.new_item(user_id, {"content": content, "metadata": metadata, "expires_at": expires_at,
                                               "agent_id": agent_id, "run_id": run_id, "embedding": embedding})
        item = replace(item, namespace=keyed.stored(namespace), key=_key(key), ttl_minutes=ttl)
        embed = v.flag(embed, "embed")
        if item.vector is not None and not embed:
            raise ValidationError("an embedding was given with embed=False, which keeps no vector")
        yield from self._memory.refuse_if_off([item.user_id])
        row: ItemRow
        needs: bool
        row, needs = yield db.put_keyed(item=item, model=self._shared.model, embed=embed, now=now)
        text = embedding_text(row["title"], row["content"], row.get("context"))
        if needs and item.vector is not None:  # a replacement whose text changed: the vector given
            needs = not (yield from self._memory.store_vector(row["id"], item.user_id, text, item.vector))
            if not needs:
                row = yield db.get_item(user_id=item.user_id, item_id=row["id"])
        if needs and self._shared.embed_on_write:
            yield from self._memory.embed_new([(row["id"], item.user_id, text)])
            row = yield db.get_item(user_id=item.user_id, item_id=row["id"])
        return convert.item(row)

    @operation
    def get_keyed(self, *, user_id: str, namespace: Sequence[str], key: str,
                  refresh_ttl: bool = False) -> Op[Item | None]:
        """The item stored under (``namespace``, ``key``), or None (also when it has expired).
        ``refresh_ttl``: an item put with ``ttl_minutes`` now expires that long after this read."""
        uid, now = v.user_id(user_id), self._shared.now()
        row: ItemRow | None = yield db.get_keyed(user_id=uid, namespace=keyed.stored(namespace), key=_key(key), now=now)
        if row is not None and v.flag(refresh_ttl, "refresh_ttl") and (ttl := row["ttl_minutes"]) is not None:
            yield db.refresh_ttl(user_id=uid, ids=[row["id"]], now=now)
            row = {**row, "expires_at": now + timedelta(minutes=ttl)}
        return self._maybe(row)

    @staticmethod
    def _maybe(row: ItemRow | None) -> Item | None:
        return None if row is None else convert.item(row)

    @operation
    def delete_keyed(self, *, user_id: str, namespace: Sequence[str], key: str) -> Op[bool]:
        """Delete the item under (``namespace``, ``key``); False when there was none."""
        return (yield db.delete_keyed(user_id=v.user_id(user_id), namespace=keyed.stored(namespace), key=_key(key)))

    @operation
    def touch_keyed(self, *, user_id: str, namespace: Sequence[str], key: str, expires_at: Any) -> Op[bool]:
        """Move the expiry of the (unexpired) item under (``namespace``, ``key``) to ``expires_at``
        (None: never expires): a TTL refresh. ``updated_at`` does not change. False: no such item."""
        uid, now = v.user_id(user_id), self._shared.now()
        when = v.when(expires_at, "expires_at")
        row = yield db.get_keyed(user_id=uid, namespace=keyed.stored(namespace), key=_key(key), now=now)
        if row is None:
            return False
        return bool((yield db.touch_items(user_id=uid, ids=[row["id"]], expires_at=when, now=now)))

    @operation
    def touch_items(self, ids: Sequence[int], *, user_id: str, expires_at: Any) -> Op[int]:
        """Move the expiry of the user's unexpired items ``ids`` to ``expires_at`` (None: never):
        the TTL refresh of search results. Returns how many items were moved."""
        uid, clean = v.user_id(user_id), _ids(ids)
        if not clean:
            return 0
        return (yield db.touch_items(user_id=uid, ids=clean, expires_at=v.when(expires_at, "expires_at"),
                                     now=self._shared.now()))

    @operation
    def refresh_ttl(self, ids: Sequence[int], *, user_id: str) -> Op[int]:
        """LangGraph's refresh on read for search results: each of the user's unexpired items
        ``ids`` put with ``ttl_minutes`` now expires that long from now (the others are left
        alone). Returns how many were refreshed."""
        uid, clean = v.user_id(user_id), _ids(ids)
        if not clean:
            return 0
        return (yield db.refresh_ttl(user_id=uid, ids=clean, now=self._shared.now()))

    @operation
    def sweep_ttl(self, *, user_id: str | None = None) -> Op[int]:
        """Delete the keyed items whose expiry has passed, of ``user_id`` or (None) of every user;
        returns how many. Expired items are never returned anyway: sweeping frees their space
        (LangGraph's ``sweep_ttl``; ``NaviStore.start_ttl_sweeper()`` runs it periodically)."""
        uid = None if user_id is None else v.user_id(user_id)
        return (yield db.sweep_keyed(user_id=uid, now=self._shared.now()))

    @operation
    def list_namespaces(self, *, user_id: str, prefix: Sequence[str] | None = None,
                        suffix: Sequence[str] | None = None, max_depth: int | None = None, limit: int = 100,
                        offset: int = 0) -> Op[list[tuple[str, ...]]]:
        """The namespaces of the user's unexpired keyed items, like LangGraph's
        ``BaseStore.list_namespaces``: those starting with ``prefix`` and ending with ``suffix``
        (labels of either may be ``'*'``: any one label), cut to their first ``max_depth``
        labels, distinct, sorted, then ``offset`` / ``limit`` applied."""
        uid = v.user_id(user_id)
        head, tail = keyed.condition(prefix, "prefix"), keyed.condition(suffix, "suffix")
        depth = None if max_depth is None else v.limit(max_depth, 10_000, "max_depth")
        stored = yield db.list_namespaces(user_id=uid, prefix=keyed.literal_prefix(head), now=self._shared.now())
        return keyed.list_namespaces(stored, head, tail, depth, v.limit(limit, 100_000), v.offset(offset))

