"""Deterministic extraction of explicit self-statements, and the cheap pre-filter before the LLM.

Only the user's own words are read (never the assistant's or a tool's). A sentence that is a
question is ignored, and the patterns are anchored on affirmative first-person forms, so "I don't
live in Paris" or "do you remember where I live?" record nothing. Every rule fact has source
``user_explicit``. Pure functions.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Callable, Iterable, Sequence

from ..models import Message

_SENTENCES = re.compile(r"(?<=[.!?;])\s+|\n+")
_QUESTION = re.compile(r"^\W*(what|who|whom|where|when|why|how|which|can|could|would|should|do|does|did|is|are|am|"
                       r"was|were|will|shall|may|have|has)\b", re.I)
_CLAUSE_END = re.compile(r"\s*(?:[,;:!?()]|\.(?:\s|$)|\s-\s|\s(?:and|but|because|since|so|which|who|where|"
                         r"though|although|while|if|when|as)\s|\s(?:last|next|this)\s(?:week|weekend|month|year|spring|summer|autumn|fall|winter)\b|"
                         r"\s(?:yesterday|today|recently|now|anymore|again|\w+\s(?:days|weeks|months|years)\sago)\b)",
                         re.I)
_NEGATED = re.compile(r"^(?:not|never|no)\b", re.I)
_PERSONAL = re.compile(r"\b(i|i'm|im|i've|i'd|i'll|my|mine|myself|we|we're|our|ours)\b", re.I)
_REMEMBER = re.compile(r"\b(?:please\s+)?(?:remember|don't forget|do not forget|keep in mind|make a note)\b"
                       r"(?:\s+(?:that|this))?[:,]?\s*(?P<v>.*)", re.I)
_STOP = {"a", "an", "the", "to", "of", "in", "on", "for", "my", "and", "or", "with", "is", "are", "that", "i",
         "i'm", "am", "be", "it", "this", "at", "by", "as", "all", "very", "really"}
_MY_FIELDS = {"birthday": "birthday", "email": "email", "email address": "email", "phone number": "phone",
              "age": "age", "job": "occupation", "occupation": "occupation", "profession": "occupation",
              "pronouns": "pronouns", "timezone": "timezone", "time zone": "timezone",
              "native language": "native_language", "first language": "native_language",
              "mother tongue": "native_language", "hometown": "hometown", "home town": "hometown",
              "partner's name": "partner_name", "wife's name": "partner_name", "husband's name": "partner_name"}


SAID = 'user said: "'
ASKED = 'user asked to remember: "'


def is_rule_context(text: str | None) -> bool:
    """Whether a fact's ``source_context`` is one the rules wrote."""
    return bool(text) and str(text).startswith((SAID, ASKED))


@dataclass(frozen=True)
class RuleFact:
    category: str
    key: str
    value: str
    source_context: str
    source: str = "user_explicit"
    said_at: datetime | None = None  # the time of the message it was said in
    seq: int | None = None  # that message's number in its session


def slug(text: str, words: int = 4) -> str:
    tokens = [t for t in re.findall(r"[a-z0-9]+", re.sub(r"['’]s\b", "", text.lower())) if t not in _STOP]
    return "_".join(tokens[:words]) or "item"


# Keys are short nouns a person would use for the topic ("editor_theme", "commute_train"): the
# topics below first, else the noun phrase the statement is about.
_EDITOR = re.compile(r"\b(?:editors?|ides?|vim|neovim|emacs|vs ?code|terminals?|ui)\b", re.I)
_TOPICS: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"\b(?:dark|light)\s+(?:mode|theme)s?\b|\bcolou?r\s+(?:scheme|theme)\b", re.I), "theme"),
    (re.compile(r"\b(?:take|takes|taking|catch|ride|commute|go|travel)\b.*?\b(?P<t>train|bus|tram|subway|metro|ferry)\b",
                re.I), "commute_{t}"),
    (re.compile(r"\b(?:tabs|spaces)\b", re.I), "indentation"),
    (re.compile(r"\b(?:window|aisle)\s+seats?\b", re.I), "seat"),
    (re.compile(r"\b(?:vegetarian|vegan|pescatarian|gluten[- ]free|halal|kosher)\b", re.I), "diet"),
    (re.compile(r"\b(?:coffee|tea|espresso|latte|cappuccino|flat white|matcha|decaf)\b", re.I), "drink"),
    (re.compile(r"\b(?:metric|imperial|celsius|fahrenheit)\b", re.I), "units"),
    (re.compile(r"\ballergic\b|\ballerg(?:y|ies)\b", re.I), "allergies"),
]
_SUBJECT = re.compile(r"^(?:i|we)(?:['’](?:m|ve|re|d|ll)|\s+(?:am|are|have|do))?\s+"
                      r"(?:(?:really|usually|always|often|generally|also|still|normally)\s+)*[a-z'’]+\s+", re.I)
