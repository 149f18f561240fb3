"""Plain data returned by the store: items, facts, themes, summaries, search results, sessions.

Every model reads both as an object (``r.content``) and as a mapping (``r["content"]``), and
``to_dict()`` gives JSON-ready values (datetimes as ISO 8601 strings).
"""

from __future__ import annotations

import dataclasses
import operator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, Sequence, TypedDict, TypeVar

if TYPE_CHECKING:
    import numpy as np

ITEM_TYPES = ("preference", "fact", "instruction", "summary", "note", "other")
ITEM_STATUSES = ("active", "archived")
SEARCH_STATUSES = ("active", "archived", "any")
FACT_CATEGORIES = ("profile", "preferences", "technical", "projects", "other")
FACT_SOURCES = ("conversation", "tool_call", "auto_discovery", "user_explicit")
EMBEDDING_STATES = ("pending", "ready", "error")
FACT_SORT_FIELDS = ("category", "key", "updated_at", "created_at", "confidence")
FUSIONS = ("weighted", "rrf")
MESSAGE_ROLES = ("system", "user", "assistant", "tool")
SESSION_STATES = ("open", "running", "extracted", "error")
LLM_PURPOSES = ("extract", "repair", "dedup", "summary")
HOUSEHOLD_MODES = ("single", "multi")


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


