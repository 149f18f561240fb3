"""The household of a user: persons, resolving a reference to one, and who is speaking. Pure.

A user's memory can be about several people (a family sharing an assistant). Each person has a
display name (unique per user, case-insensitive), aliases ("mom", "Sarah") and a role (primary,
spouse, child, parent, guest, ...). Items and facts carry the person's display name in their
``person`` column, which is what search person hints match.

``resolve(persons, ref)`` matches a display name, an alias or a role and gives None when the
reference is unknown or ambiguous. ``infer_speaker`` decides who is talking in a turn: an explicit
hint (device or session), the only person in single mode, then a first-person parser ("my wife is
cooking": the wife is mentioned, so she is not the speaker, and she becomes a person hint).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Any, Sequence

from . import validation as v
from ..errors import ValidationError
from ..models import _Record

ROLES = ("primary", "spouse", "partner", "child", "parent", "sibling", "grandparent", "relative", "roommate",
         "guest", "other")

# a relation word in "my <word>" -> the roles it may name (seen from the primary person)
RELATION_ROLES: dict[str, tuple[str, ...]] = {
    **dict.fromkeys(("wife", "husband", "spouse", "partner", "girlfriend", "boyfriend"), ("spouse", "partner")),
    **dict.fromkeys(("son", "daughter", "kid", "child", "boy", "girl"), ("child",)),
    **dict.fromkeys(("kids", "children", "sons", "daughters"), ("child",)),
    **dict.fromkeys(("mom", "mum", "mother", "dad", "father", "mama", "papa", "parents"), ("parent",)),
    **dict.fromkeys(("brother", "sister"), ("sibling",)),
    **dict.fromkeys(("grandma", "grandpa", "grandmother", "grandfather"), ("grandparent",)),
    **dict.fromkeys(("roommate", "flatmate"), ("roommate",)),
}

PERSON_FIELDS = ("display_name", "pronouns", "role", "aliases", "birth_date", "notes", "devices")
MAX_ALIASES = 20
MAX_DEVICES = 20

PLURALS = ("kids", "children", "sons", "daughters", "parents")
_WORD = re.compile(r"[^\W_]+(?:['’-][^\W_]+)*", re.UNICODE)
_POSSESSIVE = re.compile(r"['’]s$")
_MY = re.compile(r"\b(?:my|our)\s+([^\W\d_]+)", re.IGNORECASE)
_SELF = re.compile(r"\b(?:i\s*am|i'm|i’m|this\s+is|it's|it’s|it\s+is|here\s+is|(?:my\s+)?name\s+is)\s+"
                   r"([^\W\d_]+(?:\s+[^\W\d_]+)?)(?![\w'’])", re.IGNORECASE)


@dataclass
class Person(_Record):
    id: int
    user_id: str
    display_name: str
    pronouns: str | None = None
    role: str | None = None
    aliases: list[str] = field(default_factory=list)
    birth_date: str | None = None
    notes: str | None = None
    created_at: datetime | None = None
    updated_at: datetime | None = None
    # ids of the devices this person uses (a kitchen speaker, a phone): a turn from one is theirs
    devices: list[str] = field(default_factory=list)


@dataclass
class SpeakerInference(_Record):
    """Who is talking (None: unknown), how sure (high, medium, low), why, and the persons whose
    memories deserve a boost this turn (``hints``: display names, the speaker first)."""

    speaker: Person | None
    confidence: str
    reason: str
    mentioned: list[Person] = field(default_factory=list)
    hints: list[str] = field(default_factory=list)


def person(row: dict[str, Any]) -> Person:
    fields: dict[str, Any] = {k: row.get(k) for k in Person._field_names()}
    return Person(**fields)



def clean_person_fields(fields: dict[str, Any], partial: bool, max_notes: int) -> dict[str, Any]:
    """Person fields checked and normalised (spaces collapsed, role lower case, aliases
    de-duplicated, birth date YYYY-MM-DD); ``partial``: only the fields given (an update)."""
    unknown = set(fields) - set(PERSON_FIELDS)
    if unknown:
        raise ValidationError(f"unknown person field(s): {', '.join(sorted(unknown))}")
    out: dict[str, Any] = {}
    if "display_name" in fields or not partial:
        out["display_name"] = " ".join(v.text(fields.get("display_name"), "display_name", v.MAX_KEY).split())
    for name in ("pronouns", "role"):
        if name in fields:
            value = v.optional_text(fields[name], name, v.MAX_KEY)
            out[name] = value.lower() if value and name == "role" else value
    if "aliases" in fields:
        aliases = [" ".join(a.split()) for a in v.names(fields["aliases"], "aliases")]
        if len(aliases) > MAX_ALIASES:
            raise ValidationError(f"at most {MAX_ALIASES} aliases")
        out["aliases"] = list(dict.fromkeys(a for a in aliases if a))
    if isinstance(fields.get("birth_date"), date):
        out["birth_date"] = fields["birth_date"].isoformat()
    elif fields.get("birth_date") is not None:
        out["birth_date"] = v.text(fields["birth_date"], "birth_date", 10)
        if not _is_date(out["birth_date"]):
            raise ValidationError("birth_date must be YYYY-MM-DD")
    elif "birth_date" in fields:
        out["birth_date"] = None
    if "notes" in fields:
        out["notes"] = v.optional_text(fields["notes"], "notes", max_notes)
    if "devices" in fields:  # ids, exact (a device's id is whatever the application gave it)
        devices = v.names(fields["devices"], "devices")
        if len(devices) > MAX_DEVICES:
            raise ValidationError(f"at most {MAX_DEVICES} devices")
        out["devices"] = list(dict.fromkeys(devices))
    return out


def _is_date(text: str) -> bool:
    try:
        date.fromisoformat(text)
    except ValueError:
        return False
    return len(text) == 10

def norm(text: str) -> str:
    """Case- and space-insensitive form of a name."""
    return " ".join(text.casefold().split())


def names_of(p: Person) -> set[str]:
    """The normalised names a person answers to (display name, first name, aliases)."""
    out = {norm(p.display_name), *(norm(a) for a in p.aliases)}
    first = norm(p.display_name).split(" ")[0]
    if first:
        out.add(first)
    return out


def matches(persons: Sequence[Person], ref: str) -> list[Person]:
    """Every person that ``ref`` names: by display name or alias first, else by role."""
    key = norm(ref)
    if not key:
        return []
    exact = [p for p in persons if norm(p.display_name) == key]
    if exact:
        return exact
    named = [p for p in persons if key in {norm(a) for a in p.aliases}]
    if named:
        return named
    first = [p for p in persons if norm(p.display_name).split(" ")[0] == key]
    if first:
        return first
    roles = RELATION_ROLES.get(key, (key,))
    return [p for p in persons if p.role is not None and norm(p.role) in roles]


def resolve(persons: Sequence[Person], ref: str) -> Person | None:
    """The one person ``ref`` names; None when nobody or more than one person matches."""
    found = matches(persons, ref)
    return found[0] if len(found) == 1 else None


def canonical_name(rows: Sequence[dict[str, Any]], name: str) -> str:
    """The display name of the one person (rows as stored) that ``name`` refers to, else ``name``."""
    found = resolve([person(r) for r in rows], name)
    return name if found is None else found.display_name


def check_aliases(persons: Sequence[Person], candidate: Person) -> str | None:
    """Why ``candidate`` clashes with another person (same display name, or an alias that is
    another person's display name), or None. Shared aliases are allowed: they are ambiguous."""
    others = [p for p in persons if p.id != candidate.id]
    if any(norm(p.display_name) == norm(candidate.display_name) for p in others):
        return f"a person named {candidate.display_name!r} already exists"
    for alias in candidate.aliases:
        if any(norm(p.display_name) == norm(alias) for p in others):
            return f"alias {alias!r} is the name of another person"
    for device in candidate.devices:
        owner = next((p for p in others if device in p.devices), None)
        if owner is not None:
            return f"device {device!r} is {owner.display_name}'s"
    return None


def mentions(persons: Sequence[Person], text: str) -> tuple[list[Person], Person | None]:
    """(persons the text mentions, the person the speaker says they are). "my wife" / "our son"
    resolve through aliases and relation roles; bare names and aliases count when written as words."""
    mentioned: dict[int, Person] = {}
    for match in _MY.finditer(text):
        word = norm(match.group(1))
        group = matches(persons, word)
        if len(group) == 1 or (group and word in PLURALS):
            mentioned.update((p.id, p) for p in group)
    self_named = None
    for match in _SELF.finditer(text):
        words = match.group(1).split()
        for size in (2, 1):
            candidate = resolve(persons, " ".join(words[:size])) if len(words) >= size else None
            if candidate is not None and candidate.id not in mentioned:
                self_named = candidate
                break
        if self_named is not None:
            break
    tokens = [_POSSESSIVE.sub("", norm(w)) for w in _WORD.findall(text)]
    grams = set(tokens) | {" ".join(tokens[i:i + 2]) for i in range(len(tokens) - 1)}
    for p in persons:
        if p.id in mentioned or (self_named is not None and p.id == self_named.id):
            continue
        # bare mentions by name or alias; roles alone ("child") are too generic outside "my ..."
        if names_of(p) & grams:
            mentioned[p.id] = p
    return list(mentioned.values()), self_named


def hinted_person(persons: Sequence[Person], hint: int | str | None, device: str | None = None) -> Person | None:
    """The person a session's hint names (an id, or a name, alias or role), if exactly one; else
    the person whose ``devices`` hold ``device``."""
    if hint is None:
        if device is None:
            return None
        device = v.text(device, "device", v.MAX_KEY)
        return next((p for p in persons if device in p.devices), None)
    found = [p for p in persons if p.id == hint] if isinstance(hint, int) and not isinstance(hint, bool) \
        else matches(persons, v.text(hint, "hint", v.MAX_KEY))
    return found[0] if len(found) == 1 else None


def infer_speaker(persons: Sequence[Person], mode: str, text: str | None = None,
                  hint: Person | None = None) -> SpeakerInference:
    """Who is speaking in one turn. Order: the hint (a device's or session's person), the only
    person in single mode, what the text says ("I'm Tom"; "my wife ..." rules the wife out and, in
    a household where exactly one other person is left, points at them), else unknown."""
    mentioned, self_named = mentions(persons, text or "") if text else ([], None)
    if hint is not None:
        speaker, confidence, reason = hint, "high", "hint"
    elif mode == "single" and len(persons) == 1:
        speaker, confidence, reason = persons[0], "high", "single household"
    elif self_named is not None:
        speaker, confidence, reason = self_named, "medium", "introduced themself"
    else:
        left = [p for p in persons if p.id not in {m.id for m in mentioned}]
        if mentioned and len(left) == 1:
            speaker, confidence, reason = left[0], "medium", "the only person not mentioned"
        else:
            speaker, confidence, reason = None, "low", "unknown"
    others = [m for m in mentioned if speaker is None or m.id != speaker.id]
    hints = ([speaker.display_name] if speaker is not None else []) + [m.display_name for m in others]
    return SpeakerInference(speaker=speaker, confidence=confidence, reason=reason, mentioned=others, hints=hints)
