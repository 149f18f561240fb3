"""The backend protocol: what a database must do for the store, and nothing about ranking.

A backend stores rows and returns candidate lists; it never decides the final order (that is
``retrieval``) and never validates user input (that is the store). Each write method is one
transaction. Rows are dicts with the column names of the schema, typed (``ItemRow``, ``FactRow``,
``FactHistoryRow``, ``RankRow``, ``SessionRow``, ``SessionRead``, ``MessageRow``, ``SummaryRow``, ``PersonRow``,
``UserRow``, ``UserSettings``); timestamps are aware UTC datetimes.
Driver exceptions are translated into ``StorageError`` at this boundary.

``Backend`` is the composition of one Protocol per concern (``Lifecycle``, ``ItemStore``,
``KeyedStore``, ``FactStore``, ``SessionStore``, ``PersonStore``, ``SearchReads``,
``EmbeddingStore``, ``Transfer``); what only some backends can do is a Protocol of its own,
checked with ``isinstance`` (``SharesReads``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Callable, Generator, Mapping, Protocol, Sequence, TypedDict, runtime_checkable

import numpy as np

from ..core.filters import Condition


class ItemRow(TypedDict):
    """An item as ``get_item``, ``list_items``, ``fetch_items`` and the keyed reads return it: the
    ``items`` columns and the state of its embedding (``emb_*``: None while it has none)."""

    id: int
    user_id: str
    type: str
    theme: str
    title: str | None
    content: str
    tags: list[str]
    status: str
    pinned: bool
    source: str | None
    source_ref: dict[str, Any] | None
    person: str | None
    confidence: int | None
    observed_at: datetime | None
    expires_at: datetime | None
    metadata: dict[str, Any]
    context: str | None
    fact_id: int | None
    created_at: datetime
    updated_at: datetime
    agent_id: str | None
    run_id: str | None
    namespace: str | None  # keyed items: the labels joined by '.'
    ext_key: str | None  # keyed items: the key
    ttl_minutes: float | None
    emb_state: str | None  # pending | ready | failed | skipped
    emb_model: str | None
    emb_dims: int | None
    emb_error: str | None
    emb_updated: datetime | None


class Statement(TypedDict):
    """What a fact's value and each of its earlier values hold of the statement that said it
    (``core.timeline.STATEMENT_COLUMNS``)."""

    value: str
    source: str
    confidence: int
    source_context: str | None
    source_session_id: str | None
    source_message_id: str | None


class FactRow(Statement):
    """A fact as ``get_fact``, ``list_facts`` and ``upsert_fact`` return it: the ``facts`` columns."""

    id: int
    user_id: str
    category: str
    key: str
    person: str | None
    expires_at: datetime | None
    last_verified_at: datetime | None
    created_at: datetime
    updated_at: datetime
    item_id: int | None  # the fact's searchable item
    agent_id: str | None  # None: the fact every agent shares
    run_id: str | None
    observed_at: datetime  # when the current value was said (every write sets it; schema 11 filled it in)


class PromotedFactRow(FactRow):
    """A fact the promotion job made (``promoted_facts``), with the number of items promoted into it."""

    promoted_items: int


class FactHistoryRow(Statement):
    """An earlier value of a fact (``fact_history``), held from ``valid_from`` to ``valid_to``."""

    id: int
    fact_id: int
    user_id: str
    valid_from: datetime
    valid_to: datetime


class RankRow(TypedDict):
    """What re-ranking reads of a candidate (``rank_rows``, ``Hits.rows``); title and content are
    also the text its relevance is judged on."""

    id: int
    created_at: datetime
    observed_at: datetime | None
    pinned: bool
    person: str | None
    title: str | None
    content: str



class ThemeRow(TypedDict):
    """A theme of the user (``themes``) with its number of active, unexpired items (``list_themes``)."""

    slug: str
    display_name: str
    description: str | None
    created_at: datetime
    active_count: int


class PastStatement(TypedDict):
    """An earlier value of a fact said in a session (``past_statements``), with its fact's key,
    current value and searchable item."""

    user_id: str
    session_id: str
    message_id: str | None
    value: str
    key: str
    current_value: str
    item_id: int | None


class PromotionCandidate(TypedDict):
    """An item the promotion job may cluster (``promotion_candidates``): its text, its vector of the
    model, and whether it is in a promotion already (``fact_id``: the fact it went into)."""

    id: int
    type: str
    theme: str
    title: str | None
    content: str
    person: str | None
    created_at: datetime
    observed_at: datetime | None
    vector: np.ndarray
    promoted: bool
    fact_id: int | None


class MessageRow(TypedDict):
    """A message of a session (``messages``); ``tool_calls`` an empty list when it made none."""

    user_id: str
    session_id: str
    seq: int  # 1, 2, ... in the order the session received them
    role: str
    content: str
    name: str | None
    tool_calls: list[dict[str, Any]]
    tool_call_id: str | None
    created_at: datetime


class SessionRow(TypedDict):
    """A conversation's state (``session_state``): its counts, its extraction marks and claim."""

    user_id: str
    session_id: str
    created_at: datetime | None  # None: known only from mark_session_extracted
    last_active: datetime | None
    updated_at: datetime
    state: str  # open | running | extracted | failed
    error: str | None
    attempts: int
    claimed_at: datetime | None
    message_count: int
    user_messages: int
    extracted_at: datetime | None
    extracted_seq: int
    extracted_user_messages: int
    chunked_seq: int
    agent_id: str | None
    run_id: str | None