def _jsonable(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return value


class _Record:
    """Mapping-style read access for the dataclasses below."""

    def __getitem__(self, name: str) -> Any:
        if name not in self._field_names():
            raise KeyError(name)
        return getattr(self, name)

    def __contains__(self, name: object) -> bool:
        return name in self._field_names()

    def __iter__(self) -> Iterator[str]:
        return iter(self._field_names())

    def __len__(self) -> int:
        return len(self._field_names())

    def get(self, name: str, default: Any = None) -> Any:
        return getattr(self, name, default) if name in self._field_names() else default

    def keys(self) -> list[str]:
        return list(self._field_names())

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = _jsonable(self)
        return out

    def _repr_html_(self) -> str:
        """An escaped one-row HTML table (Jupyter); the list types below render many rows."""
        from .htmlrepr import table

        return table([self], _html_columns(type(self)))

    @classmethod
    def _field_names(cls) -> tuple[str, ...]:
        names = cls.__dict__.get("_names")
        if names is None:
            names = tuple(f.name for f in dataclasses.fields(cls))  # type: ignore[arg-type]
            cls._names = names  # type: ignore[attr-defined]
        return names


@dataclass
class EmbeddingInfo(_Record):
    """The embedding of an item: state ``ready``, ``pending`` (not embedded yet), ``error`` (the
    provider failed: ``error`` says why; backfill retries) or ``skipped`` (stored with
    ``embed=False``: never embedded, found by full-text search and filters only)."""

    state: str
    model: str | None = None
    dimensions: int | None = None
    error: str | None = None
    updated_at: datetime | None = None


@dataclass
class Item(_Record):
    id: int
    user_id: str
    type: str
    content: str
    theme: str
    title: str | None = None
    tags: list[str] = field(default_factory=list)
    status: str = "active"
    pinned: bool = False
    source: str | None = None
    source_ref: dict[str, Any] | None = None
    person: str | None = None
    confidence: int | None = None
    observed_at: datetime | None = None
    expires_at: datetime | None = None
    created_at: datetime | None = None
    updated_at: datetime | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    fact_id: int | None = None
    embedding: EmbeddingInfo | None = None
    context: str | None = None
    agent_id: str | None = None  # the agent that wrote it (None: shared by every agent)
    run_id: str | None = None  # the run (conversation, job) it belongs to
    namespace: tuple[str, ...] | None = None  # keyed items (put_keyed): the namespace's labels
    key: str | None = None  # keyed items: the key within the namespace
    ttl_minutes: float | None = None  # keyed items: the TTL a read may refresh (expires_at = now + ttl)


Tags = str | list[str] | tuple[str, ...] | set[str] | frozenset[str]  # a bare string is one tag


class _ItemEdits(TypedDict, total=False):
    # the fields ``add`` and ``update`` share; the run time checks every value (ValidationError)
    type: str  # one of ITEM_TYPES
    theme: str | None
    title: str | None
    tags: Tags | None
    status: str  # one of ITEM_STATUSES
    pinned: bool
    person: str | None
    confidence: int | None  # 0 to 100
    observed_at: datetime | str | None  # a datetime (naive = UTC) or ISO 8601 text
    expires_at: datetime | str | None
    metadata: dict[str, Any] | None
    source: str | None
    source_ref: dict[str, Any] | None
    context: str | None


class ItemFields(_ItemEdits, total=False):
    """The optional keywords of ``add`` / ``add_note`` (``**fields``): a misspelt one is a type
    error, and a ``ValidationError`` for a caller no checker reads."""

    expires_days: float | None  # instead of expires_at: now plus this many days
    embedding: Sequence[float] | np.ndarray | None  # a precomputed vector of the store's model
    agent_id: str | None
    run_id: str | None


class ItemChanges(_ItemEdits, total=False):
    """The fields ``update`` changes (``**changes``); those not given keep their value."""

    content: str


@dataclass
class FactVersion(_Record):
    """A value a fact used to have, valid in [valid_from, valid_to): from when it was said to
    when the next value was said."""

    value: str
    source: str
    confidence: int
    source_context: str | None
    valid_from: datetime
    valid_to: datetime
    source_session_id: str | None = None
    source_message_id: str | None = None


@dataclass
class Fact(_Record):
    id: int
    user_id: str
    category: str
    key: str
    value: str
    source: str = "conversation"
    confidence: int = 70
    source_context: str | None = None
    source_session_id: str | None = None
    source_message_id: str | None = None
    person: str | None = None
    expires_at: datetime | None = None
    last_verified_at: datetime | None = None
    created_at: datetime | None = None
    updated_at: datetime | None = None
    item_id: int | None = None
    history: list[FactVersion] = field(default_factory=list)
    agent_id: str | None = None  # None: a fact shared by every agent of the user
    run_id: str | None = None
    observed_at: datetime | None = None  # when the current value was said (its statement's time)


@dataclass
class FactChange(_Record):
    """Outcome of ``upsert_fact``: action is ``added``, ``updated``, ``unchanged`` or ``history``
    (the value was said before the current one: recorded in the history, the current value kept).
    ``requested_key``: the key the caller gave, when the value went to an equivalent fact on file
    under another key (``fact.key``); None otherwise. ``reason``: why the value went where it
    did (e.g. "home_city is location", "judged the same as employer"); None for a plain write."""

    action: str
    fact: Fact
    previous_value: str | None = None
    requested_key: str | None = None
    reason: str | None = None


@dataclass
class NoteAdded(_Record):
    """Outcome of ``add_note``: action ``added`` (a new item) or ``existing`` (the same text was
    already stored for the user: that item, unchanged, and nothing new). ``similar``: ids of the
    user's items a typo apart from the text (stored apart, only reported)."""

    action: str
    item: Item
    similar: tuple[int, ...] = ()


@dataclass
class Theme(_Record):
    slug: str
    display_name: str
    description: str | None = None
    active_count: int = 0
    created_at: datetime | None = None


@dataclass
class Summary(_Record):
    content: str
    version: int
    created_at: datetime


@dataclass
class SearchResult(_Record):
    id: int
    content: str
    snippet: str
    theme: str
    type: str
    created_at: datetime
    score: float
    signals: dict[str, bool]
    scores: dict[str, float]
    kind: str = "item"
    title: str | None = None
    status: str = "active"
    pinned: bool = False
    person: str | None = None
    tags: list[str] = field(default_factory=list)
    observed_at: datetime | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    fact: dict[str, Any] | None = None
    updated_at: datetime | None = None
    expires_at: datetime | None = None
    agent_id: str | None = None
    run_id: str | None = None
    namespace: tuple[str, ...] | None = None  # keyed items (put_keyed)
    key: str | None = None
    user_id: str | None = None  # whose memory it is (tells results apart in an ``all_users`` search)
    # a conversation turn that said a value a newer fact replaced: that fact now (``key: value``);
    # prompt blocks show the turn as past (``retrieval.superseded``)
    superseded_by: str | None = None

    @property
    def content_snippet(self) -> str:
        """The snippet under the name the memory_search tool results use (``content_snippet``)."""
        return self.snippet


def _html_columns(kind: type) -> list[tuple[str, Callable[[Any], Any]]]:
    from . import htmlrepr

    columns = {SearchResult: htmlrepr.SEARCH_COLUMNS, Fact: htmlrepr.FACT_COLUMNS, Summary: htmlrepr.SUMMARY_COLUMNS,
               Item: htmlrepr.ITEM_COLUMNS}.get(kind)
    if columns:
        return columns
    return [(f, operator.attrgetter(f)) for f in kind._field_names()]  # type: ignore[attr-defined]


R = TypeVar("R", bound=_Record)


class _Records(list[R]):
    """A plain list of models (of ``R``: iterating a ``SearchResults`` gives ``SearchResult``s) that
    renders as an escaped HTML table in Jupyter."""

    _kind: type[R]

    def _repr_html_(self) -> str:
        from .htmlrepr import table

        return table(self, _html_columns(self._kind), caption=f"{len(self)} {self._kind.__name__.lower()}(s)")


class SearchResults(_Records[SearchResult]):
    """What ``search`` returns: a list of ``SearchResult``, best first. ``hidden``: how many of the
    best candidates (as many as the page holds) the relevance floor (``min_score``) left out."""

    _kind = SearchResult

    def __init__(self, results: Iterable[SearchResult] = (), hidden: int = 0) -> None:
        super().__init__(results)
        self.hidden = hidden


class FactList(_Records[Fact]):
    """What ``get_all_facts`` returns: a list of ``Fact``."""

    _kind = Fact


class SummaryHistory(_Records[Summary]):
    """What ``summary_history`` returns: a list of ``Summary``, newest first."""

    _kind = Summary


class SummaryText(str):
    """What ``get_summary`` returns (when there is one): the text, shown as a table in Jupyter."""

    def _repr_html_(self) -> str:
        from .htmlrepr import table

        return table([self], [("summary", str)])


@dataclass
class BackfillReport(_Record):
    embedded: int = 0
    failed: int = 0
    remaining: int = 0


@dataclass
class TextVectors(_Record):
    """What ``embed_texts`` returns: one vector per text, in order, and the model that made them
    (the one the user's searches read: vectors of two models are never compared)."""

    model: str
    vectors: list[list[float]]


@dataclass
class ReembedReport(_Record):
    """What ``reembed`` did: users moved to ``model`` this run, vectors made, and what remains
    (``complete``: every user's searches read ``model``; the previous embeddings can go)."""

    model: str
    previous_model: str
    users_moved: int = 0
    users_remaining: int = 0
    embedded: int = 0
    failed: int = 0
    paused_seconds: float = 0.0
    complete: bool = False


@dataclass
class ToolCall(_Record):
    """A tool the assistant asked to run; ``arguments`` is JSON text."""

    name: str
    arguments: str = ""
    id: str | None = None


@dataclass
class Message(_Record):
    """One conversation message: role ``system``, ``user``, ``assistant`` or ``tool``."""

    role: str
    content: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    tool_call_id: str | None = None
    name: str | None = None
    seq: int | None = None
    created_at: datetime | None = None


@dataclass
class Session(_Record):
    """A conversation and where the memory pipeline stands with it.

    ``state``: ``open`` (not processed yet), ``running``, ``extracted``, ``error`` (``error``
    holds the message; the session is retried on the next run)."""

    user_id: str
    session_id: str
    state: str = "open"
    created_at: datetime | None = None
    last_active: datetime | None = None
    extracted_at: datetime | None = None
    message_count: int = 0
    user_messages: int = 0
    error: str | None = None
    attempts: int = 0
    messages: list[Message] = field(default_factory=list)


@dataclass
class ExtractionReport(_Record):
    """What one pipeline run did for a session.

    ``state``: ``extracted``, ``error`` (recorded on the session, retried later), ``skipped``
    (``reason`` says why: no user id, already running elsewhere). ``changes`` are the fact
    outcomes (added / updated / unchanged); ``llm_calls`` and the token counts are this run's cost."""

    session_id: str
    user_id: str | None
    state: str
    reason: str | None = None
    error: str | None = None
    changes: list[FactChange] = field(default_factory=list)
    notes: int = 0
    chunks: int = 0
    used_llm: bool = False
    prefiltered: bool = False
    llm_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    summary_updated: bool = False

    def _count(self, action: str) -> int:
        return sum(1 for c in self.changes if c.action == action)

    @property
    def added(self) -> int:
        return self._count("added")

    @property
    def updated(self) -> int:
        return self._count("updated")

    @property
    def unchanged(self) -> int:
        return self._count("unchanged")

    def to_dict(self) -> dict[str, Any]:
        return {**super().to_dict(), "added": self.added, "updated": self.updated, "unchanged": self.unchanged}


@dataclass
class AddResult(_Record):
    """Outcome of ``add_messages``: what was stored and which triggers fired.

    ``scheduled``: an extraction was queued in the background; ``report``: the extraction's
    result when it ran inline (``background=False``)."""

    session_id: str
    user_id: str | None
    added: int = 0
    created: bool = False
    triggers: list[str] = field(default_factory=list)
    scheduled: bool = False
    skipped: str | None = None
    report: ExtractionReport | None = None
