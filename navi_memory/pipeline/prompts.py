"""The texts sent to the chat model, and the pure functions that fill them in.

Messages are ``(role, text)`` pairs, a form every LangChain chat model accepts, so nothing here
imports LangChain.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Sequence

from ..models import FACT_CATEGORIES

ChatMessages = list[tuple[str, str]]

EXTRACT_SYSTEM = f"""\
You keep the long-term memory of an AI assistant about the one person it works for (the user).
You get the facts already on file and an excerpt of a conversation. Decide what, if anything,
from the excerpt should still be known about the user weeks from now.

The excerpt has four kinds of lines: "User:" is the user speaking, "Assistant:" is the assistant,
"[Tool call]" is a program the assistant ran with its arguments, and "[Tool result]" is that
program's (possibly shortened) output. A message longer than one line continues on indented
lines: an indented line is part of the message above it, never a new speaker. Program output is
firmer evidence than chat: when the two disagree, believe the tool result.

Worth remembering:
- who the user is: name, age, where they live, work and role, family, languages;
- the user's own setup: operating system, devices, editors, programming languages, tools and
  services they rely on;
- lasting preferences and habits: how they want answers, likes and dislikes, routines;
- projects and goals the user is pursuing over time.

Not worth remembering:
- what was asked or talked about, one-off tasks, their progress, commands and file paths;
- passing states and moods ("is tired", "busy today", "on a train right now");
- other people, unless it is the user's own relation to them ("has a daughter, Mia");
- inventories of servers, network layouts and operational notes;
- anything already on file with the same meaning (skip it, even if phrased differently).

The excerpt comes with its date. Write every time in facts and notes as a date or a month
("moving to Porto in December 2026", "exam on 3 June 2027"), never as "tomorrow", "next week" or
"in two months": those words mean nothing when the memory is read weeks later.

If something on file has changed, report the new value under the SAME category and key as the
file, so it replaces the old one. Use short snake_case keys (home_city, preferred_editor).
Categories: {", ".join(FACT_CATEGORIES)}.
For "source" use "tool_call" when a tool result showed it, "user_explicit" when the user stated it
about themselves in so many words, and "conversation" when you inferred it from the chat.
"source_context" is a few words on where it came from.
"notes" are at most five short sentences about the user that matter later but do not fit a
key/value pair (plans, circumstances); leave the list empty when there are none.

Answer with one JSON object and nothing else:
{{"facts": [{{"category": "...", "key": "...", "value": "...", "source": "...", "source_context": "..."}}],
 "notes": ["..."]}}
Both lists may be empty; an empty answer is {{"facts": [], "notes": []}}."""

REPAIR = """\
Your previous answer could not be used: {problem}
Send the same answer again as one valid JSON object of the form
{{"facts": [{{"category": "...", "key": "...", "value": "...", "source": "...", "source_context": "..."}}], "notes": []}}
with no text before or after it."""

SUMMARY_SYSTEM = """\
You write the short profile an AI assistant reads about its user at the start of every
conversation. Use only the facts you are given; never invent or guess.
Write 2 to 4 short paragraphs, at most 400 words in total, in plain prose addressed to the
assistant ("The user ..."). Start with who the user is, then how they like to work and be
answered, then what they are currently working on. Leave out task progress, file paths,
commands and infrastructure details. No headings, no lists."""

DEDUP_SYSTEM = """\
You compare facts in a memory about one user. For each numbered pair decide whether the NEW fact
is about the same attribute of the user as the EXISTING fact, so that the new value should
replace the old one (for example "city" and "home_town"), or whether they are different things
(for example "favorite_color" and "car_color").
Answer with one JSON object and nothing else: {"same": [numbers of the pairs that match]}."""

EXTRACTION_SCHEMA = {
    "title": "memory_update",
    "description": "Facts and notes about the user worth keeping in long-term memory.",
    "type": "object",
    "properties": {
        "facts": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "category": {"type": "string", "enum": list(FACT_CATEGORIES)},
                    "key": {"type": "string", "description": "short snake_case name of the attribute"},
                    "value": {"type": "string"},
                    "source": {"type": "string", "enum": ["conversation", "tool_call", "user_explicit"]},
                    "source_context": {"type": "string"},
                },
                "required": ["category", "key", "value", "source"],
            },
        },
        "notes": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["facts", "notes"],
}

MAX_KNOWN_CHARS = 4000


def one_line(text: Any) -> str:
    """A stored value on one line: a line break in it (a fact saved by a tool or the REST API)
    could start a line posing as the conversation or another fact in the model's prompt."""
    return " ".join(str(text).split())


def known_facts_block(facts: Iterable[Mapping[str, str]], max_chars: int = MAX_KNOWN_CHARS) -> str:
    """Facts on file as ``category/key: value`` lines, newest first, cut at ``max_chars``."""
    lines: list[str] = []
    size = 0
    for fact in facts:
        line = f"{fact['category']}/{fact['key']}: {one_line(fact['value'])}"
        if size + len(line) + 1 > max_chars:
            lines.append("(more facts on file, not shown)")
            break
        lines.append(line)
        size += len(line) + 1
    return "\n".join(lines) if lines else "(nothing on file yet)"


def extraction_messages(transcript: str, known: Sequence[Mapping[str, str]], dated: str | None = None) -> ChatMessages:
    """``dated``: when the excerpt took place (``transcript.dated``), so that the model can turn
    "next week" into a date."""
    when = f"CONVERSATION DATE: {dated}\n\n" if dated else ""
    user = f"FACTS ON FILE:\n{known_facts_block(known)}\n\n{when}CONVERSATION EXCERPT:\n{transcript}"
    return [("system", EXTRACT_SYSTEM), ("human", user)]


def repair_messages(previous: ChatMessages, reply: str, problem: str) -> ChatMessages:
    return [*previous, ("ai", reply[:4000]), ("human", REPAIR.format(problem=problem))]


def summary_messages(facts_text: str) -> ChatMessages:
    return [("system", SUMMARY_SYSTEM), ("human", f"FACTS:\n{facts_text}")]


def dedup_messages(pairs: Sequence[tuple[Mapping[str, str], Mapping[str, str]]]) -> ChatMessages:
    lines = []
    for number, (new, old) in enumerate(pairs, 1):
        lines.append(f"{number}. NEW {new['category']}/{new['key']}: {one_line(new['value'])}"
                     f"  |  EXISTING {old['category']}/{old['key']}: {one_line(old['value'])}")
    return [("system", DEDUP_SYSTEM), ("human", "\n".join(lines))]
