"""The export file format (JSON Lines), as pure functions: the header, one checker per record type,
and the natural keys that make a re-import add nothing. No I/O here (docs/export-format.md).

A file is a header line then one record per line, each with a ``type``. A new record type is a
new entry in ``CHECKS`` (and a restore method on each backend); the format version only changes
when an existing record changes incompatibly.
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime
from typing import Any, Callable, Mapping

import numpy as np

from .core import validation as v
from .errors import ValidationError
from .models import (EMBEDDING_STATES, FACT_CATEGORIES, FACT_SOURCES, HOUSEHOLD_MODES, ITEM_STATUSES, ITEM_TYPES,
                     LLM_PURPOSES, MESSAGE_ROLES, SESSION_STATES)
from .core.persons import PERSON_FIELDS, clean_person_fields

FORMAT = "navi-memory-export"
VERSION = 1
RECORD_TYPES = ("user", "person", "theme", "item", "fact", "promotion", "summary", "session", "message", "llm_call")
MAX_TEXT = 16 * 1024 * 1024  # a record field; the store's own content limit applies on top
MAX_LINE = 64 * 1024 * 1024


def header(embedding_model: str | None, exported_at: datetime, with_vectors: bool,
           users: list[str] | None) -> dict[str, Any]:
    return {"format": FORMAT, "version": VERSION, "embedding_model": embedding_model,
            "exported_at": exported_at.isoformat(), "with_vectors": with_vectors,
            "record_types": list(RECORD_TYPES), "users": users}


def dumps(record: Mapping[str, Any]) -> str:
    """One line of the file (no newline): compact, UTF-8, datetimes as ISO 8601."""
    return json.dumps(record, ensure_ascii=False, separators=(",", ":"), allow_nan=False, default=_default)


def _default(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, np.ndarray):
        return [float(x) for x in value]
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def loads(line: str) -> dict[str, Any]:
    if len(line) > MAX_LINE:
        raise ValidationError(f"line longer than {MAX_LINE} characters")
    value = v.parse_json(line, "the line")
    if not isinstance(value, dict):
        raise ValidationError("a record must be a JSON object")
    return value


def check_header(value: Mapping[str, Any], skip_unknown: bool = False) -> dict[str, Any]:
    if value.get("format") != FORMAT:
        raise ValidationError(f"not a navi-memory export (the first line must be a header with format {FORMAT!r})")
    version = value.get("version")
    if isinstance(version, bool) or not isinstance(version, int) or not 1 <= version <= VERSION:
        raise ValidationError(f"unsupported export version {version!r}: this navi-memory reads version 1 to {VERSION}")
    types = value.get("record_types", list(RECORD_TYPES))
    if not isinstance(types, list) or not all(isinstance(t, str) for t in types):
        raise ValidationError("header record_types must be a list of strings")
    unknown = sorted(set(types) - set(RECORD_TYPES))
    if unknown and not skip_unknown:
        raise ValidationError(f"the file has record types this version cannot import: {', '.join(unknown)}"
                              " (upgrade navi-memory, or skip them with --skip-unknown)")
    model = value.get("embedding_model")
    users = value.get("users")
    if users is not None and (not isinstance(users, list) or not all(isinstance(u, str) for u in users)):
        raise ValidationError("header users must be a list of user ids")
    return {"version": version, "embedding_model": model if isinstance(model, str) else None,
            "with_vectors": value.get("with_vectors") is True,
            "users": None if users is None else {v.user_id(u) for u in users}}


def contents(record: Mapping[str, Any]) -> list[str]:
    """The texts of a checked record that the store's content limit applies to."""
    texts = [record.get(name) for name in ("content", "value")]
    if isinstance(record.get("item"), dict):
        texts.append(record["item"].get("content"))
    texts += [entry["value"] for entry in record.get("history") or ()]
    return [text for text in texts if isinstance(text, str)]


# -- field checks ------------------------------------------------------------------------------

def _field(record: Mapping[str, Any], name: str, check: Callable[[Any, str], Any], required: bool = False) -> Any:
    if name not in record or record[name] is None:
        if required:
            raise ValidationError(f"{name} is required")
        return None
    return check(record[name], name)


