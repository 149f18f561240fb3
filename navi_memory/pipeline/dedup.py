"""Is a new fact one we already have? Same key, an equivalent key, or an embedding neighbour.

``decide`` compares a candidate with the facts on file and returns what to do:

- ``add``: nothing like it is on file;
- ``update``: the same attribute (same category and key, or an equivalent key such as ``city``
  for ``location``) with a different value: the new value supersedes the old, which stays in
  the fact's history;
- ``unchanged``: the same value is on file (under this key or an equivalent one);
- ``keep``: a different value, but the one on file came from a tool and the new one is only
  inferred from chat: the tool result wins (reported as unchanged);
- ``judge``: an embedding neighbour above the threshold with a different value and no rule to
  tell whether it is the same attribute; the chat model decides (``judge``, one call for all
  pairs), or without one the fact is added.

``adopt`` runs first for the chat model's facts: when the rules alone recorded a statement of
this session (the model could not be reached then), the model's version of it takes that fact's
category and key, so the fact is updated, not doubled.

The same rules serve the direct writes: ``upsert_fact`` updates an ``equivalent_fact`` rather
than adding a second one, and adding a note returns the stored one only when it is the same text
(``same_note``: case, spacing and punctuation aside); a note a typo apart (``near_note``) is stored
and only reported.

Pure functions except ``judge``, a sans-I/O step.
"""

from __future__ import annotations

import difflib
import logging
import re
import unicodedata
from dataclasses import dataclass, replace
from typing import Any, Mapping, Sequence

from ..retrieval.words import content_words, jaccard
from ..errors import ExtractionError
from ..sansio import Op
from . import prompts, rules
from .extract import ExtractedFact, find_json
from .llm import CallRecord, ask

log = logging.getLogger(__name__)

TOOL_SOURCES = ("tool_call", "auto_discovery")
QUALIFIERS = {"user", "users", "current", "main", "primary", "preferred", "favorite", "favourite", "usual",
              "default", "personal", "home", "my", "their", "present"}
# Keys (after dropping qualifiers) that name the same attribute of a person.
SYNONYMS = [
    {"name", "full_name", "first_name", "given_name", "called"},
    {"location", "city", "town", "residence", "lives_in", "live_in", "based_in", "place_of_residence", "address_city"},
    {"occupation", "job", "job_title", "profession", "role", "work_role", "position", "title"},
    {"employer", "company", "workplace", "works_at", "work_at", "organization", "organisation", "employer_name"},
    {"os", "operating_system"},
    {"editor", "ide", "code_editor", "text_editor"},
    {"shell", "command_shell"},
    {"age", "years_old"},
    {"timezone", "time_zone", "tz"},
    {"native_language", "mother_tongue", "first_language"},
    {"email", "email_address", "e_mail"},
    {"phone", "phone_number", "mobile", "mobile_number"},
]
ADOPT_OVERLAP = 0.5  # shared content words (Jaccard) of key and value: the same statement
_CANONICAL = {key: sorted(group)[0] for group in SYNONYMS for key in group}


@dataclass(frozen=True)
class Decision:
    action: str  # add | update | unchanged | keep | judge
    target: Mapping[str, Any] | None = None  # the fact on file it concerns
    reason: str = "new"


def norm_value(value: str) -> str:
    text = re.sub(r"\s+", " ", str(value).casefold()).strip().strip(".!,;:\"'`“”‘’ ")
    return re.sub(r"^(?:the|a|an) ", "", text)


def canonical_key(key: str) -> str:
    tokens = [t for t in re.split(r"[_\W]+", key.casefold()) if t]
    kept = [t for t in tokens if t not in QUALIFIERS] or tokens
    joined = "_".join(kept)
    if joined in _CANONICAL:
        return _CANONICAL[joined]
    singular = "_".join(t[:-1] if len(t) > 3 and t.endswith("s") and not t.endswith("ss") else t for t in kept)
    return _CANONICAL.get(singular, singular)


def same_attribute(key_a: str, key_b: str) -> bool:
    return canonical_key(key_a) == canonical_key(key_b)