class SessionRead(SessionRow, total=False):
    """A session as ``get_session`` reads it: with its messages (after a ``seq``) when asked for."""

    messages: list[MessageRow]


class SessionCounts(TypedDict):
    sessions: int
    messages: int


class CallTotals(TypedDict):
    """LLM calls of a purpose or a model: calls, tokens, failures, and the sessions they came from."""

    calls: int
    input_tokens: int
    output_tokens: int
    failed: int
    sessions: int


class SessionUsage(TypedDict):
    """A session with the LLM calls and tokens its runs cost."""

    user_id: str
    session_id: str
    state: str
    message_count: int
    extracted_at: datetime | None
    llm_calls: int
    input_tokens: int
    output_tokens: int


class UsageStats(TypedDict):
    """``usage_stats``: sessions and messages by state, LLM calls by purpose and by model, the costliest sessions."""

    states: dict[str, SessionCounts]
    purposes: dict[str, CallTotals]
    models: dict[str, CallTotals]
    sessions: list[SessionUsage]


class SummaryRow(TypedDict):
    """A version of the user's summary (``summaries``)."""

    content: str
    version: int
    created_at: datetime


class PersonRow(TypedDict):
    """A person of the user's household (``persons``; ``core.contract.PERSON_COLUMNS``)."""

    user_id: str
    id: int
    display_name: str
    pronouns: str | None
    role: str | None
    aliases: list[str]
    birth_date: str | None
    notes: str | None
    devices: list[str]
    created_at: datetime
    updated_at: datetime


class UserSettings(TypedDict):
    """What ``user_settings`` reads of a user (defaults for an unknown one)."""

    household_mode: str  # single | multi
    timezone: str | None
    memory_off_since: datetime | None
    household_name: str | None  # the household's display name
    locale: str | None  # a BCP 47 tag such as en-US


class UserRow(TypedDict):
    """A user as ``list_users`` lists them, with their counts of items and facts."""

    id: str
    created_at: datetime
    timezone: str | None
    memory_off_since: datetime | None
    items: int
    facts: int


