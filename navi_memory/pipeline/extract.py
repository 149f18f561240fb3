"""Facts and notes from the chat model's reply: tolerant JSON parsing, validation, one repair.

The pure half (``parse_reply``, ``interpret``, ``normalize_fact``) turns whatever came back into
checked ``ExtractedFact`` rows: JSON found inside prose or code fences, an unknown category mapped
to ``other``, the source mapped to a confidence (tool results 95, explicit statements 90, else 70).
``extract`` is the sans-I/O step: one call with structured output where the model has it; if the
reply is unusable, ``json-repair`` mends it locally when it can (trailing commas, a cut-off end,
single quotes: no second LLM call), else exactly one repair request; if that fails too,
``ExtractionError``.
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Mapping, Sequence

from ..core.validation import unstorable
from ..errors import ExtractionError
from ..models import FACT_CATEGORIES, FACT_SOURCES
from ..core.contract import DEFAULT_CONFIDENCE, SOURCE_CONFIDENCE
from ..sansio import Op
from . import prompts
from .llm import CallRecord, LLMReply, ask

log = logging.getLogger(__name__)

CATEGORY_ALIASES = {"preference": "preferences", "likes": "preferences", "habits": "preferences",
                    "project": "projects", "goals": "projects", "goal": "projects", "work": "projects",
                    "tech": "technical", "technology": "technical", "setup": "technical", "environment": "technical",
                    "personal": "profile", "identity": "profile", "bio": "profile", "person": "profile"}
SOURCE_ALIASES = {"tool": "tool_call", "tool_result": "tool_call", "tool_output": "tool_call", "tools": "tool_call",
                  "explicit": "user_explicit", "user": "user_explicit", "user_stated": "user_explicit",
                  "stated": "user_explicit", "auto": "auto_discovery", "discovery": "auto_discovery",
                  "chat": "conversation", "inferred": "conversation", "inference": "conversation"}
MAX_VALUE_CHARS = 1000
MAX_CONTEXT_CHARS = 300
MAX_KEY_CHARS = 64
MAX_NOTES = 10
MAX_REPLY_FACTS = 100  # per reply: a runaway reply of thousands would flood the memory and hold the worker for minutes
MAX_NOTE_CHARS = 1000
_FENCE = re.compile(r"```(?:json|JSON)?\s*(.*?)```", re.S)


@dataclass(frozen=True)
class ExtractedFact:
    category: str
    key: str
    value: str
    source: str = "conversation"
    confidence: int = DEFAULT_CONFIDENCE
    source_context: str | None = None
    said_at: datetime | None = None  # when it was said: its message's time (None: now)
    message_seq: int | None = None  # that message's number in the session


@dataclass
class Extraction:
    facts: list[ExtractedFact] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    dropped: int = 0  # entries without a usable key or value


def snake_key(raw: str) -> str:
    key = re.sub(r"[^\w]+", "_", raw.strip().lower(), flags=re.UNICODE).strip("_")
    return key[:MAX_KEY_CHARS].rstrip("_")


def _text(value: Any) -> str | None:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, str):
        return value.strip()
    if isinstance(value, list) and all(isinstance(v, (str, int, float)) for v in value):
        return ", ".join(str(v).strip() for v in value)
    return None


def normalize_fact(raw: Any) -> ExtractedFact | None:
    """One fact from the model, checked; None when it has no usable key or value."""
    if not isinstance(raw, Mapping):
        return None
    key = _text(raw.get("key"))
    value = _text(raw.get("value"))
    if not key or not value or not snake_key(key):
        return None
    category = (_text(raw.get("category")) or "other").lower()
    category = category if category in FACT_CATEGORIES else CATEGORY_ALIASES.get(category, "other")
    source = (_text(raw.get("source")) or "conversation").lower()
    source = source if source in FACT_SOURCES else SOURCE_ALIASES.get(source, "conversation")
    context = _text(raw.get("source_context"))
    return ExtractedFact(category=category, key=snake_key(key), value=value[:MAX_VALUE_CHARS], source=source,
                         confidence=SOURCE_CONFIDENCE.get(source, DEFAULT_CONFIDENCE),
                         source_context=context[:MAX_CONTEXT_CHARS] if context else None)


def _note(raw: Any) -> str | None:
    """A note from the model, or None: empty, or a text no database stores (a NUL, a lone
    surrogate), which would fail the run after its facts were written."""
    if isinstance(raw, Mapping):
        raw = raw.get("text") or raw.get("note") or raw.get("content")
    text = _text(raw) if not isinstance(raw, list) else None
    return text[:MAX_NOTE_CHARS] if text and not unstorable(text) else None


def interpret(payload: Any) -> tuple[Extraction | None, str | None]:
    """A decoded reply as an ``Extraction``, or the problem with it. A bare list is a list of
    facts (the older format); a single fact object is accepted too."""
    notes_raw: object  # decoded JSON
    if isinstance(payload, list):
        facts_raw, notes_raw = payload, []
    elif isinstance(payload, Mapping):
        if "facts" in payload or "notes" in payload:
            facts_raw, notes_raw = payload.get("facts") or [], payload.get("notes") or []
        elif "key" in payload and "value" in payload:
            facts_raw, notes_raw = [payload], []
        else:
            return None, "the JSON object has no \"facts\" list"
    else:
        return None, f"expected a JSON object, got {type(payload).__name__}"
    if not isinstance(facts_raw, list) or not isinstance(notes_raw, list):
        return None, "\"facts\" and \"notes\" must be lists"
    if len(facts_raw) > MAX_REPLY_FACTS:
        log.warning("the model's reply holds %d facts: the first %d are kept", len(facts_raw), MAX_REPLY_FACTS)
    checked = [normalize_fact(raw) for raw in facts_raw[:MAX_REPLY_FACTS]]
    merged: dict[tuple[str, str], ExtractedFact] = {}
    for fact in checked:
        if fact is not None:
            merged.pop((fact.category, fact.key), None)  # a later duplicate wins
            merged[(fact.category, fact.key)] = fact
    dropped = sum(1 for fact in checked if fact is None) + max(0, len(facts_raw) - MAX_REPLY_FACTS)
    if facts_raw and not merged:
        return None, f"none of the {len(facts_raw)} facts has a usable \"key\" and \"value\""
    notes = [n for n in (_note(raw) for raw in notes_raw) if n][:MAX_NOTES]
    return Extraction(list(merged.values()), notes, dropped), None


def repair_json(text: str) -> Any:
    """A dict or list mended from almost-JSON (trailing commas, single quotes, comments, a missing
    comma) by the ``json-repair`` package; None without it, or when nothing object-like comes out.
    Not for a cut-off reply (see find_json)."""
    try:
        import json_repair
    except ImportError:
        return None
    try:
        value = json_repair.loads(text)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, (dict, list)) and value else None


def find_json(text: str) -> tuple[Any, str | None]:
    """The first JSON object or array in ``text`` (prose and code fences around it are fine).
    Almost-JSON at the outermost bracket is mended by ``repair_json`` before an inner bracket is
    tried (else ``{'facts': [...], 'notes': []}`` would come back as its inner ``[]``); a cut-off
    reply is never mended: that would invent its lost end (a value cut to "Eu")."""
    candidates = [m.group(1) for m in _FENCE.finditer(text)] + [text]
    decoder = json.JSONDecoder()
    problem = "the reply contains no JSON object"
    for candidate in candidates:
        starts = [i for i, ch in enumerate(candidate) if ch in "{["][:64]
        for n, start in enumerate(starts):
            try:
                value, _ = decoder.raw_decode(candidate, start)
            except json.JSONDecodeError as exc:
                cut_off = exc.pos >= len(candidate.rstrip()) - 1 or "Unterminated" in exc.msg
                if cut_off:
                    problem = f"the JSON is cut off after {len(candidate)} characters"
                elif problem.startswith("the reply contains no"):
                    problem = f"invalid JSON: {exc.msg} at character {exc.pos}"
                mended = None if cut_off or n else repair_json(candidate[start:])
                if mended is not None:
                    log.info("mended the chat model's almost-JSON locally (%s)", problem)
                    return mended, None
                continue
            except RecursionError:  # 100,000 brackets deep: unusable, like any other bad reply
                problem = "the JSON is nested too deeply"
                break
            except ValueError:  # a 5,000-digit number: over Python's limit on integer conversion
                problem = "the JSON has a number too long to read"
                break
            if isinstance(value, (dict, list)):
                return value, None
    return None, problem


def parse_reply(text: str) -> tuple[Extraction | None, str | None]:
    payload, problem = find_json(text or "")
    if problem is not None:
        return None, problem
    return interpret(payload)


def from_reply(reply: LLMReply) -> tuple[Extraction | None, str | None]:
    if reply.parsed is not None:
        result, problem = interpret(reply.parsed)
        if problem is None:
            return result, None
    return parse_reply(reply.text)


def extract(transcript: str, known: Sequence[Mapping[str, str]], ledger: list[CallRecord],
            dated: str | None = None) -> Op[Extraction]:
    """Ask the chat model for facts and notes; one repair request if the first reply is unusable.
    ``dated``: the excerpt's day(s) (``transcript.dated``)."""
    messages = prompts.extraction_messages(transcript, known, dated)
    reply = yield from ask("extract", messages, ledger, prompts.EXTRACTION_SCHEMA)
    result, problem = from_reply(reply)
    if result is not None:
        return result
    log.info("extraction reply unusable (%s); asking once more", problem)
    repair = yield from ask("repair", prompts.repair_messages(messages, reply.text, problem or ""), ledger)
    result, second = parse_reply(repair.text)
    if result is None:
        raise ExtractionError(f"the chat model's reply was unusable ({problem}), and again after a repair "
                              f"request ({second}); first reply began: {reply.text[:120]!r}")
    return result