def equivalent_fact(category: str, key: str, value: str,
                    known: Sequence[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The first fact of ``known`` (newest first) under a key that names the same attribute
    (``home_city`` ~ ``city`` ~ ``location``: see ``SYNONYMS`` and ``QUALIFIERS``) in the same
    category, or in any category with the same value; None when there is none."""
    wanted = norm_value(value)
    for fact in known:
        if same_attribute(fact["key"], key) and (
                fact["category"] == category or norm_value(fact["value"]) == wanted):
            return fact
    return None


NEAR_SIMILARITY = 0.95  # character similarity of two normalised notes that only differ by a typo
NEAR_MAX_CHARS = 1000  # longer notes are never called near: the comparison grows with length squared
# Punctuation is dropped unless a digit follows it: "8:15", "-5", "3.5" and "1,000" keep their meaning.
_PUNCTUATION = re.compile(r"[^\w\s](?!\d)")
_INVISIBLE = {"Cf", "Cc"}  # zero-width and control characters: not part of what a note says


def note_text(text: str) -> str:
    """A note as compared for repeats: compatibility forms unified (NFKC), lower case, invisible
    characters and punctuation (not before a digit) dropped, whitespace collapsed
    ("The train leaves at 8:15!" -> "the train leaves at 8:15"). Every letter, digit and symbol
    stays: two texts that differ in one of them differ here too."""
    folded = "".join(c for c in unicodedata.normalize("NFKC", str(text)).lower()
                     if unicodedata.category(c) not in _INVISIBLE)
    return " ".join(_PUNCTUATION.sub(" ", folded).split())


def same_note(a: str, b: str) -> bool:
    """Whether two notes are the same text (equal ``note_text``, not empty): what a direct write
    collapses. Anything else, a typo apart included, is another note."""
    x = note_text(a)
    return bool(x) and x == note_text(b)


def near_note(a: str, b: str) -> bool:
    """Whether two different notes look like one text with a typo (character similarity of at
    least ``NEAR_SIMILARITY``, 20 to ``NEAR_MAX_CHARS`` characters): reported beside a new note,
    never merged with it ("Flight LH400" and "Flight LH401" are two notes, and look alike)."""
    x, y = note_text(a), note_text(b)
    if x == y or min(len(x), len(y)) < 20 or max(len(x), len(y)) > NEAR_MAX_CHARS:
        return False
    matcher = difflib.SequenceMatcher(None, x, y, autojunk=False)
    return matcher.real_quick_ratio() >= NEAR_SIMILARITY and matcher.quick_ratio() >= NEAR_SIMILARITY \
        and matcher.ratio() >= NEAR_SIMILARITY  # the cheap upper bounds first


def _against(candidate: ExtractedFact, existing: Mapping[str, Any], why: str) -> Decision:
    if norm_value(candidate.value) == norm_value(existing["value"]):
        return Decision("unchanged", existing, f"same value ({why})")
    if existing.get("source") in TOOL_SOURCES and candidate.source == "conversation":
        return Decision("keep", existing, "a tool result on file outranks a value inferred from chat")
    return Decision("update", existing, f"new value supersedes the old ({why})")


def decide(candidate: ExtractedFact, known: Sequence[Mapping[str, Any]],
           similar: Sequence[tuple[Mapping[str, Any], float]] = (), threshold: float = 0.8) -> Decision:
    """What to do with ``candidate`` given the facts on file and its embedding neighbours among
    them (fact, cosine similarity)."""
    for fact in known:
        if fact["category"] == candidate.category and fact["key"] == candidate.key:
            return _against(candidate, fact, "same key")
    value = norm_value(candidate.value)
    equivalent = equivalent_fact(candidate.category, candidate.key, candidate.value, known)
    if equivalent is not None:
        return _against(candidate, equivalent, f"{candidate.key} is {equivalent['key']}")
    for fact, score in sorted(similar, key=lambda pair: -pair[1]):
        if score < threshold:
            break
        if norm_value(fact["value"]) == value:
            return Decision("unchanged", fact, f"same value under {fact['key']} (similarity {score:.2f})")
        return Decision("judge", fact, f"close to {fact['key']} (similarity {score:.2f})")
    return Decision("add")


def adopt(candidate: ExtractedFact, known: Sequence[Mapping[str, Any]], session_id: str) -> ExtractedFact:
    """``candidate`` (from the chat model) under the category and key of the rule fact recorded
    from the same statement of this session, if there is one: the same attribute (equivalent
    key), or half their key and value words shared. Unchanged when its own key is on file."""
    if any(f["category"] == candidate.category and f["key"] == candidate.key for f in known):
        return candidate
    words = content_words(f"{candidate.key.replace('_', ' ')} {candidate.value}")
    best: Mapping[str, Any] | None = None
    best_score = 0.0
    for fact in known:
        if fact.get("source_session_id") != session_id or not rules.is_rule_context(fact.get("source_context")):
            continue
        score = 1.0 if same_attribute(fact["key"], candidate.key) else jaccard(
            words, content_words(f"{fact['key'].replace('_', ' ')} {fact['value']}"))
        if score >= ADOPT_OVERLAP and score > best_score:
            best, best_score = fact, score
    if best is None:
        return candidate
    log.debug("%s/%s is the rule fact %s/%s of this session", candidate.category, candidate.key,
              best["category"], best["key"])
    return replace(candidate, category=best["category"], key=best["key"])


def parse_verdict(text: str, count: int) -> set[int]:
    """Pair numbers (1-based) the model called the same; anything unreadable counts as not same."""
    payload, problem = find_json(text)
    if problem is not None or not isinstance(payload, dict) or not isinstance(payload.get("same"), list):
        log.info("dedup verdict unreadable (%s): treating the pairs as different facts", problem or text[:80])
        return set()
    return {n for n in payload["same"] if isinstance(n, int) and not isinstance(n, bool) and 1 <= n <= count}


def judge(pairs: Sequence[tuple[ExtractedFact, Mapping[str, Any]]], ledger: list[CallRecord]) -> Op[set[int]]:
    """One chat call deciding which (candidate, fact on file) pairs are the same attribute."""
    if not pairs:
        return set()
    rows = [({"category": c.category, "key": c.key, "value": c.value}, old) for c, old in pairs]
    try:
        reply = yield from ask("dedup", prompts.dedup_messages(rows), ledger)
    except ExtractionError as exc:
        log.warning("dedup judge failed, keeping the facts apart: %s", exc)
        return set()
    return parse_verdict(reply.text, len(pairs))


def resolve(decision: Decision, candidate: ExtractedFact, same: bool) -> Decision:
    """A ``judge`` decision once the verdict is in."""
    if decision.action != "judge":
        return decision
    if not same or decision.target is None:
        return Decision("add", None, f"judged different from {decision.target['key'] if decision.target else '?'}")
    return _against(candidate, decision.target, f"judged the same as {decision.target['key']}")