def _text(value: Any, name: str) -> str:
    return v.text(value, name, MAX_TEXT, allow_empty=True)


def _raw_text(value: Any, name: str) -> str:
    """Text kept exactly as stored (content is not stripped twice on a round trip)."""
    if not isinstance(value, str):
        raise ValidationError(f"{name} must be a string, got {type(value).__name__}")
    v.text(value, name, MAX_TEXT, allow_empty=True)
    return value


def _key(value: Any, name: str) -> str:
    return v.text(value, name, v.MAX_KEY)


INT32 = 2**31 - 1  # PostgreSQL integer columns (counts, versions, sequence numbers, token counts)
INT64 = 2**63 - 1  # ids (bigint)


def _int(value: Any, name: str, maximum: int = INT32) -> int:
    """An integer the database columns can hold: the same file is accepted or refused alike on
    SQLite (64-bit) and PostgreSQL (32-bit ``integer``)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValidationError(f"{name} must be an integer, got {value!r}")
    if not -maximum - 1 <= value <= maximum:
        raise ValidationError(f"{name} {value} is out of range (at most {maximum})")
    return value


def _id(value: Any, name: str) -> int:
    number = _int(value, name, INT64)
    if number < 1:
        raise ValidationError(f"{name} must be a positive id")
    return number


def _confidence(value: Any, name: str) -> int:
    result = v.confidence(value)
    if result is None:
        raise ValidationError(f"{name} is required")
    return result


def _count(value: Any, name: str) -> int:
    number = _int(value, name)
    if number < 0:
        raise ValidationError(f"{name} must not be negative")
    return number


def _bool(value: Any, name: str) -> bool:
    return v.flag(value, name)


def _time(value: Any, name: str) -> datetime:
    if not isinstance(value, str):
        raise ValidationError(f"{name} must be an ISO 8601 string, got {type(value).__name__}")
    result = v.when(value, name)
    assert result is not None
    return result


def _enum(allowed: tuple[str, ...]) -> Callable[[Any, str], str]:
    return lambda value, name: v.choice(value, name, allowed)


def _json_map(value: Any, name: str) -> dict[str, Any]:
    return v.nested_mapping(value, name, MAX_TEXT) or {}


def _json_list(value: Any, name: str) -> list[Any]:
    if not isinstance(value, list):
        raise ValidationError(f"{name} must be a list")
    return value


def _common(record: Mapping[str, Any]) -> dict[str, Any]:
    return {"type": record["type"], "user_id": v.user_id(record.get("user_id"))}


def _times(record: Mapping[str, Any], out: dict[str, Any], required: tuple[str, ...], optional: tuple[str, ...] = ()) -> None:
    for name in required:
        out[name] = _field(record, name, _time, required=True)
    for name in optional:
        out[name] = _field(record, name, _time)


# -- one checker per record type -----------------------------------------------------------------

def check_user(record: Mapping[str, Any]) -> dict[str, Any]:
    out = _common(record)
    _times(record, out, ("created_at",), ("memory_off_since",))  # absent: memory on
    # absent in files written before households existed: those users were all single
    out["household_mode"] = _field(record, "household_mode", _enum(HOUSEHOLD_MODES)) or "single"
    out["timezone"] = _field(record, "timezone", v.timezone_name)  # absent or null: the store's setting
    # absent in files written before schema version 14: none recorded
    out["household_name"] = _field(record, "household_name", _key)
    out["locale"] = _field(record, "locale", lambda value, name: v.locale_tag(value, name))
    return out


def check_person(record: Mapping[str, Any]) -> dict[str, Any]:
    out = _common(record)
    given = {name: record[name] for name in PERSON_FIELDS if record.get(name) is not None}
    out.update({"pronouns": None, "role": None, "aliases": [], "birth_date": None, "notes": None, "devices": []})
    out.update(clean_person_fields(given, False, MAX_TEXT))
    _times(record, out, ("created_at", "updated_at"))
    return out


def check_theme(record: Mapping[str, Any]) -> dict[str, Any]:
    out = _common(record)
    out["slug"] = v.slug(record.get("slug"), "slug")
    out["display_name"] = _field(record, "display_name", _key, required=True)
    out["description"] = _field(record, "description", _text)
    _times(record, out, ("created_at", "updated_at"))
    return out


def _embedding(value: Any, name: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ValidationError(f"{name} must be an object")
    out = {"model": _field(value, "model", _key, required=True),
           "state": _field(value, "state", _enum(EMBEDDING_STATES), required=True),
           "dimensions": _field(value, "dimensions", _count), "error": _field(value, "error", _text),
           "vector": None}
    vector = value.get("vector")
    if vector is not None:
        if not isinstance(vector, list) or not vector or not all(
                isinstance(x, (int, float)) and not isinstance(x, bool) for x in vector):
            raise ValidationError(f"{name}.vector must be a non-empty list of numbers")
        array = np.asarray(vector, dtype=np.float32)
        if not np.all(np.isfinite(array)):
            raise ValidationError(f"{name}.vector has a non-finite number")
        if out["dimensions"] is not None and out["dimensions"] != array.size:
            raise ValidationError(f"{name}.vector has {array.size} numbers, its dimensions say {out['dimensions']}")
        out["vector"] = array
    return out


def _item_fields(record: Mapping[str, Any], out: dict[str, Any]) -> dict[str, Any]:
    out["source_id"] = _field(record, "id", _id)
    out["item_type"] = _field(record, "item_type", _enum(ITEM_TYPES), required=True)
    out["content"] = _field(record, "content", _raw_text, required=True)
    if not out["content"].strip():
        raise ValidationError("content is empty")
    out["theme"] = v.slug(record.get("theme") or "general")
    out["title"] = _field(record, "title", _text)
    out["context"] = _field(record, "context", _text)
    out["tags"] = list(v.tags(record.get("tags")))
    out["status"] = _field(record, "status", _enum(ITEM_STATUSES)) or "active"
    out["pinned"] = _field(record, "pinned", _bool) or False
    out["source"] = _field(record, "source", _key)
    out["source_ref"] = _field(record, "source_ref", _json_map)
    out["person"] = _field(record, "person", _key)
    out["confidence"] = v.confidence(record.get("confidence"))
    out["metadata"] = _field(record, "metadata", _json_map) or {}
    _times(record, out, ("created_at", "updated_at"), ("observed_at", "expires_at"))
    out["embedding"] = _field(record, "embedding", _embedding)
    _scopes(record, out)
    out["namespace"] = _field(record, "namespace", _namespace)
    out["key"] = _field(record, "key", _key)
    if (out["namespace"] is None) != (out["key"] is None):
        raise ValidationError("namespace and key go together: both or neither")
    out["ttl_minutes"] = _field(record, "ttl_minutes", _ttl)  # keyed items put with a TTL (absent before: None)
    return out


def _ttl(value: Any, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < float("inf"):
        raise ValidationError(f"{name} must be a number of minutes above 0")
    return float(value)


def _scopes(record: Mapping[str, Any], out: dict[str, Any]) -> None:
    """agent_id and run_id (absent in files written before scopes: None)."""
    for name in ("agent_id", "run_id"):
        out[name] = _field(record, name, lambda value, field: v.scope_id(value, field))


def _namespace(value: Any, name: str) -> str:
    """A keyed item's namespace as stored: the labels joined by '.'."""
    return ".".join(v.namespace(value.split(".") if isinstance(value, str) else value, name))


