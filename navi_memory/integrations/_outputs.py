"""What each memory tool returns: its JSON output as typed dicts, the functions that make it, and
its JSON schema (an MCP tool's ``outputSchema``).

The formatters build exactly these shapes (a type checker holds them to it), and pydantic derives
the schemas from the same types, so the declared output cannot drift from the real one. An
expected failure is ``{"error": ...}`` instead (``_tools.error_json``), which no schema here
describes: MCP flags it as an error result, where structured content is not required.
"""

from __future__ import annotations

import copy
from functools import lru_cache
from typing import Any, Literal, Optional, Union

from pydantic import TypeAdapter
from typing_extensions import NotRequired, TypedDict

from ..core.persons import Person
from ..models import FactChange, Item, NoteAdded, SearchResult, Theme

SNIPPET_CHARS = 300


def _when(value: Any) -> str | None:
    return value.isoformat() if value is not None else None


# The docstrings below are the schemas' descriptions (plain text: a client may show them).


class HitFact(TypedDict):
    """The fact a result stands for (null where its item's metadata lost the field)."""

    category: Optional[str]
    key: Optional[str]
    value: Optional[str]


class SearchHit(TypedDict):
    """One result: signals says which retrievers found it; fact, person and
    superseded_by (a newer fact replaced what this said) appear only when they apply."""

    id: int
    theme: str
    type: str
    content_snippet: str
    created_at: Optional[str]
    score: float
    signals: dict[str, bool]
    fact: NotRequired[HitFact]
    person: NotRequired[str]
    superseded_by: NotRequired[str]


class SearchOutput(TypedDict):
    """The results, best first; hidden: how many matches the search left out."""

    results: list[SearchHit]
    hidden: int


class NoteOutput(TypedDict):
    """The note's item: added (embedding: its vector's state; similar_ids: items with
    almost the same text, kept apart) or existing (the same text was already stored)."""

    id: int
    status: Literal["added", "existing"]
    embedding: NotRequired[Optional[str]]
    similar_ids: NotRequired[list[int]]
    note: NotRequired[str]


class FactOutput(TypedDict):
    """action: added, updated, unchanged or history (said before the current value: kept in
    the history); key: the key it is saved under (an equivalent one on file, note says so)."""

    action: str
    category: str
    key: str
    value: str
    previous_value: Optional[str]
    note: NotRequired[str]


class ItemOutput(TypedDict):
    """One memory item in full; embedding: its vector's state."""

    id: int
    type: str
    theme: str
    title: Optional[str]
    content: str
    tags: list[str]
    status: str
    pinned: bool
    person: Optional[str]
    source: Optional[str]
    created_at: Optional[str]
    updated_at: Optional[str]
    observed_at: Optional[str]
    embedding: Optional[str]


class ArchiveOutput(TypedDict):
    id: int
    status: str


class ForgetOutput(TypedDict):
    """How many facts were deleted under key."""

    deleted: int
    key: str


class ThemeRow(TypedDict):
    theme: str
    name: str
    active_count: int
    description: Optional[str]


class ThemesOutput(TypedDict):
    themes: list[ThemeRow]


class PersonRow(TypedDict):
    """A household member; role, aliases and pronouns only when known."""

    display_name: str
    role: NotRequired[str]
    aliases: NotRequired[list[str]]
    pronouns: NotRequired[str]


class PersonOutput(TypedDict):
    """The person, or null when the reference is unknown or ambiguous."""

    person: Optional[PersonRow]


ToolOutput = Union[SearchOutput, NoteOutput, FactOutput, ItemOutput, ArchiveOutput, ForgetOutput, ThemesOutput,
                   PersonOutput]

# the output of every tool (multi-person households' included)
OUTPUTS: dict[str, type[Any]] = {
    "memory_search": SearchOutput, "memory_add_note": NoteOutput, "memory_save_fact": FactOutput,
    "memory_get": ItemOutput, "memory_archive": ArchiveOutput, "memory_forget": ForgetOutput,
    "memory_list_themes": ThemesOutput, "memory_find_person": PersonOutput,
}


@lru_cache(maxsize=None)
def _schema(name: str) -> dict[str, Any]:
    return TypeAdapter(OUTPUTS[name]).json_schema()


def output_schema(name: str) -> dict[str, Any]:
    """The JSON schema of a tool's output (pydantic's, from the type above); a fresh copy."""
    return copy.deepcopy(_schema(name))


def search_json(results: list[SearchResult], hidden: int) -> SearchOutput:
    return {"results": [result_json(r) for r in results], "hidden": hidden}


def result_json(r: SearchResult) -> SearchHit:
    out: SearchHit = {"id": r.id, "theme": r.theme, "type": r.type, "content_snippet": r.snippet[:SNIPPET_CHARS],
                      "created_at": _when(r.created_at), "score": round(r.score, 4), "signals": dict(r.signals)}
    if r.fact:
        out["fact"] = {"category": r.fact.get("category"), "key": r.fact.get("key"), "value": r.fact.get("value")}
    if r.person:
        out["person"] = r.person
    if r.superseded_by:  # what this said is past: a newer fact replaced it
        out["superseded_by"] = r.superseded_by
    return out


def note_json(added: NoteAdded) -> NoteOutput:
    if added.action == "existing":
        return {"id": added.item.id, "status": "existing",
                "note": "this text was already stored: the existing item is kept, nothing was added"}
    embedding = added.item.embedding  # pending/error: found by its words until a vector is made
    out: NoteOutput = {"id": added.item.id, "status": "added", "embedding": embedding.state if embedding else None}
    if added.similar:
        out["similar_ids"] = list(added.similar)
        out["note"] = "stored as a new item; items with almost the same text are kept apart (similar_ids)"
    return out


def fact_change_json(change: FactChange) -> FactOutput:
    out: FactOutput = {"action": change.action, "category": change.fact.category, "key": change.fact.key,
                       "value": change.fact.value, "previous_value": change.previous_value}
    if change.requested_key is not None:
        out["note"] = (f"saved under the equivalent key {change.fact.key!r} already on file, not as a second fact "
                       f"{change.requested_key!r}")
    if change.action == "history":
        out["note"] = "said before the current value: kept in the history, the value stays"
    return out


def item_json(it: Item) -> ItemOutput:
    return {"id": it.id, "type": it.type, "theme": it.theme, "title": it.title, "content": it.content,
            "tags": list(it.tags), "status": it.status, "pinned": it.pinned, "person": it.person, "source": it.source,
            "created_at": _when(it.created_at), "updated_at": _when(it.updated_at),
            "observed_at": _when(it.observed_at), "embedding": it.embedding.state if it.embedding else None}


def archive_json(it: Item) -> ArchiveOutput:
    return {"id": it.id, "status": it.status}


def forget_json(deleted: int, key: str) -> ForgetOutput:
    return {"deleted": deleted, "key": key}


def themes_json(themes: list[Theme]) -> ThemesOutput:
    return {"themes": [{"theme": t.slug, "name": t.display_name, "active_count": t.active_count,
                        "description": t.description} for t in themes]}


def person_json(p: Person | None) -> PersonOutput:
    if p is None:
        return {"person": None}
    row: PersonRow = {"display_name": p.display_name}
    if p.role:
        row["role"] = p.role
    if p.aliases:
        row["aliases"] = list(p.aliases)
    if p.pronouns:
        row["pronouns"] = p.pronouns
    return {"person": row}
