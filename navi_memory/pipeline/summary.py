"""The per-user narrative summary: regenerated only when facts changed; every version is kept.

With a chat model the summary is written by it (2-4 short paragraphs, at most 400 words, facts
only); without one it is composed from the facts by rule. A failed summary call leaves the previous
version in place: the facts are newer than the summary, so the next run tries again.
"""

from __future__ import annotations

import logging
import re
from datetime import datetime
from typing import Any, Mapping, Sequence

from ..errors import ExtractionError
from ..models import FACT_CATEGORIES
from ..sansio import Op
from . import prompts
from .llm import CallRecord, ask

log = logging.getLogger(__name__)

MAX_WORDS = 400
# and characters: the summary goes into every session's prompt whole, and 400 "words" of a
# model's reply can be URLs or encoded blobs (400 of 80 characters: 32 KB a turn)
MAX_CHARS = 4000
MAX_PARAGRAPHS = 4
MAX_FACTS = 300
HEADINGS = {"profile": "About the user", "preferences": "Preferences", "technical": "Technical setup",
            "projects": "Projects and goals", "other": "Also worth knowing"}


def needs_update(changed: bool, facts: Sequence[Mapping[str, Any]], summary: Mapping[str, Any] | None) -> bool:
    """Regenerate when this run changed facts, or when facts are newer than the stored summary
    (a previous summary call failed)."""
    if not facts:
        return False
    if changed or summary is None:
        return True
    newest: datetime = max(f["updated_at"] for f in facts)
    written: datetime = summary["created_at"]
    return newest > written


def grouped(facts: Sequence[Mapping[str, Any]]) -> list[tuple[str, list[Mapping[str, Any]]]]:
    order = {c: i for i, c in enumerate(FACT_CATEGORIES)}
    groups: dict[str, list[Mapping[str, Any]]] = {}
    ranked = sorted(facts, key=lambda f: (order.get(f["category"], 99), f["key"] != "name", f["key"]))
    for fact in ranked[:MAX_FACTS]:
        groups.setdefault(fact["category"], []).append(fact)
    return list(groups.items())


def facts_text(facts: Sequence[Mapping[str, Any]]) -> str:
    lines = []
    for category, members in grouped(facts):
        lines.append(f"[{category}]")
        lines.extend(f"  {f['key']}: {prompts.one_line(f['value'])}" for f in members)
    return "\n".join(lines)


def clip_words(text: str, limit: int = MAX_WORDS, most_chars: int = MAX_CHARS) -> str:
    """At most ``limit`` words and ``most_chars`` characters, ending on a sentence boundary when
    one is in the last third (else on a word, or inside one longer than a third of the room)."""
    words = re.findall(r"\S+\s*", text)
    if len(words) <= limit and len(text.strip()) <= most_chars:
        return text.strip()
    cut = "".join(words[:limit]).rstrip()
    if len(cut) > most_chars - 1:  # the room of the ellipsis kept
        room = cut[:most_chars - 1]
        space = room.rstrip().rfind(" ")
        cut = room[:space] if space >= len(room) * 2 // 3 else room
        cut = cut.rstrip()
    end = max(cut.rfind(". "), cut.rfind(".\n"), cut.rfind("!"), cut.rfind("?"))
    if end >= len(cut) * 2 // 3:
        return cut[:end + 1].strip()
    return cut.rstrip(",;:") + "…"


def tidy(text: str) -> str:
    """The model's text as plain paragraphs: no code fences or headings, at most 4 paragraphs,
    at most 400 words and 4,000 characters."""
    text = re.sub(r"```\w*", "", text or "").strip()
    paragraphs = []
    for block in re.split(r"\n\s*\n", text):
        lines = [ln for ln in block.strip().splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
        if lines:
            paragraphs.append(" ".join(ln.strip() for ln in lines))
    return clip_words("\n\n".join(paragraphs[:MAX_PARAGRAPHS]))


def _phrase(fact: Mapping[str, Any]) -> str:
    """"editor theme: dark mode", or the value alone when it says the key already (a remembered
    sentence, "short answers" under ``short_answers``)."""
    key: str = fact["key"].replace("_", " ")
    value = str(fact["value"])
    if value.casefold() in key.casefold():
        return key
    sentence = re.match(r"(?:i|i'm|we|we're|my|our)\b", value, re.I)  # "I take the 8:15 train"
    if sentence or all(w in value.casefold() for w in key.casefold().split()):
        return value
    return f"{key}: {value}"


def compose(facts: Sequence[Mapping[str, Any]]) -> str:
    """The no-LLM summary: one short paragraph per group of categories, at most four."""
    paragraphs = []
    for category, members in grouped(facts):
        items = "; ".join(_phrase(f) for f in members)
        paragraphs.append(f"{HEADINGS.get(category, category.title())}: {items}.")
    if len(paragraphs) > MAX_PARAGRAPHS:
        paragraphs = paragraphs[:MAX_PARAGRAPHS - 1] + [" ".join(paragraphs[MAX_PARAGRAPHS - 1:])]
    return clip_words("\n\n".join(paragraphs))


def write(facts: Sequence[Mapping[str, Any]], ledger: list[CallRecord], use_llm: bool) -> Op[str | None]:
    """The new summary text, or None when the chat model failed (logged; retried next run)."""
    if not use_llm:
        return compose(facts)
    try:
        reply = yield from ask("summary", prompts.summary_messages(facts_text(facts)), ledger)
    except ExtractionError as exc:
        log.warning("summary not regenerated: %s", exc)
        return None
    text = tidy(reply.text)
    if not text:
        log.warning("summary not regenerated: the chat model returned no text")
        ledger[-1].update({"ok": False, "error": "empty summary"})
        return None
    return text