_PHRASE_END = re.compile(r"(?:^|\s)(?:in|on|at|for|with|from|to|into|over|than|instead|of|named|called|because|when|"
                         r"while|since|every|each|and|but|or|that|which|who|by|during|after|before|is|are|was|"
                         r"were|has|have|will|starts?|ends?|expires?)\b", re.I)
_FILLER = _STOP | {"every", "each", "some", "any", "our", "we", "me", "always", "usually", "often", "just", "one",
                   "mine", "your", "his", "her", "their", "its", "am", "pm", "m", "re", "ve", "ll", "d",
                   # times say when, not what
                   "january", "february", "march", "april", "may", "june", "july", "august", "september",
                   "october", "november", "december", "monday", "tuesday", "wednesday", "thursday", "friday",
                   "saturday", "sunday", "today", "tomorrow", "tonight", "week", "month", "year", "next", "last"}


def topic_key(text: str, words: int = 2) -> str:
    """A short snake_case noun for what ``text`` is about: "dark mode in every editor" ->
    ``editor_theme``, "I take the 8:15 train" -> ``commute_train``, "my passport" -> ``passport``."""
    for pattern, key in _TOPICS:
        found = pattern.search(text)
        if found:
            key = key.format(**found.groupdict())
            return f"editor_{key}" if key == "theme" and _EDITOR.search(text) else key
    whole = re.sub(r"['’]s\b", "", text.strip().lower())
    owned = re.match(r"(?:my|our)\s+", whole)
    phrase = whole[owned.end():] if owned else _SUBJECT.sub("", whole, count=1)
    phrase = re.sub(r"^(?:in|on|at|for|with|to|of|by|about)\s+", "", phrase)  # "training for the marathon"
    end = _PHRASE_END.search(phrase)
    tokens = [t for t in re.findall(r"[a-z]+", phrase[:end.start()] if end else phrase) if t not in _FILLER]
    # the head noun ends an object ("the early train"), a possessed thing starts the phrase
    chosen = tokens[:words] if owned else tokens[-words:]
    if not chosen:  # "we're moving in June": no object, the statement's own words
        chosen = [t for t in re.findall(r"[a-z]+", whole) if t not in _FILLER][:words]
    return "_".join(chosen) or "note"


def clean_value(text: str, max_words: int) -> str:
    """The value up to the end of its clause, without quotes or trailing punctuation."""
    end = _CLAUSE_END.search(text)
    value = (text[:end.start()] if end else text).strip().strip("\"'“”‘’`").strip()
    value = re.sub(r"\s+", " ", value).rstrip(".!?,;:")
    return " ".join(value.split()[:max_words])


def _title(value: str) -> str:
    return " ".join(w[:1].upper() + w[1:] for w in value.split())


Build = Callable[[re.Match[str]], "tuple[str, str, str] | None"]  # a match -> (category, key, value), or None
Rule = tuple[re.Pattern[str], Build]


def _simple(category: str, key: str, max_words: int, title: bool = False, capital: bool = False) -> Build:
    def build(match: re.Match[str]) -> tuple[str, str, str] | None:
        value = clean_value(match.group("v"), max_words)
        if not value or _NEGATED.match(value) or (capital and not value[0].isupper()):
            return None
        return category, key, _title(value) if title else value

    return build


# a place ends where the sentence goes on about why or with whom: "Lisbon for a new job"
_PLACE_END = re.compile(r"\s(?:for|to|with|from|after|before|near|in order|because|since|until|last|next)\b.*$", re.I)


def _place(match: re.Match[str]) -> tuple[str, str, str] | None:
    value = _PLACE_END.sub("", clean_value(match.group("v"), 12))
    words = value.split()
    if not words or _NEGATED.match(value) or len(words) > 4:
        return None
    return "profile", "location", value


# "I'm Maya": a capitalised single word is a name, unless it is a common word that starts a sentence
_NOT_NAMES = frozenset("""sorry sure fine good great ok okay not just so very really back here there done glad
happy sad tired busy ready new home still also always never currently actually afraid aware excited interested
home single married vegan vegetarian allergic pregnant retired from in at on off out up down the a an""".split())


def _introduction(match: re.Match[str]) -> tuple[str, str, str] | None:
    name = match.group("v")
    if name.lower() in _NOT_NAMES or re.search(r"(?:ing|ed|ly|ish|ful|ous)$", name.lower()):
        return None
    return "profile", "name", name


def _preference(match: re.Match[str]) -> tuple[str, str, str] | None:
    value = clean_value(match.group("v"), 12)
    return None if not value or _NEGATED.match(value) else ("preferences", topic_key(value), value)


def _favorite(match: re.Match[str]) -> tuple[str, str, str] | None:
    value = clean_value(match.group("v"), 10)
    return None if not value or _NEGATED.match(value) else ("preferences", f"favorite_{slug(match.group('k'), 3)}",
                                                              value)


def _my_field(match: re.Match[str]) -> tuple[str, str, str] | None:
    value = clean_value(match.group("v"), 10)
    key = _MY_FIELDS[match.group("k").lower()]
    return None if not value or _NEGATED.match(value) else ("profile", key, value)