@dataclass(frozen=True)
class Filters:
    """Row filters shared by every candidate query. ``user_id`` None means all users (admin)."""

    user_id: str | None
    now: datetime
    status: str = "active"  # active | archived | any
    theme: str | None = None
    types: tuple[str, ...] | None = None
    since: datetime | None = None  # created_at >= since (recency_days)
    person: str | None = None
    include_expired: bool = False
    namespace_prefix: str | None = None  # keyed items whose namespace (stored form) equals or is below it
    agent_id: str | None = None
    run_id: str | None = None
    metadata: tuple[Condition, ...] = ()  # checked metadata conditions (core.filters); facts never pass

    @property
    def plain(self) -> bool:
        """Only the user, active rows and expiry: no condition that could leave an index scan's
        nearest rows with few of the user's (so few hits where an exact search finds enough)."""
        return (self.status == "active" and self.theme is None and not self.types and self.since is None
                and self.person is None and self.namespace_prefix is None and self.agent_id is None
                and self.run_id is None and not self.metadata)


@dataclass(frozen=True, eq=False)  # holds an array: compared and hashed by identity
class Beside:
    """What a candidate query may read beside its hits, so that search needs no later round trip
    for it: the cosine of each hit to ``query`` (vectors of ``model``) and each hit's session
    neighbours. A backend whose reads are cheap (SQLite, in process) may read none of it."""

    model: str | None = None
    query: np.ndarray | None = None
    neighbours: bool = False


@dataclass(frozen=True)
class Hits:
    """A candidate query's (id, score) pairs, best first, and what its backend read beside them.
    ``rows``: the ``rank_rows`` rows of the hits and of their neighbours (None: not read);
    ``neighbours``: each hit's session neighbours, as ``Backend.neighbours`` (None: not read);
    ``cosines``: the cosine of hits to ``Beside.query`` (missing: not read)."""

    scored: list[tuple[int, float]]
    rows: list[RankRow] | None = None
    neighbours: dict[int, list[int]] | None = None
    cosines: dict[int, float] = field(default_factory=dict)


def scope_columns(agent_id: str | None, run_id: str | None) -> list[tuple[str, str]]:
    """The (column, value) pairs an item call by id keeps to: the scopes that are set (None: any
    agent / run). A row outside them is treated as absent: the same answer as an unknown id."""
    return [(column, value) for column, value in (("agent_id", agent_id), ("run_id", run_id)) if value is not None]


# list_items orders, newest first: by creation or by last update
ORDER_COLUMNS = {"created": "created_at", "updated": "updated_at"}

@dataclass(frozen=True)
class NewItem:
    """An item ready to insert (validated by the store)."""

    user_id: str
    type: str
    content: str
    theme: str
    title: str | None = None
    tags: tuple[str, ...] = ()
    status: str = "active"
    pinned: bool = False
    source: str | None = None
    source_ref: dict[str, Any] | None = None
    person: str | None = None
    confidence: int | None = None
    observed_at: datetime | None = None
    expires_at: datetime | None = None
    metadata: dict[str, Any] | None = None
    context: str | None = None  # text that situates the item (e.g. the previous turn); indexed, not shown
    vector: np.ndarray | None = None  # precomputed embedding of the active model
    agent_id: str | None = None
    run_id: str | None = None
    namespace: str | None = None  # keyed items: the labels joined by '.'
    key: str | None = None  # keyed items: stored as items.ext_key
    ttl_minutes: float | None = None  # keyed items: the TTL a read may refresh


class Lifecycle(Protocol):
    """The schema, the connections, and plans run as one transaction (``in_one_transaction``)."""

    schema_latest: int  # the version ``migrate`` brings a database to

    def migrate(self) -> int: ...
    def schema_version(self) -> int: ...
    def close(self) -> None: ...
    def in_one_transaction(self, make_plan: Callable[[], Generator[Any, Any, Any]]) -> Any: ...
    # inside in_one_transaction: the user's deduplicating writes wait for each other until it ends
    def lock_user_writes(self, user_id: str) -> None: ...