def check_item(record: Mapping[str, Any]) -> dict[str, Any]:
    return _item_fields(record, _common(record))


def _history(value: Any, name: str) -> list[dict[str, Any]]:
    out = []
    for index, entry in enumerate(_json_list(value, name)):
        if not isinstance(entry, dict):
            raise ValidationError(f"{name}[{index}] must be an object")
        out.append({"value": _field(entry, "value", _raw_text, required=True),
                    "source": _field(entry, "source", _key, required=True),
                    "confidence": _field(entry, "confidence", _confidence, required=True),
                    "source_context": _field(entry, "source_context", _text),
                    "valid_from": _field(entry, "valid_from", _time, required=True),
                    "valid_to": _field(entry, "valid_to", _time, required=True),
                    "source_session_id": _field(entry, "source_session_id", _key),
                    "source_message_id": _field(entry, "source_message_id", _key)})
    return out


def check_fact(record: Mapping[str, Any]) -> dict[str, Any]:
    out = _common(record)
    out["category"] = _field(record, "category", _enum(FACT_CATEGORIES), required=True)
    out["key"] = _field(record, "key", _key, required=True)
    out["value"] = _field(record, "value", _raw_text, required=True)
    if not out["value"].strip():
        raise ValidationError("value is empty")
    out["source"] = _field(record, "source", _enum(FACT_SOURCES), required=True)
    out["confidence"] = v.confidence(record.get("confidence"))
    if out["confidence"] is None:
        raise ValidationError("confidence is required")
    for name in ("source_context",):
        out[name] = _field(record, name, _text)
    for name in ("source_session_id", "source_message_id", "person"):
        out[name] = _field(record, name, _key)
    _times(record, out, ("created_at", "updated_at"), ("expires_at", "last_verified_at", "observed_at"))
    out["observed_at"] = out["observed_at"] or out["updated_at"]  # absent in older files: when it was written
    out["history"] = _field(record, "history", _history) or []
    _scopes(record, out)
    # absent: derive the searchable item as upsert_fact would; null: the fact has none; object: as stored
    if "item" not in record:
        out["item"] = "derive"
    elif record["item"] is None:
        out["item"] = None
    elif isinstance(record["item"], dict):
        out["item"] = _item_fields(record["item"], {"user_id": out["user_id"]})
    else:
        raise ValidationError("item must be an object or null")
    return out


