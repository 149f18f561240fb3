"""Items, the summary, users and embeddings, written once for both the sync and the async API.

Each operation is a generator: it validates its input, then *yields* the I/O it needs (a backend
call or an embedding call) and receives the result back. ``MemoryStore`` runs these generators
with blocking calls, ``AsyncMemoryStore`` with awaited ones (the sans-I/O style of psycopg's
generators), so the logic of validation and embedding exists exactly once. The other concerns
(``search``, ``facts``, ``sessions``, ``persons``, ``transfer``, ``keyed``) write items through
the helpers here (``new_item``, ``add_rows``, ``embed_new``).
"""

from __future__ import annotations

import logging
import sys
from dataclasses import replace
from datetime import datetime, tzinfo
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, Sequence

import numpy as np

from ..core import convert
from ..core import validation as v
from ..backends.base import ORDER_COLUMNS, Filters, ItemRow, NewItem, SummaryRow, UserSettings
from ..errors import EmbeddingError, MemoryOffError, NotFoundError, ValidationError
from ..models import (ITEM_STATUSES, ITEM_TYPES, Item, ItemChanges, ItemFields, NoteAdded,
                     Summary, SummaryHistory, SummaryText)
from ..core.persons import canonical_name
from ..core.filters import MetadataFilter
from ..core.timeutil import zone
from ..retrieval.query import query_terms
from ..core.contract import embedding_text, stored_json
from ..pipeline import dedup
from ..calls import EmbedDocuments, Spawn, db
from ..sansio import Op, operation
from ..vectors import check_vector
from .reads import item_scope, read_filters, user_zone
from .shared import EMBED_BATCH, Shared

if sys.version_info >= (3, 11):  # in the store's public signatures: get_type_hints resolves them
    from typing import Unpack
elif TYPE_CHECKING:  # on 3.10 only type checkers read it (typing_extensions is no dependency)
    from typing_extensions import Unpack

DEDUP_CANDIDATES = 50  # full-text hits checked for a stored note with the same text

log = logging.getLogger("navi_memory")


