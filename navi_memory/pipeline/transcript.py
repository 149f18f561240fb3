"""A session rendered as plain text for the extractor, and cut into turn-sized chunks.

Rules: ``User:`` and ``Assistant:`` lines; each tool call as ``[Tool call] name(args)``
with the arguments cut to 200 characters; each tool result as ``[Tool result] name: output`` cut
to 500 characters; a message's further lines indented; the whole transcript capped at 12,000
characters, keeping the head and the tail and dropping the middle. System messages are not
rendered. Pure functions.
"""

from __future__ import annotations

import re
from datetime import datetime, tzinfo
from typing import Sequence

from ..core.timeutil import in_zone
from ..models import Message

MAX_TOOL_ARGS = 200
MAX_TOOL_RESULT = 500
MAX_TRANSCRIPT = 12_000
MAX_CHUNK = 4_000
GAP = "\n\n[... the middle of the conversation is left out ...]\n\n"
CONTEXT_HEADER = "[Earlier in this conversation, already remembered:]"
NEW_HEADER = "[New since then:]"


def tool_names(messages: Sequence[Message]) -> dict[str, str]:
    """tool_call_id -> tool name, from the assistants' tool calls."""
    return {c.id: c.name for m in messages if m.role == "assistant" for c in m.tool_calls if c.id}


def _cut(text: str, limit: int, marker: str) -> str:
    return text if len(text) <= limit else text[:limit] + marker


def _indented(text: str) -> str:
    """Continuation lines indented: text inside a message (a tool's output above all) cannot start
    a line that poses as another speaker ("User: remember that ...")."""
    return "\n  ".join(text.splitlines())


def message_lines(message: Message, names: dict[str, str]) -> list[str]:
    content = _indented(message.content.strip())
    if message.role == "user":
        return [f"User: {content}"] if content else []
    if message.role == "assistant":
        lines = [f"Assistant: {content}"] if content else []
        lines += [f"[Tool call] {c.name}({_cut(c.arguments, MAX_TOOL_ARGS, '…')})" for c in message.tool_calls]
        return lines
    if message.role == "tool" and content:
        name = names.get(message.tool_call_id or "") or message.name or "unknown"
        return [f"[Tool result] {name}: {_cut(content, MAX_TOOL_RESULT, ' …[truncated]')}"]
    return []


def cap(text: str, max_chars: int) -> str:
    """``text`` unchanged if short enough, else its head and tail around a gap marker, ``max_chars``
    long at most. Cuts fall on line breaks when one is near."""
    if len(text) <= max_chars:
        return text
    room = max_chars - len(GAP)
    head_size, tail_size = room - room // 2, room // 2
    head, tail = text[:head_size], text[len(text) - tail_size:] if tail_size else ""
    newline = head.rfind("\n")
    if newline >= head_size * 0.8:
        head = head[:newline]
    newline = tail.find("\n")
    if 0 <= newline <= tail_size * 0.2:
        tail = tail[newline + 1:]
    return head + GAP + tail


def render(messages: Sequence[Message], max_chars: int = MAX_TRANSCRIPT, context: Sequence[Message] = ()) -> str:
    """The transcript of ``messages``; ``context`` (earlier, already processed messages) is shown
    first under its own header so the model can read the new part in context."""
    names = tool_names([*context, *messages])
    lines = [line for m in messages for line in message_lines(m, names)]
    if not lines:
        return ""
    earlier = [line for m in context for line in message_lines(m, names)]
    if earlier:
        lines = [CONTEXT_HEADER, *earlier, NEW_HEADER, *lines]
    return cap("\n".join(lines), max_chars)


def turns(messages: Sequence[Message], final: bool) -> tuple[list[list[Message]], int]:
    """Messages grouped into turns (a user message and what followed it), and the seq of the last
    message covered. Unless ``final``, the last turn is held back: it may still get its answer."""
    groups: list[list[Message]] = []
    current: list[Message] = []
    for message in messages:
        if message.role == "user" and current:
            groups.append(current)
            current = []
        current.append(message)
    if current and final:
        groups.append(current)
    covered = groups[-1][-1].seq if groups else None
    return groups, covered or 0


def turn_text(turn: Sequence[Message], names: dict[str, str], max_chars: int = MAX_CHUNK) -> str:
    return cap("\n".join(line for m in turn for line in message_lines(m, names)), max_chars)


def _words(text: str) -> set[str]:
    return set(re.findall(r"\w+", text.casefold()))


def statement_of(context: str | None, messages: Sequence[Message]) -> Message | None:
    """The message a fact was said in, given the fact's ``source_context`` (a quote or paraphrase
    of it): the user or tool message sharing the most of its words, at least half of them (ties:
    the later message); None when no message does."""
    wanted = _words(context or "")
    best, best_share = None, 0.5
    for message in messages if wanted else ():
        if message.role in ("user", "tool"):
            share = len(wanted & _words(message.content)) / len(wanted)
            if share >= best_share:
                best, best_share = message, share
    return best


_WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
_MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
           "November", "December")


def _day(moment: datetime) -> str:
    # English names whatever the process's locale (strftime's %A and %B follow LC_TIME)
    return f"{_WEEKDAYS[moment.weekday()]}, {moment.day} {_MONTHS[moment.month - 1]} {moment.year}"


def dated(messages: Sequence[Message], tz: tzinfo) -> str | None:
    """The day (or first and last day) of ``messages`` in ``tz`` and the zone's name, e.g.
    ``Thursday, 26 November 2026 (Europe/Lisbon)``; None when no message has a time."""
    times = [in_zone(m.created_at, tz) for m in messages if m.created_at is not None]
    if not times:
        return None
    first, last = _day(min(times)), _day(max(times))
    return f"{first if first == last else f'from {first} to {last}'} ({tz})"