_NAME = r"(?P<v>[^\s,.;!?][^,.;!?]*)"
RULES: list[Rule] = [
    (re.compile(r"\bmy name is\s+" + _NAME, re.I), _simple("profile", "name", 4, title=True)),
    (re.compile(r"\b(?:i am|i'm) called\s+" + _NAME, re.I), _simple("profile", "name", 4, title=True)),
    (re.compile(r"\bcall me\s+" + _NAME, re.I), _simple("profile", "name", 3, capital=True)),
    (re.compile(r"(?:^|[.!?]\s+|\b(?:hi|hello|hey)[!,.]?\s+)(?:I am|I'm|I’m)\s+(?P<v>[A-Z][a-z]+)(?=\s*(?:[.!,;]|$))"),
     _introduction),
    (re.compile(r"\b(?:i live|i'm living|i am living|i reside|i'm based|i am based) in\s+(?P<v>.+)", re.I), _place),
    (re.compile(r"\bi (?:just |recently )?moved to\s+(?P<v>.+)", re.I), _place),
    (re.compile(r"\bi work as\s+(?:an?\s+)?(?P<v>.+)", re.I), _simple("profile", "occupation", 8)),
    (re.compile(r"\bi work (?:at|for)\s+(?P<v>.+)", re.I), _simple("profile", "employer", 6)),
    (re.compile(r"\b(?:i am|i'm) (?P<v>\d{1,3}) years old\b", re.I), _simple("profile", "age", 1)),
    (re.compile(r"\bi (?:really |strongly |generally |usually )?prefer\s+(?P<v>.+)", re.I), _preference),
    (re.compile(r"\bmy (?:favou?rite|preferred) (?P<k>[a-z][a-z ]{1,30}?) is\s+(?P<v>.+)", re.I), _favorite),
    (re.compile(r"\bmy (?P<k>" + "|".join(re.escape(k) for k in sorted(_MY_FIELDS, key=len, reverse=True))
                + r") is\s+(?P<v>.+)", re.I), _my_field),
]


def sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCES.split(text) if s and s.strip()]


def is_question(sentence: str) -> bool:
    return sentence.rstrip().endswith("?") or bool(_QUESTION.match(sentence))


def _statement_facts(sentence: str) -> list[RuleFact]:
    out = []
    for pattern, build in RULES:
        for match in pattern.finditer(sentence):
            found = build(match)
            if found:
                out.append(RuleFact(*found, source_context=f'{SAID}{sentence[:200]}"'))
    return out


_MY_THING = re.compile(r"^(?:my|our)\s+(?P<k>[a-z][\w'’ ]{0,40}?)\s+(?:is|are)\s+(?P<v>\S.*)$", re.I)


def _remembered(text: str) -> tuple[str, str]:
    """Key and value of a "remember that ..." statement: "my sister's birthday is June 5" ->
    (``sister_birthday``, "June 5"); anything else keeps its words under a topic key."""
    mine = _MY_THING.match(text)
    if mine:
        value = clean_value(mine.group("v"), 12)
        if value:
            return topic_key(mine.group("k"), 3), value
    return topic_key(text), text


def extract_text(text: str) -> list[RuleFact]:
    """Rule facts in one user message; a "remember that ..." with no other rule inside becomes a
    fact in category ``other``."""
    facts: list[RuleFact] = []
    for sentence in sentences(text):
        if is_question(sentence):
            continue
        found = _statement_facts(sentence)
        remembered = _REMEMBER.search(sentence)
        if remembered and not found:
            value = remembered.group("v").strip().rstrip(".!")
            if (_PERSONAL.search(value) or len(value.split()) >= 3) and not _NEGATED.match(value):
                key, value = _remembered(value)
                facts.append(RuleFact("other", key, value[:500],
                                      source_context=f'{ASKED}{sentence[:200]}"'))
        facts.extend(found)
    return facts


def extract(messages: Iterable[Message]) -> list[RuleFact]:
    """Rule facts in the user messages, later statements winning per (category, key)."""
    out: dict[tuple[str, str], RuleFact] = {}
    for message in messages:
        if message.role == "user":
            for fact in extract_text(message.content):
                out.pop((fact.category, fact.key), None)
                out[(fact.category, fact.key)] = replace(fact, said_at=message.created_at, seq=message.seq)
    return list(out.values())


def asks_to_remember(text: str) -> bool:
    return any(_REMEMBER.search(s) and not is_question(s) for s in sentences(text))


def worth_extracting(messages: Sequence[Message]) -> bool:
    """False when nothing in the messages can hold a fact about the user: no tool output and no
    user statement in the first person (questions and requests alone do not count)."""
    for message in messages:
        if message.role == "tool" and message.content.strip():
            return True
        if message.role == "user":
            for sentence in sentences(message.content):
                if not is_question(sentence) and (_PERSONAL.search(sentence) or _REMEMBER.search(sentence)):
                    return True
    return False