def _fact_ref(value: Any, name: str) -> dict[str, str]:
    if not isinstance(value, dict):
        raise ValidationError(f"{name} must be an object with category and key, or null")
    out = {"category": _field(value, "category", _enum(FACT_CATEGORIES), required=True),
           "key": _field(value, "key", _key, required=True)}
    agent = _field(value, "agent_id", lambda x, field: v.scope_id(x, field))
    if agent is not None:  # absent: the shared fact
        out["agent_id"] = agent
    return out


def check_promotion(record: Mapping[str, Any]) -> dict[str, Any]:
    """An item the promotion job turned into a fact: ``item`` is the item record's exported id,
    ``fact`` the fact's natural key (null: that fact was deleted since, the item stays promoted)."""
    out = _common(record)
    out["item"] = _field(record, "item", _id, required=True)
    out["fact"] = _field(record, "fact", _fact_ref)
    _times(record, out, ("promoted_at",))
    return out


def check_summary(record: Mapping[str, Any]) -> dict[str, Any]:
    out = _common(record)
    out["version"] = _field(record, "version", _count)
    out["content"] = _field(record, "content", _raw_text, required=True)
    _times(record, out, ("created_at",))
    return out


def check_session(record: Mapping[str, Any]) -> dict[str, Any]:
    out = _common(record)
    out["session_id"] = _field(record, "session_id", _key, required=True)
    out["state"] = _field(record, "state", _enum(SESSION_STATES)) or "open"
    out["error"] = _field(record, "error", _text)
    for name in ("attempts", "message_count", "user_messages", "extracted_seq", "extracted_user_messages",
                 "chunked_seq"):
        out[name] = _field(record, name, _count) or 0
    _times(record, out, ("updated_at",), ("created_at", "last_active", "extracted_at", "claimed_at"))
    _scopes(record, out)
    return out


def check_message(record: Mapping[str, Any]) -> dict[str, Any]:
    out = _common(record)
    out["session_id"] = _field(record, "session_id", _key, required=True)
    out["seq"] = _field(record, "seq", _count, required=True)
    out["role"] = _field(record, "role", _enum(MESSAGE_ROLES), required=True)
    out["content"] = _field(record, "content", _raw_text) or ""
    out["name"] = _field(record, "name", _key)
    out["tool_calls"] = _field(record, "tool_calls", _json_list) or []
    out["tool_call_id"] = _field(record, "tool_call_id", _key)
    _times(record, out, ("created_at",))
    return out