class ItemStore(Protocol):
    """Items (notes, turns, facts' searchable rows) by id and by filters, and their themes."""

    def insert_items(self, items: Sequence[NewItem], model: str | None, now: datetime) -> list[int]: ...
    # agent_id / run_id of get/update/delete_item: only a row in those scopes (None = any; ``scope_columns``)
    def get_item(self, user_id: str, item_id: int, agent_id: str | None = None, run_id: str | None = None) -> ItemRow | None: ...
    def update_item(self, user_id: str, item_id: int, changes: Mapping[str, Any], model: str | None, now: datetime, agent_id: str | None = None, run_id: str | None = None) -> ItemRow | None: ...
    def delete_item(self, user_id: str, item_id: int, agent_id: str | None = None, run_id: str | None = None) -> bool: ...
    def list_items(self, filters: Filters, limit: int, offset: int, order: str = "created") -> list[ItemRow]: ...
    def count_items(self, filters: Filters) -> int: ...
    def fetch_items(self, user_id: str | None, ids: Sequence[int]) -> list[ItemRow]: ...
    def rank_rows(self, user_id: str | None, ids: Sequence[int]) -> list[RankRow]: ...
    def list_themes(self, user_id: str, now: datetime, scope: Mapping[str, str] | None = None) -> list[ThemeRow]: ...
    # changes: display_name and/or description (None clears it); creates the theme when missing
    def set_theme(self, user_id: str, slug: str, changes: Mapping[str, Any], now: datetime) -> ThemeRow: ...


class KeyedStore(Protocol):
    """Items by namespace and key (LangGraph's store model), with their TTL."""

    def put_keyed(self, item: NewItem, model: str | None, embed: bool, now: datetime) -> tuple[ItemRow, bool]: ...
    def get_keyed(self, user_id: str, namespace: str, key: str, now: datetime) -> ItemRow | None: ...
    def delete_keyed(self, user_id: str, namespace: str, key: str) -> bool: ...
    def touch_items(self, user_id: str, ids: Sequence[int], expires_at: datetime | None, now: datetime) -> int: ...
    def refresh_ttl(self, user_id: str, ids: Sequence[int], now: datetime) -> int: ...
    def sweep_keyed(self, user_id: str | None, now: datetime) -> int: ...
    def list_namespaces(self, user_id: str, prefix: str | None, now: datetime) -> list[str]: ...


class FactStore(Protocol):
    """Facts with their history, and the items promoted to facts."""

    # a fact's identity: (user_id, agent_id, category, key); ``fact["agent_id"]`` None is the shared fact
    def upsert_fact(self, user_id: str, fact: Mapping[str, Any], item: NewItem, model: str | None, now: datetime) -> tuple[str, FactRow, str | None]: ...
    def get_fact(self, user_id: str, category: str, key: str, agent_id: str | None = None) -> FactRow | None: ...
    # agent_id / run_id below: None = any (no filter)
    def delete_facts(self, user_id: str, key: str, category: str | None, agent_id: str | None = None, run_id: str | None = None, fact_id: int | None = None) -> int: ...
    def list_facts(self, user_id: str | None, limit: int | None, offset: int, sort_by: str, descending: bool, search: str | None, category: str | None, now: datetime, include_expired: bool = False, agent_id: str | None = None, run_id: str | None = None) -> list[FactRow]: ...
    def fact_history(self, user_id: str | None, fact_ids: Sequence[int]) -> dict[int, list[FactHistoryRow]]: ...
    def promotion_candidates(self, user_id: str, model: str, now: datetime, limit: int) -> list[PromotionCandidate]: ...
    def record_promotion(self, user_id: str, fact_id: int | None, item_ids: Sequence[int], now: datetime) -> int: ...
    def promoted_facts(self, user_id: str, limit: int, now: datetime) -> list[PromotedFactRow]: ...


