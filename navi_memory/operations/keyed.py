"""Keyed items: the storage model of LangGraph's ``BaseStore`` (a namespace tuple plus a key),
on top of ordinary items, so a keyed item is found by ``search`` like any other.

A namespace is a non-empty tuple of labels without '.', stored joined by '.'; a key is a
non-empty string. ``(user_id, namespace, key)`` is unique: ``put_keyed`` inserts or replaces.
Listing a namespace's items without a query: ``list_items(namespace_prefix=..., order="updated")``.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Sequence

from ..calls import db
from ..core import convert, keyed
from ..core import validation as v
from ..core.contract import embedding_text
from ..errors import ValidationError
from ..models import Item
from ..sansio import Op, operation
from .memory import MemoryOperations
from .shared import Shared


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
                  agent_id: str | None = None, run_id: str | None = None) -> Op[Item]:
        """Store ``content`` under (``namespace``, ``key``): a new item, or the replacement of the
        one already there, in one transaction. A replacement keeps its id and ``created_at``, takes
        everything else from this call (``updated_at`` = now) and is re-embedded when its text
        changed. ``embed=False`` keeps no vector: the item is found by full-text search and by
        filters, never by similarity, and backfill leaves it alone. ``namespace``: a non-empty
        tuple of labels, each non-empty and without '.'; ``key``: a non-empty string (kept exactly)."""
        item = self._memory.new_item(user_id, {"content": content, "metadata": metadata, "expires_at": expires_at,
                                               "agent_id": agent_id, "run_id": run_id})
        item = replace(item, namespace=keyed.stored(namespace), key=_key(key))
        embed = v.flag(embed, "embed")
        row, needs = yield db.put_keyed(item=item, model=self._shared.model, embed=embed, now=self._shared.now())
        if needs and self._shared.embed_on_write:
            yield from self._memory.embed_new([(row["id"], item.user_id, embedding_text(row["title"], row["content"],
                                                                                        row.get("context")))])
            row = yield db.get_item(user_id=item.user_id, item_id=row["id"])
        return convert.item(row)

    @operation
    def get_keyed(self, *, user_id: str, namespace: Sequence[str], key: str) -> Op[Item | None]:
        """The item stored under (``namespace``, ``key``), or None (also when it has expired)."""
        return self._maybe((yield db.get_keyed(user_id=v.user_id(user_id), namespace=keyed.stored(namespace),
                                               key=_key(key), now=self._shared.now())))

    @staticmethod
    def _maybe(row: dict | None) -> Item | None:
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
        uid = v.user_id(user_id)
        if isinstance(ids, (str, bytes)) or not isinstance(ids, Sequence):
            raise ValidationError("ids must be a list of item ids")
        clean = [v.item_id(i) for i in ids]
        if not clean:
            return 0
        return (yield db.touch_items(user_id=uid, ids=clean, expires_at=v.when(expires_at, "expires_at"),
                                     now=self._shared.now()))

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