def check_llm_call(record: Mapping[str, Any]) -> dict[str, Any]:
    out = _common(record)
    out["session_id"] = _field(record, "session_id", _key)
    out["purpose"] = _field(record, "purpose", _enum(LLM_PURPOSES), required=True)
    out["model"] = _field(record, "model", _key)
    out["input_tokens"] = _field(record, "input_tokens", _count) or 0
    out["output_tokens"] = _field(record, "output_tokens", _count) or 0
    out["estimated"] = _field(record, "estimated", _bool) or False
    out["ok"] = _field(record, "ok", _bool, required=True)
    out["error"] = _field(record, "error", _text)
    _times(record, out, ("created_at",))
    return out


CHECKS: dict[str, Callable[[Mapping[str, Any]], dict[str, Any]]] = {
    "user": check_user, "person": check_person, "theme": check_theme, "item": check_item, "fact": check_fact,
    "promotion": check_promotion, "summary": check_summary,
    "session": check_session, "message": check_message, "llm_call": check_llm_call,
}


def check_record(record: Mapping[str, Any], user_map: Mapping[str, str] | None = None) -> dict[str, Any] | None:
    """The record validated and normalised (datetimes, numpy vectors), its user mapped; None for
    a record type this version does not know (the caller decides whether that is an error)."""
    kind = record.get("type")
    if not isinstance(kind, str):
        raise ValidationError("a record needs a string field 'type'")
    check = CHECKS.get(kind)
    if check is None:
        return None
    out = check(record)
    if user_map:
        out["user_id"] = user_map.get(out["user_id"], out["user_id"])
        if isinstance(out.get("item"), dict):  # a fact's own item belongs to the same user
            out["item"]["user_id"] = out["user_id"]
    return out


def item_digest(item_type: str, content: str) -> bytes:
    """What tells items of one user and one creation time apart (there is no other natural key)."""
    return hashlib.blake2b(f"{item_type}\x1f{content}".encode("utf-8"), digest_size=16).digest()


def occurrence_key(record: Mapping[str, Any]) -> bytes | None:
    """Items and LLM call records have no natural key: identical rows (same user, time and text)
    are told apart by how many the file has so far; see ``docs/export-format.md``."""
    parts: tuple[str, ...]
    if record["type"] == "item":
        parts = (record["user_id"], record["created_at"].isoformat(), record["item_type"], record["content"])
    elif record["type"] == "llm_call":
        parts = (record["user_id"], record["session_id"] or "", record["purpose"], record["model"] or "",
                 record["created_at"].isoformat(), str(record["input_tokens"]), str(record["output_tokens"]))
    else:
        return None
    return hashlib.blake2b("\x1f".join(parts).encode("utf-8"), digest_size=16).digest()


def parse_user_map(pairs: list[str] | None) -> dict[str, str]:
    """``["old=new", ...]`` to a dict. Both ids are taken exactly as given (``validation.user_id``):
    ``"alice =bob"`` is refused, never trimmed into a mapping of ``alice``."""
    out: dict[str, str] = {}
    for pair in pairs or []:
        old, sep, new = pair.partition("=")
        if not sep or not old.strip() or not new.strip():
            raise ValidationError(f"--user-map takes OLD=NEW, got {pair!r}")
        try:
            out[v.user_id(old)] = v.user_id(new)
        except ValidationError as exc:
            raise ValidationError(f"--user-map {pair!r}: {exc}") from exc
    return out


# Tables read page by page on export: kind -> (table, keyset columns). Both backends use it.
EXPORT_TABLES: dict[str, tuple[str, tuple[str, ...]]] = {
    "users": ("users", ("id",)),
    "themes": ("themes", ("slug",)),
    "facts": ("facts", ("id",)),
    "persons": ("persons", ("id",)),
    "promotions": ("promotions", ("item_id",)),
    "summaries": ("summaries", ("version",)),
    "sessions": ("session_state", ("session_id",)),
    "messages": ("messages", ("session_id", "seq")),
    "llm_calls": ("llm_calls", ("id",)),
}