class SessionStore(Protocol):
    """Conversations (sessions, messages, their extraction), the summary, and the model calls made."""

    def get_summary(self, user_id: str) -> SummaryRow | None: ...
    def set_summary(self, user_id: str, content: str, now: datetime) -> SummaryRow: ...
    def summary_history(self, user_id: str, limit: int) -> list[SummaryRow]: ...
    def mark_session_extracted(self, user_id: str, session_id: str, at: datetime) -> None: ...
    def get_extracted_at(self, user_id: str, session_id: str) -> datetime | None: ...
    def open_session(self, user_id: str, session_id: str, now: datetime) -> tuple[SessionRow, bool]: ...
    def append_messages(self, user_id: str, session_id: str, messages: Sequence[Mapping[str, Any]], now: datetime, agent_id: str | None = None, run_id: str | None = None) -> tuple[SessionRow, bool]: ...
    def get_session(self, user_id: str, session_id: str, with_messages: bool = True, after_seq: int = 0) -> SessionRead | None: ...
    def list_sessions(self, user_id: str | None, state: str | None, limit: int, offset: int) -> list[SessionRow]: ...
    def stale_sessions(self, user_id: str | None, cutoff: datetime, lease_cutoff: datetime, max_attempts: int, limit: int) -> list[tuple[str, str]]: ...
    def claim_session(self, user_id: str, session_id: str, now: datetime, lease_cutoff: datetime) -> SessionRow | None: ...
    def finish_session(self, user_id: str, session_id: str, outcome: Mapping[str, Any], calls: Sequence[Mapping[str, Any]], now: datetime) -> SessionRow | None: ...
    def record_llm_calls(self, user_id: str, calls: Sequence[Mapping[str, Any]], now: datetime) -> None: ...
    def store_chunks(self, user_id: str, session_id: str, items: Sequence[NewItem], upto_seq: int, model: str | None, now: datetime) -> list[int]: ...
    def usage_stats(self, user_id: str | None, limit: int) -> UsageStats: ...
    def redact_messages(self, user_id: str, session_id: str, seqs: Sequence[int], content: str) -> int: ...
    def rewrite_summaries(self, user_id: str, contents: Mapping[int, str]) -> int: ...


class PersonStore(Protocol):
    """The users (listed, forgotten), their settings, and the persons of their household."""

    def list_users(self, limit: int | None = None, offset: int = 0) -> list[UserRow]: ...
    def forget_user(self, user_id: str) -> dict[str, int]: ...
    def user_settings(self, user_id: str) -> UserSettings: ...
    def set_user_timezone(self, user_id: str, name: str | None, now: datetime) -> None: ...
    # changes: household_name and/or locale (None clears it)
    def set_household_details(self, user_id: str, changes: Mapping[str, Any], now: datetime) -> None: ...
    def set_memory_off(self, user_id: str, since: datetime | None, now: datetime) -> None: ...
    def list_persons(self, user_id: str) -> list[PersonRow]: ...
    def insert_person(self, user_id: str, fields: Mapping[str, Any], now: datetime) -> PersonRow: ...
    def update_person(self, user_id: str, person_id: int, changes: Mapping[str, Any], now: datetime) -> PersonRow | None: ...
    def delete_person(self, user_id: str, person_id: int) -> bool: ...
    def household_mode(self, user_id: str) -> str: ...
    def set_household_mode(self, user_id: str, mode: str, primary_id: int | None, now: datetime) -> None: ...


