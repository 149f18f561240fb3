"""Facts: one value per (user, agent, category, key), its earlier values kept as history, and a
mirror item (type ``fact``) so that search finds facts like any other memory."""

from __future__ import annotations

from typing import Any

from ..backends.base import FactHistoryRow, FactRow, ItemRow, NewItem
from ..calls import db
from ..core import convert
from ..core import validation as v
from ..core.contract import DEFAULT_CONFIDENCE, SOURCE_CONFIDENCE, fact_item_content
from ..errors import NotFoundError, ValidationError
from ..pipeline import dedup
from ..pipeline.llm import CallRecord
from ..models import FACT_CATEGORIES, FACT_SORT_FIELDS, FACT_SOURCES, Fact, FactChange, FactList
from ..sansio import Op, operation
from .follow import Follow, said
from .memory import MemoryOperations
from .shared import Shared



class FactOperations:
    """upsert / get / delete / list facts; other concerns write facts through ``upsert_fact``."""

    def __init__(self, shared: Shared, memory: MemoryOperations) -> None:
        self._shared = shared
        self._memory = memory
        self.follow = Follow(shared, self.newest_facts)

    @operation
    def upsert_fact(self, *, user_id: str, category: str, key: str, value: str, source: str = "conversation",
                    confidence: int | None = None, source_context: str | None = None,
                    source_session_id: str | None = None, source_message_id: str | None = None,
                    person: str | None = None, expires_at: Any = None, expires_days: Any = None,
                    agent_id: str | None = None, run_id: str | None = None,
                    match_equivalent: bool = True, observed_at: Any = None,
                    update_summary: bool = True) -> Op[FactChange]:
        """Insert or update the fact (user, agent_id, category, key). A changed value moves the old
        one to history. Returns a ``FactChange`` whose action is added, updated, unchanged or
        history.

        ``observed_at``: when the value was said (default now; a later time counts as now). The
        newest statement wins, not the last one written: a value said before the current one
        never replaces it; it goes into the history at its own time (action ``history``), and the
        history's ``valid_from``/``valid_to`` are the times its values were said.

        ``match_equivalent`` (default True): when no fact has this key yet but one of the same
        agent names the same attribute under another key, that fact is updated instead of a
        second one added, as extraction does: ``home_city`` finds ``city`` or ``location`` (key
        words such as home, current, my, preferred are ignored and synonyms such as city/location,
        job/occupation, editor/ide are one attribute: ``pipeline.dedup``), in the same category
        or, in another category, only with the same value. ``FactChange.requested_key`` then
        holds the key given. False: the key is taken as given.

        ``agent_id`` is part of the fact's identity: the same key saved by agents A and B is two
        facts, and a fact saved without an agent is one shared fact (every agent sees all three
        unless it filters by ``agent_id``). ``run_id`` only records the run that last wrote it.

        ``update_summary`` (default True): a change brings the summary up to date (see
        ``refresh_summary``); False leaves that to the caller (a bulk writer refreshes it once)."""
        uid = v.user_id(user_id)
        now = self._shared.now()
        follow = v.flag(update_summary, "update_summary")
        fact = yield from self.checked(uid, now, category=category, key=key, value=value, source=source,
                                       confidence=confidence, source_context=source_context,
                                       source_session_id=source_session_id, source_message_id=source_message_id,
                                       person=person, expires_at=expires_at, expires_days=expires_days,
                                       agent_id=agent_id, run_id=run_id, observed_at=observed_at)
        match = v.flag(match_equivalent, "match_equivalent")
        yield from self._memory.refuse_if_off([uid])
        action, row, previous, requested, mirror = yield db.in_one_transaction(
            make_plan=lambda: self.write_fact(uid, dict(fact), match, now))
        if self._shared.embed_on_write and action in ("added", "updated") and row.get("item_id"):
            yield from self._memory.embed_new([(row["item_id"], uid, mirror.content)])
        change = FactChange(action=action, fact=Fact(**row), previous_value=previous if action == "updated" else None,
                            requested_key=requested,
                            reason=None if requested is None else f"{requested} is {row['key']}")
        if action in ("added", "updated") and follow:
            yield from self.follow.facts_changed(uid, removed=action == "updated")
        return change

    def checked(self, uid: str, now: Any, *, category: Any, key: Any, value: Any, source: Any, confidence: Any,
                source_context: Any, source_session_id: Any, source_message_id: Any, person: Any, expires_at: Any,
                expires_days: Any, agent_id: Any, run_id: Any, observed_at: Any) -> Op[dict]:
        """``upsert_fact``'s arguments, validated, as the fact row to write (reads the household)."""
        source = v.choice(source, "source", FACT_SOURCES)
        return {
            "category": v.choice(category, "category", FACT_CATEGORIES),
            "key": v.text(key, "key", v.MAX_KEY),
            "value": self._shared.content(value, "value"),
            "source": source,
            "confidence": v.confidence(confidence) if confidence is not None
            else SOURCE_CONFIDENCE.get(source, DEFAULT_CONFIDENCE),
            "source_context": v.optional_text(source_context, "source_context", self._shared.max_content_bytes),
            "source_session_id": v.optional_text(source_session_id, "source_session_id", v.MAX_KEY),
            "source_message_id": v.optional_text(source_message_id, "source_message_id", v.MAX_KEY),
            "person": (yield from self._memory.person_name(uid, v.optional_text(person, "person", v.MAX_KEY))),
            "expires_at": v.expiry(expires_at, expires_days, now),
            "agent_id": v.scope_id(agent_id, "agent_id"),
            "run_id": v.scope_id(run_id, "run_id"),
            "observed_at": min(v.when(observed_at, "observed_at") or now, now),
        }

    def write_fact(self, uid: str, fact: dict, match_equivalent: bool, now: Any) -> Op:
        """A plan for ``in_one_transaction``: under the user's write lock, find the equivalent fact
        (``match_equivalent``) and write; concurrent writers of ``city`` and ``home_city`` then
        end with one fact, as sequential ones do. Returns the backend's (action, row, previous),
        the key asked for when another was updated, and the fact's searchable item."""
        yield db.lock_user_writes(user_id=uid)
        requested = None
        if match_equivalent:
            mine = [r for r in (yield from self.newest_facts(uid)) if r.get("agent_id") == fact["agent_id"]]
            if not any(r["category"] == fact["category"] and r["key"] == fact["key"] for r in mine):
                other = dedup.equivalent_fact(fact["category"], fact["key"], fact["value"], mine)
                if other is not None:
                    requested, fact["category"], fact["key"] = fact["key"], other["category"], other["key"]
        mirror = NewItem(user_id=uid, type="fact", content=fact_item_content(fact["key"], fact["value"]),
                         theme=fact["category"], source=fact["source"], confidence=fact["confidence"],
                         person=fact["person"], expires_at=fact["expires_at"], agent_id=fact["agent_id"],
                         run_id=fact["run_id"], observed_at=fact["observed_at"],
                         metadata={"fact": {"category": fact["category"], "key": fact["key"], "value": fact["value"]}})
        action, row, previous = yield db.upsert_fact(user_id=uid, fact=fact, item=mirror, model=self._shared.model,
                                                     now=now)
        return action, row, previous, requested, mirror

    def edit_from_item(self, uid: str, item: ItemRow, content: str) -> Op:
        """A new content for a fact's searchable item, as the fact's new value: ``key: value``
        (the form the item shows) gives value, any other text is the value itself."""
        ref = (item.get("metadata") or {}).get("fact") or {}
        fact: FactRow | None = yield db.get_fact(user_id=uid, category=str(ref.get("category")), key=str(ref.get("key")),
                                 agent_id=item.get("agent_id"))
        if fact is None:
            raise NotFoundError(f"item {item['id']} names a fact that is no longer stored")
        value = content
        for prefix in (fact_item_content(fact["key"], "").rstrip(), f"{fact['key']}:"):
            if value.casefold().startswith(prefix.casefold()):
                value = value[len(prefix):].strip()
                break
        if not value:
            raise ValidationError(f"no value for the fact {fact['key']!r} in the new content")
        return (yield from self.upsert_fact(
            user_id=uid, category=fact["category"], key=fact["key"], value=value, source="user_explicit",
            source_context="edited through its item", person=fact.get("person"), agent_id=fact.get("agent_id"),
            match_equivalent=False))

    def newest_facts(self, uid: str, limit: int | None = None, category: str | None = None,
                     include_expired: bool = False) -> Op:
        """The user's fact rows, newest first (the order dedup and the summary read them in)."""
        return (yield db.list_facts(user_id=uid, limit=limit, offset=0, sort_by="updated_at", descending=True,
                                    search=None, category=category, now=self._shared.now(),
                                    include_expired=include_expired))

    @operation
    def get_fact(self, key: str, *, user_id: str, category: str | None = None,
                 agent_id: str | None = None, run_id: str | None = None) -> Op[Fact]:
        """The fact with this key (and category, and agent, when given; else the newest such), with
        its history. ``run_id``: only a fact last written in that run (as ``get_all_facts``)."""
        uid, key = v.user_id(user_id), v.text(key, "key", v.MAX_KEY)
        cat = None if category is None else v.choice(category, "category", FACT_CATEGORIES)
        agent, run = v.scope_id(agent_id, "agent_id"), v.scope_id(run_id, "run_id")
        rows = yield from self.newest_facts(uid, category=cat, include_expired=True)
        rows = [r for r in rows if r["key"] == key and agent in (None, r.get("agent_id"))
                and run in (None, r.get("run_id"))]
        if not rows:
            raise NotFoundError(f"no fact {key!r} for this user")
        history = yield db.fact_history(user_id=uid, fact_ids=[rows[0]["id"]])
        return convert.fact(rows[0], history)

    @operation
    def delete_fact(self, key: str, *, user_id: str, category: str | None = None,
                    agent_id: str | None = None, run_id: str | None = None) -> Op[int]:
        """Delete the fact(s) with this key (optionally only in one category, only one agent's,
        only those last written in one run), history included; ``NotFoundError`` when none is."""
        uid, key = v.user_id(user_id), v.text(key, "key", v.MAX_KEY)
        cat = None if category is None else v.choice(category, "category", FACT_CATEGORIES)
        agent, run = v.scope_id(agent_id, "agent_id"), v.scope_id(run_id, "run_id")
        rows = [r for r in (yield from self.newest_facts(uid, category=cat, include_expired=True))
                if r["key"] == key and agent in (None, r.get("agent_id")) and run in (None, r.get("run_id"))]
        count = yield db.delete_facts(user_id=uid, key=key, category=cat, agent_id=agent, run_id=run)
        if not count:
            raise NotFoundError(f"no fact {key!r} for this user")
        yield from self.facts_removed(uid, rows)
        return count

    @operation
    def refresh_summary(self, *, user_id: str) -> Op[bool]:
        """Write the summary again from the facts as they stand (by the chat model when one is set,
        else composed from the facts); True when a new version was stored. Every fact change
        does this by itself (with a chat model: in the background, after storing the composed
        text at once when a value was deleted or replaced)."""
        uid = v.user_id(user_id)
        ledger: list[CallRecord] = []  # the chat model's calls, booked in usage stats (no session)
        stored = yield from self.follow.rewrite(uid, ledger, self._shared.chat is not None)
        if ledger:
            yield db.record_llm_calls(user_id=uid, calls=self._shared.named_calls(ledger), now=self._shared.now())
        return stored

    def facts_removed(self, uid: str, rows: list[FactRow]) -> Op[None]:
        """After facts were deleted: the raw text they came from is forgotten (their values, past
        ones included, in their source session, and in the summary's versions), then the summary
        is written from the facts left."""
        history: dict[int, list[FactHistoryRow]] = \
            (yield db.fact_history(user_id=uid, fact_ids=[r["id"] for r in rows])) if rows else {}
        for row in rows:
            values = [row, *history.get(row["id"], [])]
            phrases = sorted({p for value in values for p in said({**row, **value})})
            yield from self.follow.forget_sources(uid, phrases, row.get("source_session_id"))
        yield from self.follow.facts_changed(uid, removed=True)

    def item_changed(self, uid: str, item: ItemRow, what: str) -> Op[None]:
        """An item was deleted (``what`` = deleted) or archived / restored (its new status). A
        fact's searchable item takes its fact along: deleted, the fact is deleted; archived, the
        fact leaves the summary until restored. Any other deleted item forgets its raw text."""
        ref = (item.get("metadata") or {}).get("fact") or {}
        if item.get("fact_id") is None:
            if what == "deleted":
                yield from self._forget_item(uid, item)
            return
        if what != "deleted":
            yield from self.follow.facts_changed(uid, removed=what == "archived")
            return
        category, key = str(ref.get("category")), str(ref.get("key"))
        rows = [r for r in (yield from self.newest_facts(uid, category=category, include_expired=True))
                if r["key"] == key and r["id"] == item["fact_id"]]
        # by id: a shared fact's item takes only that fact, not the agents' facts of the same key
        yield db.delete_facts(user_id=uid, key=key, category=category, fact_id=item["fact_id"])
        yield from self.facts_removed(uid, rows)

    def _forget_item(self, uid: str, item: ItemRow) -> Op[None]:
        ref = item.get("source_ref") or {}
        session = ref.get("session_id")
        if not isinstance(session, str):
            return
        if isinstance(ref.get("first_seq"), int) and isinstance(ref.get("last_seq"), int):  # a stored turn
            yield from self.follow.forget_sources(uid, [], session, (ref["first_seq"], ref["last_seq"]))
            yield from self.follow.forget_turn_context(uid, session, item["content"])
        else:
            yield from self.follow.forget_sources(uid, said({"value": item["content"]}), session)

    @operation
    def get_all_facts(self, *, user_id: str | None = None, all_users: bool = False, limit: int | None = None,
                      offset: int = 0, search: str | None = None, sort_by: str = "category",
                      sort_order: str = "desc", category: str | None = None, include_history: bool = False,
                      include_expired: bool = False, agent_id: str | None = None,
                      run_id: str | None = None) -> Op[FactList]:
        """All facts of a user (or of everyone with ``all_users=True``), paged and sorted.
        ``agent_id`` / ``run_id``: only the facts of that agent / last written in that run (exact;
        the shared facts, which have no agent, are left out by an ``agent_id`` filter)."""
        uid = None if (all_users and user_id is None) else v.user_id(user_id)
        rows: list[FactRow] = yield db.list_facts(
            user_id=uid,
            limit=None if limit is None else v.limit(limit, 100_000),
            offset=v.offset(offset),
            sort_by=v.choice(sort_by, "sort_by", FACT_SORT_FIELDS),
            descending=v.choice(sort_order, "sort_order", ("asc", "desc")) == "desc",
            search=v.optional_text(search, "search", 1024),
            category=None if category is None else v.choice(category, "category", FACT_CATEGORIES),
            now=self._shared.now(),
            include_expired=include_expired,
            agent_id=v.scope_id(agent_id, "agent_id"),
            run_id=v.scope_id(run_id, "run_id"),
        )
        history = (
            (yield db.fact_history(user_id=uid, fact_ids=[r["id"] for r in rows])) if include_history and rows else {}
        )
        return FactList(convert.fact(r, history) for r in rows)