class MemoryOperations:
    """Items, search, the summary and embeddings: the memory itself. Other concerns write
    through ``new_item`` / ``add_rows`` and embed through ``embed_rows``."""

    def __init__(self, shared: Shared) -> None:
        self._shared = shared
        # (user id, the item row, its new content) -> Op: writes a fact's item edit to the fact.
        # Set by StoreOperations (the fact operations build on this class, so they come in this way).
        self.edit_fact: Callable[[str, ItemRow, str], Op] | None = None
        # (user id, the item row, "deleted" or its new status) -> Op: what follows (facts, summary, raw text)
        self.item_changed: Callable[[str, ItemRow, str], Op] | None = None

    # -- helpers ---------------------------------------------------------------------------

    def vector(self, value: Any) -> np.ndarray:
        if self._shared.model is None:
            raise ValidationError("a precomputed embedding needs an embedding model (embedding_model=...)")
        dims = self._shared.embedder.dimensions if self._shared.embedder else None
        try:
            return check_vector(value, dims)
        except EmbeddingError as exc:
            raise ValidationError(f"embedding rejected: {exc}") from exc

    def new_item(self, user_id: Any, fields: Mapping[str, Any]) -> NewItem:
        unknown = set(fields) - {"content", "type", "theme", "title", "tags", "pinned", "source", "source_ref",
                                 "person", "confidence", "observed_at", "expires_at", "expires_days",
                                 "metadata", "embedding", "status", "context", "agent_id", "run_id"}
        if unknown:
            raise ValidationError(f"unknown item field(s): {', '.join(sorted(unknown))}")
        now = self._shared.now()
        theme = fields.get("theme")
        return NewItem(
            user_id=v.user_id(user_id),
            type=v.choice(fields.get("type", "note"), "type", ITEM_TYPES),
            content=self._shared.content(fields.get("content")),
            theme=v.slug(theme) if theme not in (None, "") else "general",
            title=v.optional_text(fields.get("title"), "title", v.MAX_TITLE),
            tags=v.tags(fields.get("tags")),
            status=v.choice(fields.get("status", "active"), "status", ITEM_STATUSES),
            pinned=v.flag(fields.get("pinned", False), "pinned"),
            source=v.optional_text(fields.get("source"), "source", v.MAX_KEY),
            source_ref=v.nested_mapping(fields.get("source_ref"), "source_ref", self._shared.max_content_bytes),
            person=v.optional_text(fields.get("person"), "person", v.MAX_KEY),
            confidence=v.confidence(fields.get("confidence")),
            observed_at=v.when(fields.get("observed_at"), "observed_at"),
            expires_at=v.expiry(fields.get("expires_at"), fields.get("expires_days"), now),
            metadata=v.nested_mapping(fields.get("metadata"), "metadata", self._shared.max_content_bytes),
            context=v.optional_text(fields.get("context"), "context", self._shared.max_content_bytes),
            vector=None if fields.get("embedding") is None else self.vector(fields["embedding"]),
            agent_id=v.scope_id(fields.get("agent_id"), "agent_id"),
            run_id=v.scope_id(fields.get("run_id"), "run_id"),
        )

    def filters(self, user_id: Any, all_users: bool, status: str = "active", theme: Any = None,
                types: Any = None, recency_days: Any = None, person: Any = None,
                include_expired: bool = False, namespace_prefix: Any = None, agent_id: Any = None,
                run_id: Any = None, metadata: Any = None) -> Filters:
        return read_filters(self._shared.now(), user_id, all_users, status, theme, types, recency_days, person,
                            include_expired, namespace_prefix, agent_id, run_id, metadata)

    def serving_model(self, user_id: str | None) -> Op[str | None]:
        """The model whose vectors ``user_id``'s searches read (None: everyone's): the store's,
        except while it moves to it (``reembed``) for a user not moved yet, and for all-user
        searches, which read the previous model's vectors until ``reembed`` is complete."""
        model, previous = self._shared.model, self._shared.previous_model
        if previous is None or model is None:
            return model
        if user_id is None:
            return previous
        return model if (yield db.serving_model(user_id=user_id)) == model else previous

    def embed_rows(self, rows: Sequence[tuple[int, str, str]], model: str | None = None) -> Op:
        """Embed (item_id, user_id, text) rows with ``model`` (None: the model each user's searches
        read) and store the vectors; a provider failure is stored as state ``error`` (backfill
        retries those). Returns (stored, failed)."""
        if model is not None:
            parts = {model: list(rows)}
        else:
            served: dict[str, str] = {}
            parts = {}
            for row in rows:
                if row[1] not in served:
                    served[row[1]] = (yield from self.serving_model(row[1])) or self._shared.require_model()
                parts.setdefault(served[row[1]], []).append(row)
        moving_to = self._shared.model if self._shared.previous_model is not None else None
        stored = failed = 0
        for part_model, part in parts.items():
            try:
                vectors = yield EmbedDocuments([t for _, _, t in part], model=part_model)
            except EmbeddingError as exc:
                errors = [(i, u, t, None, str(exc)[:500]) for i, u, t in part]
                yield db.store_embeddings(model=part_model, results=errors, now=self._shared.now(), moving_to=moving_to)
                self._shared.embedding_debt = True
                failed += len(part)
                continue
            results = [(i, u, t, vec, None) for (i, u, t), vec in zip(part, vectors)]
            stored += yield db.store_embeddings(model=part_model, results=results, now=self._shared.now(),
                                                moving_to=moving_to)
        return stored, failed

    def store_vector(self, item_id: int, user_id: str, text: str, vector: np.ndarray) -> Op[bool]:
        """Keep a precomputed vector of the store's model for the item whose embedded text is
        ``text``; False when it was not kept (the text changed meanwhile, or the user's searches
        still read the previous model of a move)."""
        model = self._shared.require_model()
        moving_to = model if self._shared.previous_model is not None else None
        stored = yield db.store_embeddings(model=model, results=[(item_id, user_id, text, vector, None)],
                                           now=self._shared.now(), moving_to=moving_to)
        return bool(stored)

    def embed_new(self, rows: Sequence[tuple[int, str, str]]) -> Op:
        """Embed rows right after a write, unless there is no provider or it is backing off (the
        rows stay pending). The first write embedded after such an outage queues a ``backfill`` in
        the background: what the outage left without a vector catches up without an operator."""
        if not rows or self._shared.embedder is None or self._shared.model is None:
            return
        if not self._shared.embedder.available:
            self._shared.embedding_debt = True
            return
        failed = 0
        for start in range(0, len(rows), EMBED_BATCH):
            failed += (yield from self.embed_rows(rows[start:start + EMBED_BATCH]))[1]
        if not failed and self._shared.embedding_debt:
            self._shared.embedding_debt = False  # set again by a failure of the backfill
            log.info("the embedding provider answers again: embedding the rows the outage left behind")
            yield Spawn("backfill", (), {})

    def _item(self, row: ItemRow) -> Item:
        return convert.item(row)

    def _require_item(self, user_id: str, item_id: int, scope: Mapping[str, str | None] | None = None) -> Op[ItemRow]:
        row: ItemRow | None = yield db.get_item(user_id=user_id, item_id=item_id, **(scope or {}))
        if row is None:
            raise NotFoundError(f"no item {item_id} for this user")
        return row

    # -- items -----------------------------------------------------------------------------

    @operation
    def add(self, *, user_id: str, content: str, dedup: bool = True, **fields: Unpack[ItemFields]) -> Op[int]:
        """Store one item (note/chunk); returns its id. Fields: type, theme, title, tags, pinned,
        source, source_ref, person, confidence, observed_at, expires_at/expires_days, metadata,
        embedding (a precomputed vector), agent_id and run_id (scopes: 1-256 characters, exact,
        no control characters; search, list_items and count_items filter by them).

        ``dedup`` (default True): when the user already has an active item of the same type,
        agent, run, person and metadata with the same text (see ``add_note``), its id is returned
        and nothing is stored. ``add_note`` also tells which of the two happened."""
        item_id, _, _ = yield from self._add_one(user_id, content, dedup, fields)
        return item_id

    @operation
    def add_note(self, *, user_id: str, content: str, dedup: bool = True,
                 **fields: Unpack[ItemFields]) -> Op[NoteAdded]:
        """``add``, returning the item and whether it is new: action ``added``, or ``existing``
        when the same text was already stored (that item is returned unchanged, ``dedup=False``
        stores a second one). The same text: equal once case, spacing and punctuation are
        ignored ("The train is at 8:15." = "the train is at 8:15"); a text that differs in any
        letter, digit or symbol is stored ("gate A12" is not "gate A13"). ``similar`` holds the ids
        of stored items a typo apart (``pipeline.dedup.near_note``), reported, never merged."""
        item_id, existing, similar = yield from self._add_one(user_id, content, dedup, fields)
        if existing is not None:
            return NoteAdded(action="existing", item=self._item(existing), similar=similar)
        row = yield from self._require_item(v.user_id(user_id), item_id)
        return NoteAdded(action="added", item=self._item(row), similar=similar)

    def _add_one(self, user_id: Any, content: Any, dedup: Any, fields: Mapping[str, Any]) -> Op:
        """(id, None, similar ids) of a new item, or (id, row, similar ids) of the stored item with
        the same text. The check and the insert hold the user's write lock: writers of the same
        text at one instant store it once."""
        row = self.new_item(user_id, {**fields, "content": content})
        if not v.flag(dedup, "dedup"):
            return (yield from self.add_rows([row]))[0], None, ()
        yield from self.refuse_if_off([row.user_id])
        if row.person:
            row = replace(row, person=(yield from self.person_name(row.user_id, row.person)))
        item_id, same, similar = yield db.in_one_transaction(make_plan=lambda: self._insert_unless_repeat(row))
        if same is None:
            yield from self.embed_inserted([item_id], [row])
        return item_id, same, similar

    def _insert_unless_repeat(self, row: NewItem) -> Op:
        """A plan for ``in_one_transaction``: under the user's write lock, the stored item with the
        same text, else a new one. Candidates come from the full-text index (a repeat holds every
        word of the new text); those a typo apart are reported as similar."""
        yield db.lock_user_writes(user_id=row.user_id)
        where = Filters(user_id=row.user_id, now=self._shared.now(), types=(row.type,), agent_id=row.agent_id,
                        run_id=row.run_id)
        terms = query_terms(row.content)
        hits = (yield db.lexical_hits(filters=where, terms=terms, k=DEDUP_CANDIDATES)).scored if terms else []
        if terms and not hits:
            hits = yield db.substring_candidates(filters=where, terms=terms, k=DEDUP_CANDIDATES)
        rows = {r["id"]: r for r in (yield db.fetch_items(user_id=row.user_id, ids=[i for i, _ in hits]))} \
            if hits else {}

        def identity(r: Mapping[str, Any]) -> tuple:  # json: 1, 1.0 and True are three metadata values
            return (r.get("ext_key"), r.get("fact_id"), r.get("agent_id"), r.get("run_id"), r.get("person"),
                    stored_json(r.get("metadata") or {}))

        wanted = identity({"agent_id": row.agent_id, "run_id": row.run_id, "person": row.person,
                           "metadata": row.metadata})
        # keyed items and facts' copies (ext_key, fact_id) are never notes' doubles
        mine = [rows[i] for i, _ in hits if i in rows and identity(rows[i]) == wanted]
        similar = tuple(r["id"] for r in mine if dedup.near_note(r["content"], row.content))
        for found in mine:
            if dedup.same_note(found["content"], row.content):
                log.debug("item %s already says this: not stored again", found["id"])
                return found["id"], found, similar
        (item_id,) = yield db.insert_items(items=[row], model=self._shared.model, now=self._shared.now())
        return item_id, None, similar

    @operation
    def add_many(self, items: Iterable[Mapping[str, Any]]) -> Op[list[int]]:
        """Store many items in one transaction (each a mapping with user_id, content, ...); returns ids."""
        if isinstance(items, (str, bytes, Mapping)) or not isinstance(items, Iterable):
            raise ValidationError("add_many takes a list of mappings (one per item)")
        rows = []
        for index, fields in enumerate(items):
            if not isinstance(fields, Mapping):
                raise ValidationError(f"item {index} is not a mapping")
            fields = dict(fields)
            rows.append(self.new_item(fields.pop("user_id", None), fields))
        return (yield from self.add_rows(rows))

    def _listing_filters(self, user_id: Any, all_users: bool, status: str, theme: Any, types: Any,
                         include_expired: bool, namespace_prefix: Any, agent_id: Any, run_id: Any,
                         metadata: Any, person: Any) -> Op[Filters]:
        f = self.filters(user_id, all_users, status, theme, types, person=person, include_expired=include_expired,
                         namespace_prefix=namespace_prefix, agent_id=agent_id, run_id=run_id, metadata=metadata)
        if f.person is not None and f.user_id is not None:  # an alias finds the display name items carry
            f = replace(f, person=(yield from self.person_name(f.user_id, f.person)))
        return f

    def person_name(self, uid: str, name: str | None) -> Op:
        """The display name of the household member ``name`` refers to (alias, role, first name);
        ``name`` itself when it names nobody or is ambiguous (a person outside the household)."""
        if name is None:
            return None
        return canonical_name((yield db.list_persons(user_id=uid)), name)

    def memory_on(self, uid: str) -> Op[bool]:
        """Whether the user's memory is on (``set_memory_enabled``): one primary-key read."""
        return (yield db.user_settings(user_id=uid))["memory_off_since"] is None

    def refuse_if_off(self, user_ids: Iterable[str]) -> Op[None]:
        """``MemoryOffError`` when one of these users turned their memory off (a read per user)."""
        for uid in sorted(set(user_ids)):
            if not (yield from self.memory_on(uid)):
                raise MemoryOffError("memory is off for this user: nothing new is stored"
                                     " (set_memory_enabled(True, user_id=...) turns it on)")

    def add_rows(self, rows: list[NewItem]) -> Op:
        if not rows:
            return []
        yield from self.refuse_if_off(r.user_id for r in rows)
        if any(r.person for r in rows):  # one household read per user, not per row
            households = {}
            for uid in {r.user_id for r in rows if r.person}:
                households[uid] = yield db.list_persons(user_id=uid)
            rows = [replace(r, person=canonical_name(households[r.user_id], r.person)) if r.person else r
                    for r in rows]
        ids = yield db.insert_items(items=rows, model=self._shared.model, now=self._shared.now())
        yield from self.embed_inserted(ids, rows)
        return ids

    def embed_inserted(self, ids: Sequence[int], rows: Sequence[NewItem]) -> Op:
        """Embed the rows just inserted (those without a precomputed vector)."""
        if self._shared.embed_on_write:
            yield from self.embed_new([(i, r.user_id, embedding_text(r.title, r.content, r.context))
                                       for i, r in zip(ids, rows) if r.vector is None])

    @operation
    def get(self, item_id: int, *, user_id: str, agent_id: str | None = None, run_id: str | None = None) -> Op[Item]:
        """One item with its embedding state; ``NotFoundError`` for unknown or another user's id.
        ``agent_id`` / ``run_id``: the call acts in that agent's / run's scope (as in ``search``):
        an item written with another agent or run, or without one, is ``NotFoundError`` too."""
        row = yield from self._require_item(v.user_id(user_id), v.item_id(item_id), item_scope(agent_id, run_id))
        return self._item(row)

    @operation
    def update(self, item_id: int, *, user_id: str, agent_id: str | None = None, run_id: str | None = None,
               **changes: Unpack[ItemChanges]) -> Op[Item]:
        """Change fields of an item; a new content or title is re-embedded. ``agent_id`` /
        ``run_id``: the call's scope, as in ``get`` (an item's own scopes never change)."""
        uid, iid = v.user_id(user_id), v.item_id(item_id)
        scope = item_scope(agent_id, run_id)
        allowed = {"content", "title", "type", "theme", "tags", "status", "pinned", "person", "confidence",
                   "observed_at", "expires_at", "metadata", "source", "source_ref", "context"}
        unknown = set(changes) - allowed
        if unknown:
            raise ValidationError(f"cannot update field(s): {', '.join(sorted(unknown))}")
        clean: dict[str, Any] = {}
        checks: dict[str, Callable[[Any], Any]] = {
            "content": self._shared.content,
            "title": lambda x: v.optional_text(x, "title", v.MAX_TITLE),
            "type": lambda x: v.choice(x, "type", ITEM_TYPES),
            "theme": lambda x: v.slug(x) if x not in (None, "") else "general",
            "tags": lambda x: list(v.tags(x)),
            "status": lambda x: v.choice(x, "status", ITEM_STATUSES),
            "pinned": lambda x: v.flag(x, "pinned"),
            "person": lambda x: v.optional_text(x, "person", v.MAX_KEY),
            "confidence": v.confidence,
            "observed_at": lambda x: v.when(x, "observed_at"),
            "expires_at": lambda x: v.when(x, "expires_at"),
            "metadata": lambda x: v.nested_mapping(x, "metadata", self._shared.max_content_bytes) or {},
            "context": lambda x: v.optional_text(x, "context", self._shared.max_content_bytes),
            "source": lambda x: v.optional_text(x, "source", v.MAX_KEY),
            "source_ref": lambda x: v.nested_mapping(x, "source_ref", self._shared.max_content_bytes),
        }
        for key, value in changes.items():
            clean[key] = checks[key](value)
        if scope:  # before anything is written, a fact's value included (``_follow_fact``)
            yield from self._require_item(uid, iid, scope)
        if clean.get("person"):
            clean["person"] = yield from self.person_name(uid, clean["person"])
        if {"content", "theme", "type"} & set(clean):
            yield from self._follow_fact(uid, iid, clean)
        row: ItemRow | None
        if clean:
            row = yield db.update_item(user_id=uid, item_id=iid, changes=clean, model=self._shared.model,
                                       now=self._shared.now(), **scope)
        else:
            row = yield db.get_item(user_id=uid, item_id=iid, **scope)
        if row is None:
            raise NotFoundError(f"no item {iid} for this user")
        if "status" in clean and row.get("fact_id") is not None and self.item_changed is not None:
            yield from self.item_changed(uid, row, clean["status"])
        if self._shared.embed_on_write and {"content", "title", "context"} & set(clean) and row.get("emb_state") != "ready":
            yield from self.embed_new([(iid, uid, embedding_text(row["title"], row["content"], row.get("context")))])
            row = yield from self._require_item(uid, iid)
        return self._item(row)

    def _follow_fact(self, uid: str, iid: int, clean: dict[str, Any]) -> Op:
        """An item that mirrors a fact stays that fact's copy: a new content becomes the fact's new
        value (``edit_fact``; the old value goes to the fact's history), and its category (theme)
        and type cannot change apart from the fact."""
        current = yield from self._require_item(uid, iid)
        if current.get("fact_id") is None:
            return
        fact = (current.get("metadata") or {}).get("fact") or {}
        if clean.get("theme", current["theme"]) != current["theme"] or clean.get("type", "fact") != "fact":
            raise ValidationError(f"item {iid} is the searchable copy of the fact {fact.get('key')!r}: its theme "
                                  "and type follow the fact; change the fact itself (upsert_fact, or the "
                                  "facts endpoint of the REST API)")
        clean.pop("theme", None)
        clean.pop("type", None)
        if "content" in clean and self.edit_fact is not None:
            yield from self.edit_fact(uid, current, clean.pop("content"))

    @operation
    def pin(self, item_id: int, *, user_id: str, pinned: bool = True, agent_id: str | None = None,
            run_id: str | None = None) -> Op[Item]:
        """Pin (or unpin) an item: pinned items get +0.20 in ranking and no recency decay.
        ``agent_id`` / ``run_id``: the call's scope, as in ``get``."""
        return (yield from self.update(item_id, user_id=user_id, pinned=pinned, agent_id=agent_id, run_id=run_id))

    @operation
    def archive(self, item_id: int, *, user_id: str, archived: bool = True, agent_id: str | None = None,
                run_id: str | None = None) -> Op[Item]:
        """Archive (or restore) an item: archived items leave default searches but are kept.
        ``agent_id`` / ``run_id``: the call's scope, as in ``get``."""
        status = "archived" if archived else "active"
        return (yield from self.update(item_id, user_id=user_id, status=status, agent_id=agent_id, run_id=run_id))

    @operation
    def delete(self, item_id: int, *, user_id: str, agent_id: str | None = None, run_id: str | None = None) -> Op[None]:
        """Delete an item and its embedding for good, and what it came from (the forgetting
        guarantee, docs/concepts.md): a fact's searchable item takes its fact along; a stored
        turn or a note of a conversation, that conversation's text of it. ``agent_id`` /
        ``run_id``: the call's scope, as in ``get`` (an item outside it is ``NotFoundError`` and stays)."""
        uid, iid = v.user_id(user_id), v.item_id(item_id)
        scope = item_scope(agent_id, run_id)
        row: ItemRow | None = yield db.get_item(user_id=uid, item_id=iid, **scope)
        if row is None or not (yield db.delete_item(user_id=uid, item_id=iid, **scope)):
            raise NotFoundError(f"no item {iid} for this user")
        if self.item_changed is not None:
            yield from self.item_changed(uid, row, "deleted")

    @operation
    def list_items(self, *, user_id: str | None = None, all_users: bool = False, theme: str | None = None,
                   types: Sequence[str] | None = None, status: str = "active", limit: int = 50, offset: int = 0,
                   include_expired: bool = False, namespace_prefix: Sequence[str] | None = None,
                   order: str = "created", agent_id: str | None = None, run_id: str | None = None,
                   filters: MetadataFilter | None = None, person: str | None = None) -> Op[list[Item]]:
        """Items newest first (``order``: ``created``, or ``updated`` for the last written first),
        filtered by theme, types and status (``any`` includes archived). ``namespace_prefix``: only
        keyed items (``put_keyed``) whose namespace equals it or starts with its labels.
        ``agent_id`` / ``run_id``: only the items written with that agent / run (exact match).
        ``filters``: conditions on ``metadata``, as in ``search``. ``person``: only the items about
        that household member (a name or an alias, as in ``search``)."""
        f = yield from self._listing_filters(user_id, all_users, status, theme, types, include_expired,
                                             namespace_prefix, agent_id, run_id, filters, person)
        rows: list[ItemRow] = yield db.list_items(filters=f, limit=v.limit(limit, 10_000), offset=v.offset(offset),
                                   order=v.choice(order, "order", tuple(ORDER_COLUMNS)))
        return [self._item(r) for r in rows]

    @operation
    def count_items(
        self,
        *,
        user_id: str | None = None,
        all_users: bool = False,
        theme: str | None = None,
        types: Sequence[str] | None = None,
        status: str = "active",
        include_expired: bool = False,
        namespace_prefix: Sequence[str] | None = None,
        agent_id: str | None = None,
        run_id: str | None = None,
        filters: MetadataFilter | None = None,
        person: str | None = None,
    ) -> Op[int]:
        """How many items ``list_items`` pages through with the same filters (for page counts)."""
        f = yield from self._listing_filters(user_id, all_users, status, theme, types, include_expired,
                                             namespace_prefix, agent_id, run_id, filters, person)
        return (yield db.count_items(filters=f))

    # -- summary, sessions, users ----------------------------------------------------------

    @operation
    def get_summary(self, *, user_id: str) -> Op[SummaryText | None]:
        """The current narrative summary text, or None (also once its facts are all deleted)."""
        row: SummaryRow | None = yield db.get_summary(user_id=v.user_id(user_id))
        return SummaryText(row["content"]) if row is not None and row["content"] else None

    @operation
    def set_summary(self, content: str, *, user_id: str) -> Op[Summary]:
        """Store a new summary version (earlier versions are kept)."""
        uid, text = v.user_id(user_id), self._shared.content(content)
        yield from self.refuse_if_off([uid])
        row = yield db.set_summary(user_id=uid, content=text, now=self._shared.now())
        return Summary(**row)

    @operation
    def summary_history(self, *, user_id: str, limit: int = 10) -> Op[SummaryHistory]:
        """The newest ``limit`` summary versions, newest first."""
        rows = yield db.summary_history(user_id=v.user_id(user_id), limit=v.limit(limit, 1000))
        return SummaryHistory(Summary(**r) for r in rows)

    @operation
    def mark_session_extracted(self, session_id: str, *, user_id: str, at: Any = None) -> Op[datetime]:
        """Record that a session's facts were extracted (now, unless ``at`` is given)."""
        when = v.when(at, "at") or self._shared.now()
        yield db.mark_session_extracted(
            user_id=v.user_id(user_id), session_id=v.text(session_id, "session_id", v.MAX_KEY), at=when
        )
        return when

    @operation
    def get_extracted_at(self, session_id: str, *, user_id: str) -> Op[datetime | None]:
        """When the session was last extracted, or None."""
        return (
            yield db.get_extracted_at(
                user_id=v.user_id(user_id), session_id=v.text(session_id, "session_id", v.MAX_KEY)
            )
        )

    @operation
    def forget(self, *, user_id: str) -> Op[dict[str, int]]:
        """Delete everything stored for a user; returns the counts of rows removed per table."""
        return (yield db.forget_user(user_id=v.user_id(user_id)))

    @operation
    def list_users(self, *, limit: int | None = None, offset: int = 0) -> Op[list[dict[str, Any]]]:
        """Admin: users by id with item and fact counts and own ``timezone`` (all of them, or a page)."""
        return (yield db.list_users(limit=None if limit is None else v.limit(limit, 100_000), offset=v.offset(offset)))

    def zone_of(self, user_id: str) -> Op[tzinfo]:
        """The time zone whose days are the user's: their own, else the store's."""
        own = (yield db.user_settings(user_id=user_id))["timezone"]
        return user_zone(own) if own else zone(self._shared.settings.timezone)

    @operation
    def memory_enabled(self, *, user_id: str) -> Op[bool]:
        """Whether memory is on for the user (the default); see ``set_memory_enabled``."""
        return (yield from self.memory_on(v.user_id(user_id)))

    @operation
    def set_memory_enabled(self, enabled: bool, *, user_id: str) -> Op[bool]:
        """Turn the user's memory off (``False``) or on again. While off, nothing new is stored
        about them: conversations are not recorded or extracted (``add_messages`` skips them), the
        adapters inject a note that memory is off instead of memory, and a write (``add``,
        ``add_note``, ``upsert_fact``, ``put_keyed``, ``set_summary``, the agents' tools) raises
        ``MemoryOffError``; what is stored stays readable, deletable and exportable (``forget``
        deletes it). Returns the new state."""
        uid, on = v.user_id(user_id), v.flag(enabled, "enabled")
        settings: UserSettings = yield db.user_settings(user_id=uid)
        if on != (settings["memory_off_since"] is None):  # turning it off again keeps the first time
            now = self._shared.now()
            yield db.set_memory_off(user_id=uid, since=None if on else now, now=now)
        return on

    @operation
    def user_timezone(self, *, user_id: str) -> Op[str | None]:
        """The user's own IANA time zone, or None: the store's (``Settings.timezone``) applies."""
        return (yield db.user_settings(user_id=v.user_id(user_id)))["timezone"]

    @operation
    def set_user_timezone(self, timezone: str | None, *, user_id: str) -> Op[str | None]:
        """Keep ``timezone`` (IANA, e.g. ``"Europe/Lisbon"``; None: the store's again) as the user's:
        search reads "yesterday" or "on 3 June" in the user's queries in its days, unless the call
        passes ``timezone=``. Returns the name kept; ``ValidationError`` for an unknown zone."""
        name = None if timezone is None else v.timezone_name(timezone)
        yield db.set_user_timezone(user_id=v.user_id(user_id), name=name, now=self._shared.now())
        return name

    # -- embeddings maintenance (the job itself: ``operations/embedding.py``) -----------------------

    def embed_pending(self, user_id: str | None, batch_size: int = EMBED_BATCH,
                      progress: Callable[[int], None] | None = None) -> Op:
        """Embed the rows of ``user_id`` (None: everyone's) without a ready vector of the active model
        (pending, error, another model), a batch at a time; ``progress(done)`` after each. While the
        store moves to a new model, of the model each user's searches read. Stops when the provider
        fails a whole batch rather than mark every row as error. Returns (embedded, failed). Used by
        ``backfill`` and by imports, which so resume what a killed or failed import left pending."""
        model, previous = self._shared.require_model(), self._shared.previous_model
        # moving: the moved users' rows in the new model, the others' in the old one
        passes = [(model, None)] if previous is None else [(model, model), (previous, model)]
        embedded = failed = 0
        for pass_model, moving_to in passes:
            embedder, after = self._shared.embedder_of(pass_model), 0
            assert embedder is not None
            while rows := (yield db.pending_embeddings(model=pass_model, user_id=user_id, limit=batch_size,
                                                       after_id=after, moving_to=moving_to)):
                after = rows[-1][0]
                embedder.reset_backoff()  # an explicit backfill or import always tries the provider
                stored, lost = yield from self.embed_rows(rows, pass_model)
                embedded, failed = embedded + stored, failed + lost
                if progress:
                    progress(embedded + failed)
                if lost and not stored:
                    return embedded, failed
        return embedded, failed