class SearchReads(Protocol):
    """Candidate lists of (id, score), best first, and what search reads beside them; never the final order."""

    # full-text and vector candidates (``Hits.scored``), with what ``beside`` asks read in the same
    # statement where the backend can (PostgreSQL); None: the candidates alone
    def lexical_hits(self, filters: Filters, terms: Sequence[str], k: int, beside: Beside | None = None) -> Hits: ...
    def semantic_hits(self, filters: Filters, model: str, query: np.ndarray, k: int, beside: Beside | None = None) -> Hits: ...
    def semantic_scores(self, filters: Filters, model: str, query: np.ndarray, ids: Sequence[int]) -> dict[int, float]: ...
    def substring_candidates(self, filters: Filters, terms: Sequence[str], k: int) -> list[tuple[int, float]]: ...
    def neighbours(self, filters: Filters, ids: Sequence[int]) -> dict[int, list[int]]: ...
    def persons_named(self, user_id: str, names: Sequence[str]) -> list[str]: ...
    def past_statements(self, user_ids: Sequence[str]) -> list[PastStatement]: ...


class EmbeddingStore(Protocol):
    """Vectors of items per model: what waits to be embedded, the results, their indexes."""

    has_vector: bool  # False: this database stores no vectors (PostgreSQL without pgvector): lexical only
    vector_error: str | None  # why it has none, when known

    # ``moving_to`` (a move to that model in progress): only the items of users whose searches read ``model``
    def pending_embeddings(self, model: str, user_id: str | None, limit: int, after_id: int,
                           moving_to: str | None = None) -> list[tuple[int, str, str]]: ...
    def store_embeddings(self, model: str, results: Sequence[tuple[int, str, str, np.ndarray | None, str | None]],
                         now: datetime, moving_to: str | None = None) -> int: ...
    def reset_embeddings(self, user_id: str | None, now: datetime) -> int: ...
    def embedding_stats(self, model: str | None, previous: str | None = None) -> dict[str, int]: ...
    def ensure_vector_index(self, model: str, dimensions: int) -> None: ...
    # a move to another model: the model a user's vectors were moved to, users still to move, the
    # vectors of the new model waiting per item, and the switch of one user
    def serving_model(self, user_id: str) -> str | None: ...
    def users_to_move(self, model: str, after: str, limit: int) -> list[str]: ...
    def pending_next(self, model: str, user_id: str, limit: int, after_id: int) -> list[tuple[int, str, str]]: ...
    def store_next_embeddings(self, model: str, results: Sequence[tuple[int, str, str, np.ndarray]],
                              now: datetime) -> int: ...
    def cut_over(self, user_id: str, model: str, now: datetime) -> bool: ...
    def reembed_progress(self, model: str) -> dict[str, int]: ...


class Transfer(Protocol):
    """Export pages, import (``restore_records``) and the digests that check an import against the database."""

    def export_page(self, kind: str, user_id: str | None, after: Sequence[Any] | None, limit: int) -> list[dict[str, Any]]: ...
    def export_items(self, user_id: str, after_id: int, limit: int, ids: Sequence[int] | None, with_vectors: bool) -> list[dict[str, Any]]: ...
    def max_item_id(self) -> int: ...
    def item_digests(self, user_id: str, created_at: datetime, upto_id: int) -> list[tuple[int, bytes]]: ...
    def restore_records(self, records: Sequence[Mapping[str, Any]], model: str | None, now: datetime) -> list[bool | int]: ...


class Backend(Lifecycle, ItemStore, KeyedStore, FactStore, SessionStore, PersonStore, SearchReads, EmbeddingStore,
              Transfer, Protocol):
    """Everything the operations ask of a database, one method per request (``tests/test_backend_protocol.py``
    checks that both backends have each, with these parameters, and that operations ask for
    nothing else). The async backends have the same methods as coroutines. Each method is one
    transaction, except the calls a plan makes inside ``in_one_transaction``."""


@runtime_checkable
class SharesReads(Protocol):
    """A capability of some backends (PostgreSQL's pipeline mode): short reads of one ``at_once``
    sent together on one connection. ``run_shared`` takes those ``calls.BackendCall`` and gives each
    one's (value, NaviMemoryError or None), as a coroutine on an asyncio backend."""

    def can_share(self, method: str) -> bool: ...
    def run_shared(self, calls: Sequence[Any]) -> Any: ...
